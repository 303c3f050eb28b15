"""A multi-node Kafka cluster on 127.0.0.1: a separate KRaft controller process and N brokers (KRaft isolated
mode), data and internal topics replicated N times, the way a user who outgrows one broker runs Kafka. Each
node is an :class:`~labkit.broker.EmbeddedBroker` JVM that can be killed and restarted on its own."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from kafka import KafkaAdminClient

from labkit.broker.embedded import HEAP_ENV, EmbeddedBroker, new_cluster_id
from labkit.broker.probe import KAFKA_LOG, admin
from labkit.broker.settings import kafka_version
from labkit.core.errors import BrokerStateError, TopicNotFoundError
from labkit.core.waiting import Deadline, wait_until


def replicated(brokers: int) -> dict[str, str]:
    """Broker configs that replicate data and internal topics ``brokers`` times and need ``min(2, brokers)``
    in-sync replicas for an acknowledged (acks=all) write."""
    isr = str(min(2, brokers))
    return {"default.replication.factor": str(brokers), "min.insync.replicas": isr,
            "offsets.topic.replication.factor": str(brokers), "transaction.state.log.replication.factor": str(brokers),
            "transaction.state.log.min.isr": isr, "share.coordinator.state.topic.replication.factor": str(brokers),
            "share.coordinator.state.topic.min.isr": isr}


#: Each node's heap cap (MiB) unless given or the hub's: four JVMs at the single broker's 768 would let a laptop's
#: cluster grow past what notebook 09 needs.
HEAP_MB = 384


class EmbeddedCluster:
    """A controller (``node.id`` 1) and ``brokers`` brokers (node ids 2, 3, ...), each its own JVM; the same
    life cycle as :class:`~labkit.broker.EmbeddedBroker` (start, stop, close, context manager), plus
    :meth:`kill` / :meth:`restart` of one node and :meth:`transaction_coordinator`.

    Args:
        brokers: how many brokers (replication factor of every topic).
        data_dir: parent folder of the nodes' folders (``node-<id>``); ``None``: a temporary one, removed by
            :meth:`close`.
        version: Kafka release (default ``$LABKIT_KAFKA_VERSION``, else 4.4.0).
        heap_mb: each JVM's heap cap, in MiB; ``None``: ``$LABKIT_BROKER_HEAP_MB`` if set (the hub's cap, with its
            small-heap collector: :class:`EmbeddedBroker`), else :data:`HEAP_MB` (a node holds a lab's few topics).
        **overrides: broker configs for every node, over the lab settings and :func:`replicated`.
    Raises:
        ValueError: ``brokers`` < 1.
        From :meth:`start`: what :meth:`EmbeddedBroker.start` raises, for the node that failed.
    """

    def __init__(self, brokers: int = 3, data_dir: str | Path | None = None, *, version: str | None = None,
                 heap_mb: int | None = None, **overrides: object) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least 1 broker, not {brokers}")
        self.version = kafka_version(version)
        self._owns_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="labkit-cluster-") if data_dir is None else data_dir)
        cluster_id = new_cluster_id()
        settings = {**replicated(brokers), **overrides}
        if heap_mb is None and HEAP_ENV not in os.environ:
            heap_mb = HEAP_MB
        self.controller = EmbeddedBroker(self.data_dir / "node-1", version=self.version, heap_mb=heap_mb,
                                         roles="controller", node_id=1, cluster_id=cluster_id, **settings)
        self.brokers = {node: EmbeddedBroker(self.data_dir / f"node-{node}", version=self.version, heap_mb=heap_mb,
                                             roles="broker", node_id=node, cluster_id=cluster_id, **settings)
                        for node in range(2, brokers + 2)}

    @property
    def nodes(self) -> dict[int, EmbeddedBroker]:
        """Every node by ``node.id``: the controller (1) and the brokers."""
        return {1: self.controller, **self.brokers}

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's address, comma-separated ("127.0.0.1:p1,127.0.0.1:p2,...").

        Raises:
            BrokerStateError: never started.
        """
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    @property
    def live_bootstrap(self) -> str:
        """The running brokers' addresses, comma-separated: what a client given only live brokers would use.

        Raises:
            BrokerStateError: no broker runs.
        """
        live = [b.bootstrap_servers for b in self.brokers.values() if b.is_running]
        if not live:
            raise BrokerStateError(f"no broker of {self!r} runs")
        return ",".join(live)

    def partition_state(self, topic: str, partition: int = 0, timeout_s: float = 10.0) -> dict:
        """A partition as the cluster reports it now: a Metadata request to the running brokers (``leader``, a node
        id or ``None`` while the partition is offline; ``replicas`` and ``isr``, node ids, as the controller last
        published them) and a ListOffsets request to the leader (``high_watermark``, an offset: the end of what the
        in-sync replicas hold, KIP-101; ``None`` while offline). Returns
        ``{"leader", "replicas", "isr", "high_watermark", "live"}`` (``live``: the brokers running, by the lab).

        Raises:
            TopicNotFoundError: no such topic or partition.
            BrokerStateError: no broker runs.
            confluent_kafka.KafkaException: no broker answered within ``timeout_s`` seconds.
        """
        bootstrap = self.live_bootstrap
        meta = admin(bootstrap, timeout_s).list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or partition not in meta.partitions:
            raise TopicNotFoundError(f"no partition {topic}-{partition} in {self!r}")
        p = meta.partitions[partition]
        leader = p.leader if p.leader >= 0 else None
        hw = None
        if leader is not None:
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "labkit-partition-state",
                                 "enable.auto.commit": False, "logger": KAFKA_LOG})
            try:
                hw = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)[1]
            except KafkaException:  # the leader the metadata named died since: offline as far as a reader knows
                hw = None
            finally:
                consumer.close()
        return {"leader": leader, "replicas": list(p.replicas), "isr": sorted(p.isrs), "high_watermark": hw,
                "live": [n for n, b in self.brokers.items() if b.is_running]}

    def await_partition(self, topic: str, test: Callable[[dict], bool], what: str, partition: int = 0,
                        timeout_s: float = 60.0) -> dict:
        """Poll :meth:`partition_state` (every 0.1 s) until ``test(state)`` holds; return that state. ``what``: the
        awaited condition in words, for the error.

        Raises:
            TimeoutError: not within ``timeout_s`` seconds; the message gives ``what`` and the last state seen.
        """
        deadline, state = Deadline(timeout_s), {}

        def reached() -> bool:
            nonlocal state
            try:
                state = self.partition_state(topic, partition, min(5.0, max(0.5, deadline.remaining_s())))
            except KafkaException as exc:  # no answer in time: the cluster is busy electing; look again
                state = {"error": str(exc)}
                return False
            return test(state)

        if not wait_until(reached, timeout_s):
            raise TimeoutError(f"{topic}-{partition}: {what} did not happen within {timeout_s:g} s (last seen: {state})")
        return state

    def kill_leader(self, topic: str, partition: int = 0) -> int:
        """SIGKILL the broker that leads ``topic``'s ``partition`` now (:meth:`partition_state`); returns its node id.

        Raises:
            BrokerStateError: the partition has no leader (offline).
            TopicNotFoundError: no such topic or partition.
        """
        leader = self.partition_state(topic, partition)["leader"]
        if leader is None:
            raise BrokerStateError(f"{topic}-{partition} has no leader to kill: it is offline")
        self.kill(leader)
        return leader

    def leaders(self, topic: str) -> set[int]:
        """The node ids that lead one of ``topic``'s partitions now (e.g. ``__transaction_state``: the brokers that
        coordinate transactions). Raises as :meth:`partition_state`; a missing topic leads nowhere (empty set)."""
        meta = admin(self.live_bootstrap).list_topics(topic, timeout=10).topics.get(topic)
        return {p.leader for p in (meta.partitions.values() if meta and meta.error is None else []) if p.leader >= 0}

    def start(self) -> "EmbeddedCluster":
        """Start the controller, then each broker (in turn: a JVM started from a thread would die with it)."""
        self.controller.start()
        for broker in self.brokers.values():
            broker.quorum = f"127.0.0.1:{self.controller.controller_port}"
            broker.start()
        return self

    def kill(self, node_id: int) -> None:
        """SIGKILL one node's JVM (a crash). Raises :class:`BrokerStateError` for an unknown or stopped node."""
        self._node(node_id).kill()

    def restart(self, node_id: int) -> EmbeddedBroker:
        """Start one node again on its data and ports (stopping it first if it runs); returns it once ready."""
        return self._node(node_id).restart()

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The ``node.id`` of the broker that coordinates ``transactional_id`` (DescribeTransactions).

        Raises:
            kafka.errors.TransactionalIdNotFoundError: no producer ever initialised it.
        """
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)
        try:
            return admin.describe_transactions([transactional_id])[transactional_id].coordinator_id
        finally:
            admin.close()

    def stop(self) -> None:
        """Stop every node cleanly, brokers first. Data is kept."""
        for node in [*self.brokers.values(), self.controller]:
            node.stop()

    def close(self) -> None:
        """Stop every node and remove the data folder if labkit created it."""
        for node in [*self.brokers.values(), self.controller]:
            node.close()
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "EmbeddedCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        up = [n for n, node in self.nodes.items() if node.is_running]
        return f"EmbeddedCluster(Kafka {self.version}, controller 1 + brokers {list(self.brokers)}, running {up})"

    def _node(self, node_id: int) -> EmbeddedBroker:
        if node_id not in self.nodes:
            raise BrokerStateError(f"no node {node_id}: the nodes are {', '.join(map(str, self.nodes))}")
        return self.nodes[node_id]
