"""Where a page's outputs came from: one line, read when the notebooks run, from the lab's own environment
(confluent-kafka and librdkafka, kafka-clients, PySpark, the run's UTC date) and from the cluster they ran against
(:func:`cluster`: what its broker reports of itself, whichever cluster ``LABKIT_BOOTSTRAP`` names)."""

from __future__ import annotations

import datetime as dt
import functools
from importlib import metadata

#: Kafka's feature flag whose level names the metadata format, one per release line (``4.4-IV2``: Kafka 4.4's).
METADATA_VERSION = "metadata.version"
#: Seconds the broker and the JVM naming the levels each get.
TIMEOUT_S = 30.0

_NAMES_SOURCE = """
import org.apache.kafka.server.common.MetadataVersion;
public class LevelNames { public static void main(String[] levels) {
  for (String l : levels) {
    try { System.out.println(l + " " + MetadataVersion.fromFeatureLevel(Short.parseShort(l)).version()); }
    catch (IllegalArgumentException e) { System.out.println(l + " ?"); }
  }
}}
"""


@functools.lru_cache(maxsize=None)
def level_names(levels: tuple[int, ...], version: str) -> dict[int, str | None]:
    """Kafka's names of ``metadata.version`` feature ``levels`` (e.g. 33 -> ``"4.4-IV2"``), as Kafka ``version``'s
    ``org.apache.kafka.server.common.MetadataVersion`` names them (run on a JVM with its jars); ``None`` for a level
    that release does not know (a newer cluster's).

    Raises:
        labkit.broker.runtime.JavaError: no Java 17+. subprocess.CalledProcessError / TimeoutExpired: the JVM failed or
            ran past :data:`TIMEOUT_S`.
    """
    from labkit.broker.runtime import run_source

    run = run_source(_NAMES_SOURCE, "LevelNames", list(map(str, levels)), version, TIMEOUT_S)
    run.check_returncode()
    names = dict(line.split(" ", 1) for line in run.stdout.splitlines() if line.strip())
    return {level: None if names.get(str(level), "?") == "?" else names[str(level)] for level in levels}


def cluster(bootstrap: str, timeout_s: float = TIMEOUT_S) -> dict[str, str]:
    """What the cluster at ``bootstrap`` reports of its release: ``{"metadata_version": the finalized
    metadata.version's name, "metadata_version_max": the highest its broker supports (its software's release line)}``,
    named by the lab's Kafka release (a level it does not know is given as ``level N``).

    Raises:
        see :func:`labkit.kafka.api_versions.broker_features` and :func:`level_names`.
    """
    from labkit.broker.settings import kafka_version

    from labkit.kafka.api_versions import broker_features

    feature = broker_features(bootstrap, timeout_s).get(METADATA_VERSION, {})
    levels = {"metadata_version": feature.get("finalized"), "metadata_version_max": feature.get("max")}
    names = level_names(tuple(sorted({v for v in levels.values() if v is not None})), kafka_version())
    return {key: (names.get(level) or f"level {level}") if level is not None else "not reported"
            for key, level in levels.items()}


def versions(observed: dict[str, str], embedded: bool) -> dict[str, str]:
    """The versions a run used, by name: ``observed`` (:func:`cluster`, what the cluster reported), whether the book
    started that broker itself (``embedded``: then the release it ran, :func:`labkit.broker.settings.kafka_version`, is
    named too), the kafka-clients release the lab's Java participants run (the same jars), confluent-kafka and
    librdkafka, PySpark, the UTC date."""
    import confluent_kafka

    from labkit.broker.settings import kafka_version

    found = {**observed, "embedded": "yes" if embedded else "", "kafka_clients": kafka_version(),
             "confluent_kafka": metadata.version("confluent-kafka"), "librdkafka": confluent_kafka.libversion()[0],
             "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")}
    try:
        found["spark"] = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        found["spark"] = "not installed"
    return found


def line(v: dict[str, str]) -> str:
    """The provenance sentence (Markdown) of a run with versions ``v`` (:func:`versions`)."""
    reported = f"metadata.version {v['metadata_version']}"
    if v["metadata_version_max"] != v["metadata_version"]:
        reported += f", supports up to {v['metadata_version_max']}"
    release, named = v["metadata_version_max"].partition("-IV")[::2]  # "4.4-IV2": a metadata format of Kafka 4.4
    release = f"Kafka {release}" if named else "Kafka"  # a level the lab's release cannot name: no release said
    broker = (f"Apache Kafka {v['kafka_clients']}, an embedded broker (it reports {reported})" if v["embedded"]
              else f"a {release} cluster (its broker reports {reported})")
    return (f"**A recorded run**, {v['date']} (UTC): {broker}; kafka-clients {v['kafka_clients']}, "
            f"confluent-kafka {v['confluent_kafka']} (librdkafka {v['librdkafka']}), Spark {v['spark']}. "
            "Parts marked MODELLED are a model of Kafka's behaviour, not a measurement of it. "
            "Run it live: `make lab`.")
