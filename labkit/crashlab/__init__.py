"""The crash lab: one history per experiment, and the exactly-once checker that reads it."""
