"""Kafka admin and wire helpers: records and offsets, producer ids, hanging transactions, the share-group wire
requests and the ``__share_group_state`` decoder, and the committed-offset guard of a librdkafka consumer."""
