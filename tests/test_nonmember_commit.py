"""labkit.lessons.nonmember_commit: a transactional producer that is not a member of a group moves the committed
offset of a partition a live member holds, on the real broker (either group protocol), on librdkafka and on Kafka's
own Java client (``new ConsumerGroupMetadata(groupId)``); a plain OffsetCommit with the same metadata is refused; the
MODELLED rules (labkit.models.kip1287) answer as the broker did."""

import struct

import pytest

from labkit.broker.settings import kafka_version
from labkit.crashlab.experiment import Experiment
from labkit.lessons import nonmember_commit as nm
from labkit.kafka.group_metadata import GroupMetadataFormatError
from labkit.models.kip1287 import NONE, UNASSIGNED_PARTITION, UNKNOWN_MEMBER_ID


def test_metadata_fields_of_librdkafkas_serialised_group_metadata():
    raw = b"CGMDv2:" + struct.pack("=i", -1) + b"my-group\0\0\x01"
    assert nm.metadata_fields(raw) == {"generation": -1, "group_id": "my-group", "member_id": ""}
    raw = b"CGMDv2:" + struct.pack("=i", 7) + b"g\0member-1\0\x01"
    assert nm.metadata_fields(raw)["member_id"] == "member-1"
    with pytest.raises(GroupMetadataFormatError):
        nm.metadata_fields(b"something else")


def test_replay_without_a_broker():
    run = {"release": "4.4.0", "member_epoch": 2, "held_by": {"A": [0]},
           "rows": [{"client": "member A", "request": "TxnOffsetCommit", "generation": 2, "answer": NONE},
                    {"client": "non-member", "request": "TxnOffsetCommit", "generation": -1, "answer": NONE},
                    {"client": "non-member", "request": "OffsetCommit", "generation": -1,
                     "answer": UNKNOWN_MEMBER_ID}]}
    txn, plain = nm.replay_nonmember(run)
    assert txn == {"request": "TxnOffsetCommit", "real": NONE, "4.2": NONE, "release": NONE, "kip1287 v5": NONE,
                   "kip1287 v6 (as drafted)": NONE, "kip1287 v6 (non-member checked)": UNASSIGNED_PARTITION}
    assert {v for k, v in plain.items() if k != "request"} == {UNKNOWN_MEMBER_ID}


def test_the_java_outsider_names_its_failure(tmp_path):
    """A JVM that prints no answer is a JavaOutsiderError quoting its stderr (no broker needed: the program refuses
    an unknown METADATA before it connects)."""
    exp = Experiment("nonmember-java-error", "127.0.0.1:9", folder=tmp_path)
    with pytest.raises(nm.JavaOutsiderError, match="METADATA: constructor or consumer:PROTOCOL, not nonsense"):
        nm.java_outsider_commit(exp, "g", "t", {0: 1}, metadata_from="nonsense", deadline_s=60)
    assert [e.kind for e in exp.history.events() if e.participant == nm.JAVA_OUTSIDER] == ["start", "stop"]


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_non_member_moves_a_live_members_committed_offset(bootstrap, tmp_path, protocol):
    exp = Experiment(f"nonmember-{protocol}", bootstrap, folder=tmp_path)
    run = nm.nonmember_commit(exp, protocol)
    member, txn, plain, java, java_consumer = run["rows"]
    assert run["release"] == kafka_version() and run["outsider"]["generation"] == -1
    assert run["outsider"]["member_id"] == "" and run["outsider"]["group_id"] == run["group"]
    assert run["held_by"] == {run["member_id"]: [0]}, run["held_by"]  # A is a member and holds partition 0 throughout
    assert (member["answer"], member["committed before"], member["committed after"]) == (NONE, -1001, 3), member
    assert (txn["answer"], txn["committed after"]) == (NONE, 9), txn  # the non-member's offset is the group's
    assert (plain["answer"], plain["committed after"]) == (UNKNOWN_MEMBER_ID, 9), plain
    # Kafka's Java client, ConsumerGroupMetadata(String): the same three fields, the same answer
    constructor, consumer = run["java"]
    assert (constructor["generation"], constructor["member_id"], constructor["group_instance_id"]) == (-1, "", None)
    assert constructor["client"] == f"kafka-clients {kafka_version()}", constructor
    assert (java["library"], java["request"], java["generation"], java["member id"]) == (
        "kafka-clients (Java)", "TxnOffsetCommit", -1, "(none)"), java
    assert (java["answer"], java["committed before"], java["committed after"]) == (NONE, 9, 10), constructor
    # ... and with KafkaConsumer#groupMetadata() of a consumer that never subscribes (KIP-1136's replacement)
    assert consumer["metadata_from"] == f"consumer:{protocol}", consumer
    assert (consumer["generation"], consumer["member_id"], consumer["group_instance_id"]) == (-1, "", None), consumer
    assert (java_consumer["answer"], java_consumer["committed after"]) == (NONE, 11), consumer
    replayed = nm.replay_nonmember(run)
    assert [r["real"] for r in replayed] == [r["release"] for r in replayed] == [NONE, UNKNOWN_MEMBER_ID]
    assert replayed[0]["kip1287 v6 (as drafted)"] == NONE
    sent = [(e.offset, e.error) for e in exp.history.events()
            if e.kind == "offsets_sent" and e.participant == nm.OUTSIDER]
    assert sent == [(9, None), (7, UNKNOWN_MEMBER_ID)], sent
    java_sent = [(e.offset, e.error) for e in exp.history.events()
                 if e.kind == "offsets_sent" and e.participant == nm.JAVA_OUTSIDER]
    assert java_sent == [(10, None), (11, None)], java_sent
