"""Spark roles: a Structured Streaming query as a participant."""
