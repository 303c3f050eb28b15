"""The KIP drafts' wire numbers against the running release, and one consumer-group request.

* **The drafts' numbers.** :func:`draft_collisions` compares the numbers the KIP drafts chose with what the running
  release has at each: its API keys and versions as the broker itself answers ApiVersions
  (:mod:`labkit.kafka.api_versions`: no jar, no JVM here), and its error codes, which no request lists: those are the
  ``org.apache.kafka.common.protocol.Errors`` enum of the release's kafka-clients jar, read by running
  ``Errors.forCode`` on a JVM (Java 17+, the one the broker runs on) with the jars of labkit's cache,
  ``~/.cache/labkit/kafka-<version>/`` (:mod:`labkit.broker.runtime`).
* **ConsumerGroupDescribe** (API key 69, v0, KIP-848), sent over a socket: each member's epoch and
  assignment, which confluent-kafka's ``describe_consumer_groups`` does not show.
"""

from __future__ import annotations

import functools
from pathlib import Path

from labkit.broker.runtime import jar_dir, run_source
from labkit.broker.settings import kafka_version
from labkit.core.errors import LabkitError
from labkit.kafka.api_versions import api_name, broker_api_versions
from labkit.kafka.wire import Reader, assignment, describe_group


class ProtocolError(LabkitError):
    """The release's protocol definitions could not be read (the message names the fix)."""


def clients_jar(version: str | None = None) -> Path:
    """The kafka-clients jar of Kafka ``version`` (default: the running release) in labkit's jar cache.

    Raises:
        ProtocolError: the jar is not cached (run ``python -m labkit jars <version>``).
    """
    version = kafka_version(version)
    jar = jar_dir(version=version) / f"kafka-clients-{version}.jar"
    if not jar.exists():
        raise ProtocolError(f"{jar} is missing: run `.venv/bin/python -m labkit jars {version}` (`make jars`) to "
                            "fetch Kafka's jars from Maven Central once (Maven; `make lab` does it too, but not with "
                            "LABKIT_BOOTSTRAP set).")
    return jar


_ERRORS_SOURCE = """
import org.apache.kafka.common.protocol.Errors;
public class ErrorNames { public static void main(String[] codes) {
  for (String c : codes) { Errors e = Errors.forCode(Short.parseShort(c)); System.out.println(c + " " + e.code() + " " + e.name()); }
}}
"""


@functools.lru_cache(maxsize=None)
def _error_names(codes: tuple[int, ...], version: str) -> dict[int, str | None]:
    jar = clients_jar(version)  # the clear error when the release was never fetched
    run = run_source(_ERRORS_SOURCE, "ErrorNames", list(map(str, codes)), version, 120)  # all jars: Errors logs via slf4j
    if run.returncode:
        raise ProtocolError(f"reading Errors from {jar.name} failed (exit {run.returncode}): {run.stderr.strip()[-500:]}")
    out = {}
    for line in run.stdout.splitlines():
        asked, code, name = line.split()
        out[int(asked)] = name if int(code) == int(asked) else None  # forCode answers UNKNOWN_SERVER_ERROR (-1)
    return out


def error_names(codes: list[int], version: str | None = None) -> dict[int, str | None]:
    """Error code to its name in Kafka ``version`` (``Errors.forCode`` in its kafka-clients jar, run on a
    JVM: about a second), ``None`` for a code the release does not define; e.g. ``{134:
    "GROUP_DELETION_FAILED"}`` in 4.4.0, ``{134: None}`` in 4.3.2.

    Raises:
        ProtocolError: the jar is missing, or the JVM failed (its error output quoted).
        labkit.core.errors.JavaError: no Java 17+.
    """
    return _error_names(tuple(codes), kafka_version(version))


