"""What is modelled, not in Kafka: proposals no release implements. Every module says MODELLED and names its KIP."""
