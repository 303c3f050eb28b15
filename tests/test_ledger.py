"""labkit.kafka.ledger: every topic the lab creates is entered with its cluster's id, and only those."""

from confluent_kafka.admin import NewTopic

from labkit.broker.probe import admin
from labkit.kafka.ledger import ledger, record_created_topic, rows
from labkit.kafka.records import create_topic


def test_a_created_topic_is_entered_with_its_clusters_id(bootstrap, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_HOME", str(tmp_path))
    assert rows() == [] and not ledger().exists()
    topic = create_topic(bootstrap, "ledger")
    admin(bootstrap).create_topics([NewTopic(f"orders-{tmp_path.name}", 1, 1)])  # not the lab's: not entered
    assert rows() == [{"cluster": admin(bootstrap).list_topics(timeout=10).cluster_id, "topic": topic}]
    record_created_topic("another", "x")
    assert [r["topic"] for r in rows()] == [topic, "x"] and ledger() == tmp_path / "lab" / "created-topics.jsonl"
