"""What a broker supports of Kafka's wire protocol, as the broker itself answers: an **ApiVersions** request (API key
18, KIP-35; v3, flexible, KIP-511) lists every API key its listener accepts, each with its oldest and newest version.
No jar and no JVM on this machine: it works against any cluster (``LABKIT_BOOTSTRAP``, docker compose's).

The broker answers numbers only. Kafka's name of each key (:data:`API_NAMES`) is the ``name`` of its request
definition in apache/kafka ``clients/src/main/resources/common/message/*Request.json`` (the ``ApiKeys`` enum is
generated from them), as of 4.4.0. A key is never given to another request, so every release names the keys it has
alike (tests/test_api_versions.py compares the table with the kafka-clients jar of each release labkit runs).
"""

from __future__ import annotations

from labkit.kafka.wire import API_VERSIONS_KEY, Reader, WireError, Writer, call, error_name

#: Kafka's API keys and their requests' names (apache/kafka 4.4.0, ``common/message/*Request.json``). A broker's
#: listener answers to most of them; the others go to the controllers (e.g. 52-54, KRaft's Vote, BeginQuorumEpoch,
#: EndQuorumEpoch) or are gone with ZooKeeper (4-7).
API_NAMES: dict[int, str] = dict(enumerate((
    "Produce", "Fetch", "ListOffsets", "Metadata", "LeaderAndIsr", "StopReplica", "UpdateMetadata",
    "ControlledShutdown", "OffsetCommit", "OffsetFetch", "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup",
    "SyncGroup", "DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics", "DeleteTopics",
    "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn",
    "WriteTxnMarkers", "TxnOffsetCommit", "DescribeAcls", "CreateAcls", "DeleteAcls", "DescribeConfigs",
    "AlterConfigs", "AlterReplicaLogDirs", "DescribeLogDirs", "SaslAuthenticate", "CreatePartitions",
    "CreateDelegationToken", "RenewDelegationToken", "ExpireDelegationToken", "DescribeDelegationToken",
    "DeleteGroups", "ElectLeaders", "IncrementalAlterConfigs", "AlterPartitionReassignments",
    "ListPartitionReassignments", "OffsetDelete", "DescribeClientQuotas", "AlterClientQuotas",
    "DescribeUserScramCredentials", "AlterUserScramCredentials", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch",
    "DescribeQuorum", "AlterPartition", "UpdateFeatures", "Envelope", "FetchSnapshot", "DescribeCluster",
    "DescribeProducers", "BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker", "DescribeTransactions",
    "ListTransactions", "AllocateProducerIds", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
    "ControllerRegistration", "GetTelemetrySubscriptions", "PushTelemetry", "AssignReplicasToDirs",
    "ListConfigResources", "DescribeTopicPartitions", "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch",
    "ShareAcknowledge", "AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter", "InitializeShareGroupState",
    "ReadShareGroupState", "WriteShareGroupState", "DeleteShareGroupState", "ReadShareGroupStateSummary",
    "StreamsGroupHeartbeat", "StreamsGroupDescribe", "DescribeShareGroupOffsets", "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets", "StreamsGroupTopologyDescriptionUpdate", "UnregisterController",
)))


def broker_api_versions(bootstrap: str, timeout_s: float = 5.0) -> dict[int, tuple[int, int]]:
    """Every API key the broker at ``bootstrap``'s first address accepts, with its oldest and newest version, as that
    broker answers an ApiVersions v3 request: ``{api_key: (min_version, max_version)}``, by key. Kafka 4.4.0's
    broker listener, e.g., answers ``28: (0, 6)`` (TxnOffsetCommit) and ``93: (0, 0)``; 4.3.2's ``28: (0, 5)`` and
    no 93.

    Args:
        bootstrap: "host:port[,host:port]".
        timeout_s: the connection's and the answer's deadline, s.
    Raises:
        labkit.core.errors.BrokerUnreachableError: no answer within ``timeout_s``.
        WireError: the broker answered ApiVersions with an error (named).
    """
    return _answer(bootstrap, timeout_s)[0]


def broker_features(bootstrap: str, timeout_s: float = 5.0) -> dict[str, dict[str, int | None]]:
    """The features the broker at ``bootstrap``'s first address reports in the same ApiVersions v3 answer (KIP-584's
    tagged fields: tag 0 SupportedFeatures, tag 2 FinalizedFeatures): ``{name: {"min": supported min, "max": supported
    max, "finalized": the cluster's level or None}}``, e.g. ``{"metadata.version": {"min": 7, "max": 33,
    "finalized": 33}, ...}``.

    Raises:
        the same as :func:`broker_api_versions`.
    """
    return _answer(bootstrap, timeout_s)[1]


def _answer(bootstrap: str, timeout_s: float) -> tuple[dict[int, tuple[int, int]], dict[str, dict[str, int | None]]]:
    """An ApiVersions v3 request to ``bootstrap``'s first address, its answer parsed: (the API keys, the features)."""
    body = Writer().compact_string("labkit").compact_string("1").no_tags().bytes()  # ClientSoftwareName, -Version
    r = call(bootstrap.split(",")[0], API_VERSIONS_KEY, 3, body, timeout_s)
    code = r.int16()
    if code:
        raise WireError(f"ApiVersions to {bootstrap}: {error_name(code)}")

    def api(r: Reader) -> tuple[int, tuple[int, int]]:
        key, low, high = r.int16(), r.int16(), r.int16()
        r.tags()
        return key, (low, high)

    apis = dict(sorted(r.compact_array(api)))
    r.int32()  # throttle_time_ms
    tags = r.tags()
    features: dict[str, dict[str, int | None]] = {}

    def supported(r: Reader) -> None:
        name, low, high = r.compact_string(), r.int16(), r.int16()
        r.tags()
        features[name] = {"min": low, "max": high, "finalized": None}

    def finalized(r: Reader) -> None:
        name, high = r.compact_string(), r.int16()
        r.int16()  # the finalized min version level: not kept
        r.tags()
        features.setdefault(name, {"min": None, "max": None})["finalized"] = high

    Reader(tags.get(0, b"\x01")).compact_array(supported)  # an empty compact array when the tag is absent
    Reader(tags.get(2, b"\x01")).compact_array(finalized)
    return apis, features


def api_name(api_key: int) -> str:
    """Kafka's name of request ``api_key`` (:data:`API_NAMES`), or ``"unnamed key <n>"`` for a key newer than the
    table (a later release's)."""
    return API_NAMES.get(api_key, f"unnamed key {api_key}")
