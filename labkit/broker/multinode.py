"""A multi-node Kafka cluster on 127.0.0.1: a separate KRaft controller process and N brokers (KRaft isolated
mode), data and internal topics replicated N times, the way a user who outgrows one broker runs Kafka. Each
node is an :class:`~labkit.broker.EmbeddedBroker` JVM that can be killed and restarted on its own."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from kafka import KafkaAdminClient

from labkit.broker.embedded import EmbeddedBroker, new_cluster_id
from labkit.broker.settings import kafka_version
from labkit.errors import BrokerStateError


def replicated(brokers: int) -> dict[str, str]:
    """Broker configs that replicate data and internal topics ``brokers`` times and need ``min(2, brokers)``
    in-sync replicas for an acknowledged (acks=all) write."""
    isr = str(min(2, brokers))
    return {"default.replication.factor": str(brokers), "min.insync.replicas": isr,
            "offsets.topic.replication.factor": str(brokers), "transaction.state.log.replication.factor": str(brokers),
            "transaction.state.log.min.isr": isr, "share.coordinator.state.topic.replication.factor": str(brokers),
            "share.coordinator.state.topic.min.isr": isr}


class EmbeddedCluster:
    """A controller (``node.id`` 1) and ``brokers`` brokers (node ids 2, 3, ...), each its own JVM; the same
    life cycle as :class:`~labkit.broker.EmbeddedBroker` (start, stop, close, context manager), plus
    :meth:`kill` / :meth:`restart` of one node and :meth:`transaction_coordinator`.

    Args:
        brokers: how many brokers (replication factor of every topic).
        data_dir: parent folder of the nodes' folders (``node-<id>``); ``None``: a temporary one, removed by
            :meth:`close`.
        version: Kafka release (default ``$LABKIT_KAFKA_VERSION``, else 4.4.0).
        heap_mb: each JVM's heap cap, in MiB.
        **overrides: broker configs for every node, over the lab settings and :func:`replicated`.
    Raises:
        ValueError: ``brokers`` < 1.
        From :meth:`start`: what :meth:`EmbeddedBroker.start` raises, for the node that failed.
    """

    def __init__(self, brokers: int = 3, data_dir: str | Path | None = None, *, version: str | None = None,
                 heap_mb: int = 512, **overrides: object) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least 1 broker, not {brokers}")
        self.version = kafka_version(version)
        self._owns_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="labkit-cluster-") if data_dir is None else data_dir)
        cluster_id = new_cluster_id()
        settings = {**replicated(brokers), **overrides}
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
