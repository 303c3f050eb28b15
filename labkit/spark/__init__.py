"""Spark for the lab: a SparkSession with Spark's Kafka connector (:mod:`labkit.spark.session`) and a
local standalone cluster (:mod:`labkit.spark.cluster`)."""

from labkit.spark.session import SPARK_VERSION, connector_jars, spark_master, spark_session

__all__ = ["SPARK_VERSION", "connector_jars", "spark_master", "spark_session"]
