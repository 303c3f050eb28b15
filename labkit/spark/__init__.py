"""Spark for the lab: a SparkSession with Spark's Kafka connector (:mod:`labkit.spark.session`), the pipeline's roles
(:mod:`labkit.spark.roles`) and its figure (:mod:`labkit.spark.timeline`). The lab's standalone cluster daemon is
:mod:`labkit.lab.spark_cluster`."""

from labkit.spark.session import SPARK_VERSION, connector_jars, spark_master, spark_session

__all__ = ["SPARK_VERSION", "connector_jars", "spark_master", "spark_session"]
