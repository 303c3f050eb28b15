"""The multi-node cluster: a separate KRaft controller and three brokers, everything replicated three times;
a transaction coordinator killed between two transactions of one transactional.id, on real JVMs."""

import uuid

import pytest

from labkit.broker.multinode import EmbeddedCluster, replicated
from labkit.broker.probe import READY_TOPIC, admin, lists_broker
from labkit.core.errors import BrokerStateError
from labkit.kafka.producers import describe_producers
from labkit.kafka.records import create_topic, produce, read_topic


def test_replication_settings_and_bad_input():
    assert replicated(3)["transaction.state.log.replication.factor"] == "3"
    assert replicated(1)["min.insync.replicas"] == "1" and replicated(3)["min.insync.replicas"] == "2"
    with pytest.raises(ValueError, match="at least 1 broker"):
        EmbeddedCluster(0)


def test_transactions_survive_killing_their_coordinator_and_a_broker_restarts_while_another_is_down(tmp_path):
    with EmbeddedCluster(3, tmp_path / "c") as cluster:
        bs = cluster.bootstrap_servers
        assert len(bs.split(",")) == 3 and all(n.is_running for n in cluster.nodes.values())
        assert (tmp_path / "c" / "node-1" / "server.properties").read_text().count("process.roles=controller") == 1
        topic = create_topic(bs, "replicated")  # the cluster's default.replication.factor: on every broker
        client = admin(bs)
        assert sorted(client.list_topics(topic, timeout=10).topics[topic].partitions[0].replicas) == [2, 3, 4]
        tid = f"mn-{uuid.uuid4().hex[:6]}"
        produce(bs, topic, ["a", "b"], transactional_id=tid)
        coordinator = cluster.transaction_coordinator(tid)
        assert coordinator in cluster.brokers

        cluster.kill(coordinator)  # a replica of __transaction_state takes over as coordinator
        assert not cluster.nodes[coordinator].is_running
        produce(bs, topic, ["c"], transactional_id=tid, timeout_s=90)  # the failover may take a while on a loaded machine
        assert cluster.transaction_coordinator(tid) not in (coordinator, 1)
        assert list(read_topic(bs, topic, "read_committed").value) == ["a", "b", "c"]
        assert not describe_producers(bs, topic).empty

        cluster.restart(coordinator)
        assert cluster.nodes[coordinator].is_running
        # A cluster's broker is ready once unfenced and serving, whatever another broker's state: no broker needs the
        # single-node probe topic (one replica, which led on one broker: a restart while that one was down never
        # came ready), and a broker restarts while another is down.
        assert READY_TOPIC not in client.list_topics(timeout=10).topics
        down, other = list(cluster.brokers)[:2]
        cluster.kill(down)
        cluster.restart(other)
        assert lists_broker(bs, other) and not cluster.nodes[down].is_running
        cluster.restart(down)
        with pytest.raises(BrokerStateError, match="no node 9"):
            cluster.kill(9)
    assert not any(n.is_running for n in cluster.nodes.values())
