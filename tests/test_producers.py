import uuid

from labkit.kafka.producers import describe_producers, describe_transaction
from labkit.kafka.records import create_topic, produce


def test_idempotent_producers_show_their_id_epoch_and_last_sequence(bootstrap):
    topic = create_topic(bootstrap, "pids")
    produce(bootstrap, topic, ["plain"], **{"enable.idempotence": False})
    produce(bootstrap, topic, ["a", "b", "c"], **{"enable.idempotence": True})
    produce(bootstrap, topic, ["d"], **{"enable.idempotence": True})
    producers = describe_producers(bootstrap, topic)
    assert len(producers) == 2  # two idempotent sessions, two producer ids; the plain one has none
    assert producers.producer_id.is_unique
    assert sorted(producers.last_sequence) == [0, 2]  # sequences count from 0 per producer id


def test_a_later_session_of_the_same_transactional_id_has_a_higher_epoch(bootstrap):
    topic, tid = create_topic(bootstrap, "epoch"), f"t-{uuid.uuid4()}"
    produce(bootstrap, topic, ["a"], transactional_id=tid)
    first = describe_transaction(bootstrap, tid)
    produce(bootstrap, topic, ["b"], transactional_id=tid)
    second = describe_transaction(bootstrap, tid)
    # commit_transaction returns once PREPARE_COMMIT is logged; WriteTxnMarkers may still be under way
    assert {first["state"], second["state"]} <= {"PrepareCommit", "CompleteCommit"}
    assert second["producer_id"] == first["producer_id"]
    assert second["producer_epoch"] > first["producer_epoch"]
