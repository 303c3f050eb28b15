"""The lab's basic roles: producer, consumer and the consume-transform-produce processor."""
