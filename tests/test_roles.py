from confluent_kafka import KafkaError, KafkaException

from labkit.crashlab.roles import STEPS, kafka_error


def test_kafka_error_is_found_in_every_shape_flush_raises():
    fenced = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
    assert kafka_error(fenced) is fenced
    assert kafka_error(KafkaException(fenced)).name() == "_FENCED"
    try:
        try:
            raise KafkaException(fenced)
        except KafkaException as inner:
            raise SystemError("returned a result with an exception set") from inner
    except SystemError as outer:
        assert kafka_error(outer).fatal()
    assert kafka_error(ValueError("not Kafka")) is None


def test_every_role_has_named_steps_in_loop_order():
    assert STEPS["producer"][0] == "before_produce" and STEPS["processor"][-1] == "after_commit"