#: TxnOffsetCommit's API key.
TXN_OFFSET_COMMIT_KEY = 28
#: The numbers the KIP drafts chose for what they add: (draft, what, kind, number). Sources: seed 001 (KIP-1287:
#: "UNASSIGNED_PARTITION (code 134)", "TxnOffsetCommitRequest and TxnOffsetCommitResponse are both bumped to
#: version 6"), apache/kafka PR #22357 (KIP-1289's draft: "TxnShareAcknowledgeRequest / TxnShareAcknowledgeResponse
#: (apiKey 93, v0)"; seed 000 has "apiKey": TBD).
DRAFT_NUMBERS = (
    ("KIP-1287", "error UNASSIGNED_PARTITION", "error code", 134),
    ("KIP-1287", "TxnOffsetCommit with assignment validation", "TxnOffsetCommit version", 6),
    ("KIP-1289", "TxnShareAcknowledge request", "API key", 93),
)


def draft_collisions(bootstrap: str, *, error_codes: bool = True, version: str | None = None) -> list[dict]:
    """What the running release already has at each number of :data:`DRAFT_NUMBERS`: one dict per number, ``{"draft",
    "proposes", "kind", "number", "in_release", "taken"}``, where ``in_release`` is what the release has there or
    ``None`` if the number is free, and ``taken`` says whether it is. The API key and the TxnOffsetCommit version are
    asked of the broker at ``bootstrap`` (ApiVersions: the request it accepts at that key, by Kafka's name, with its
    versions; the versions of TxnOffsetCommit it accepts); the error code is read from the release's jar
    (:func:`error_names`). Kafka 4.4.0: all three are taken (GROUP_DELETION_FAILED; TxnOffsetCommit v6, KIP-1319's;
    StreamsGroupTopologyDescriptionUpdate); 4.3.2: none is.

    Args:
        bootstrap: "host:port" of a broker of the running release.
        error_codes: also the error code rows (they need the release's jar and a Java 17+ on this machine).
        version: the release whose jar names the error codes (default: the running one).
    Raises:
        labkit.core.errors.BrokerUnreachableError, labkit.kafka.wire.WireError: see
            :func:`~labkit.kafka.api_versions.broker_api_versions`.
        ProtocolError, labkit.core.errors.JavaError: only with ``error_codes``, see :func:`error_names`.
    """
    apis = broker_api_versions(bootstrap)
    codes = [n for _, _, kind, n in DRAFT_NUMBERS if kind == "error code"] if error_codes else []
    errors = error_names(codes, version) if codes else {}
    txn_low, txn_high = apis.get(TXN_OFFSET_COMMIT_KEY, (0, -1))
    rows = []
    for draft, proposes, kind, number in DRAFT_NUMBERS:
        if kind == "error code":
            if not error_codes:
                continue
            found = errors[number]
        elif kind == "API key":
            found = f"{api_name(number)} (versions {apis[number][0]}-{apis[number][1]})" if number in apis else None
        else:
            found = f"TxnOffsetCommit versions {txn_low}-{txn_high}" if number <= txn_high else None
        rows.append({"draft": draft, "proposes": proposes, "kind": kind, "number": number, "in_release": found,
                     "taken": found is not None})
    return rows


def describe_consumer_group(bootstrap: str, group_id: str, timeout_s: float = 5.0) -> dict:
    """A consumer group (``group.protocol=consumer``) as its coordinator describes it (ConsumerGroupDescribe
    v0, KIP-848): ``{"group_id", "state", "group_epoch", "assignment_epoch", "assignor", "members": [{"member_id",
    "member_epoch", "assignment": {topic: [partitions]}, "target": {topic: [partitions]}}]}``. A member's
    epoch is the one its offset commits are checked against (``ConsumerGroup.validateOffsetCommit``).

    Raises:
        labkit.core.errors.BrokerUnreachableError: no broker answers.
        labkit.kafka.wire.WireError: a group-level error, e.g. GROUP_ID_NOT_FOUND for a group of the
            classic protocol, which this request does not describe.
    """
    def member(r: Reader) -> dict:
        out = {"member_id": r.compact_string()}
        r.compact_string(), r.compact_string()  # instance id, rack
        out["member_epoch"] = r.int32()
        r.compact_string(), r.compact_string()  # client id, host
        r.compact_array(Reader.compact_string), r.compact_string()  # subscribed topic names, regex
        out["assignment"], out["target"] = assignment(r), assignment(r)
        r.tags()
        return out

    return describe_group(bootstrap, group_id, 69, 0, member, timeout_s)
