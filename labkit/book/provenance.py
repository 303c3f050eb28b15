"""Where a page's outputs came from: one line, read from the lab's own environment when the notebooks run (Kafka
release, confluent-kafka and librdkafka, kafka-clients, PySpark, the run's UTC date)."""

from __future__ import annotations

import datetime as dt
from importlib import metadata


def versions() -> dict[str, str]:
    """The versions a run used, by name. The broker and kafka-clients are the same Kafka release (the embedded broker's
    jars, :func:`labkit.broker.settings.kafka_version`); with ``LABKIT_BOOTSTRAP`` set to another cluster its own
    release may differ (said so)."""
    import confluent_kafka

    from labkit.broker.settings import kafka_version

    kafka = kafka_version()
    found = {"kafka": kafka, "kafka_clients": kafka, "confluent_kafka": metadata.version("confluent-kafka"),
             "librdkafka": confluent_kafka.libversion()[0],
             "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")}
    try:
        found["spark"] = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        found["spark"] = "not installed"
    return found


def line(v: dict[str, str]) -> str:
    """The provenance sentence (Markdown) of a run with versions ``v`` (:func:`versions`)."""
    return (f"**A recorded run**, {v['date']} (UTC): Apache Kafka {v['kafka']} (kafka-clients {v['kafka_clients']}), "
            f"confluent-kafka {v['confluent_kafka']} (librdkafka {v['librdkafka']}), Spark {v['spark']}. "
            "Parts marked MODELLED are a model of Kafka's behaviour, not a measurement of it. "
            "Run it live: `make lab`.")
