"""Makes the class-data sharing archives (:mod:`labkit.broker.cds`) of the JVMs the lab starts by the hundred: the
broker's and the Java participant's, once per Kafka release, JDK and participant source (``python -m labkit jars``
does it after resolving the jars; ``make lab`` and ``make test`` run that).

The archive holds the classes one typical run loaded: a broker started, serving a transactional producer (KIP-98) and
a group consumer (KIP-848), then stopped with SIGTERM, when the JVM writes the archive; the Java participant's from
the same transactional producer and consumer run to their end. Classes a later run needs
beyond those load as usual. About 20 s of wall time per release, once.
"""

from __future__ import annotations

import json
import subprocess
import tempfile

from labkit.broker import EmbeddedBroker, cds, runtime
from labkit.crashlab import java
from labkit.crashlab.experiment import Experiment

#: How long one archive run's participant may take (s), on a machine twice as slow as a laptop.
RUN_TIMEOUT_S = 180


def make_archives(version: str) -> list[str]:
    """Make the broker's and the Java participant's archives for Kafka ``version`` where they are missing; returns
    what was made (e.g. ``["broker", "participant"]``).

    Raises:
        JavaError, MavenError: no Java 17+ (a JDK for the participant) or no jars.
        BrokerExitedError, BrokerNotReadyError: the broker did not start.
        subprocess.TimeoutExpired: a participant ran past :data:`RUN_TIMEOUT_S`.
    """
    jvm, cp = runtime.find_java(), runtime.classpath(runtime.ensure_jars(version=version, progress=False))
    participant_cp = java.class_path(version)
    made = []
    with tempfile.TemporaryDirectory(prefix="labkit-cds-") as tmp:
        if not cds.archive("broker", jvm, cp).exists():
            with cds.dumping("broker", jvm, cp) as flags:
                broker = EmbeddedBroker(version=version, class_data=flags).start()
                try:
                    _run_participants(broker.bootstrap_servers, tmp, version, [])
                finally:
                    broker.close()  # SIGTERM: the JVM writes the archive as it ends
            made.append("broker")
        if not cds.archive("participant", jvm, participant_cp).exists():
            with cds.dumping("participant", jvm, participant_cp) as flags, \
                    EmbeddedBroker(version=version) as broker:
                _run_participants(broker.bootstrap_servers, tmp, version, flags)
            made.append("participant")
    return made


def _run_participants(bootstrap: str, folder: str, version: str, class_data: list[str]) -> None:
    """A transactional producer and a group consumer of its records; the Java participant's
    processes run with ``class_data`` (the dumping flags when its archive is made)."""
    exp = Experiment("cds", bootstrap, folder=folder)
    topic = exp.topic("records")
    specs = [exp.participant("producer", "producer", client="java", topic=topic, mode="transactional",
                             transactional_id=f"{topic}-tid", iterations=3, batch=5),
             exp.participant("consumer", "consumer", client="java", topic=topic, group_id=f"{topic}-group",
                             idle_ms=1000)]
    for p in specs:
        subprocess.run([*java.command(version, class_data=class_data), json.dumps(p.spec)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=RUN_TIMEOUT_S)
