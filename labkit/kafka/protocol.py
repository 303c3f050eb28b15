"""Kafka's wire protocol as the running release defines it, read from its jar, and one consumer-group request.

* **Definitions.** Every request and response of a Kafka release is a JSON file in its kafka-clients jar,
  ``common/message/<Name>Request.json`` (``apiKey``, ``validVersions``, and ``//`` comments saying what each
  version added, naming its KIP); error codes are the ``org.apache.kafka.common.protocol.Errors`` enum in
  the same jar, read here by running ``Errors.forCode`` on a JVM (Java 17+, the one the broker runs on). The
  jars are labkit's cache, ``~/.cache/labkit/kafka-<version>/`` (:mod:`labkit.broker.runtime`).
  :func:`draft_collisions` compares the numbers the KIP drafts chose with the release's.
* **ConsumerGroupDescribe** (API key 69, v0, KIP-848), sent over a socket: each member's epoch and
  assignment, which confluent-kafka's ``describe_consumer_groups`` does not show.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import tempfile
import zipfile
from pathlib import Path

from labkit.broker.runtime import classpath, ensure_jars, find_java, jar_dir
from labkit.broker.settings import kafka_version
from labkit.errors import LabkitError
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
        raise ProtocolError(f"{jar} is missing: run `.venv/bin/python -m labkit jars {version}` (or `make lab`) "
                            "to fetch Kafka's jars from Maven Central once.")
    return jar


def _strip_comments(text: str) -> tuple[str, list[str]]:
    """The JSON of a message definition without its ``//`` comment lines, and those comments in order but the
    licence header (the comment lines the file opens with)."""
    body, comments, header = [], [], True
    for line in text.splitlines():
        comment = line.strip().startswith("//")
        header = header and comment
        if comment and not header:
            comments.append(line.strip()[2:].strip())
        elif not comment:
            body.append(line)
    return "\n".join(body), comments


def message_definitions(version: str | None = None) -> dict[str, dict]:
    """Every request and response definition of Kafka ``version``'s kafka-clients jar, by name
    (e.g. ``"TxnOffsetCommitRequest"``): the JSON (``apiKey``, ``type``, ``validVersions``, ``fields``, ...)
    plus ``"comments"``, its ``//`` lines in order (the licence header left out). Read once per release.

    Raises:
        ProtocolError: the jar is missing, or a definition is not JSON once its comments are removed.
    """
    return _message_definitions(kafka_version(version))


@functools.lru_cache(maxsize=None)
def _message_definitions(version: str) -> dict[str, dict]:
    out = {}
    with zipfile.ZipFile(clients_jar(version)) as jar:
        for name in jar.namelist():
            if not (name.startswith("common/message/") and name.endswith(".json")):
                continue
            body, comments = _strip_comments(jar.read(name).decode())
            try:
                definition = json.loads(body)
            except json.JSONDecodeError as exc:
                raise ProtocolError(f"{name} in {clients_jar(version).name} is not JSON without its comments: {exc}")
            if definition.get("type") in ("request", "response"):
                definition["comments"] = comments
                out[definition["name"]] = definition
    return out


def api_name(api_key: int, version: str | None = None) -> str | None:
    """The name of the API with key ``api_key`` in Kafka ``version`` (the request's name without "Request",
    e.g. 93 -> ``"StreamsGroupTopologyDescriptionUpdate"`` in 4.4.0), or ``None`` if the release has none."""
    for name, definition in message_definitions(version).items():
        if definition["type"] == "request" and definition["apiKey"] == api_key:
            return name.removesuffix("Request")
    return None


def api_versions(api: str, version: str | None = None) -> dict:
    """An API's versions in Kafka ``version``: ``{"api_key": int, "versions": (oldest, newest),
    "added": {n: text}}``, where ``added[n]`` is the request's comment that starts "Version n" (what version
    n added, with its KIP), e.g. ``api_versions("TxnOffsetCommit")["added"][6]`` in 4.4.0 names KIP-1319.

    Raises:
        ProtocolError: no such API in that release (the message names a few that exist).
    """
    definition = message_definitions(version).get(f"{api}Request")
    if definition is None:
        known = sorted(n.removesuffix("Request") for n in message_definitions(version) if n.endswith("Request"))
        raise ProtocolError(f"Kafka {kafka_version(version)} has no API {api!r} (it has e.g. {', '.join(known[:5])})")
    low, _, high = definition["validVersions"].partition("-")
    added, current = {}, None
    for comment in definition["comments"]:
        match = re.match(r"[Vv]ersions? (\d+)\b", comment)
        if match:
            current = int(match.group(1))
            added[current] = comment
        elif current is not None and comment and not comment.startswith("Supported errors"):
            added[current] += " " + comment
        else:
            current = None
    return {"api_key": definition["apiKey"], "versions": (int(low), int(high or low)), "added": added}


_ERRORS_SOURCE = """
import org.apache.kafka.common.protocol.Errors;
public class ErrorNames { public static void main(String[] codes) {
  for (String c : codes) { Errors e = Errors.forCode(Short.parseShort(c)); System.out.println(c + " " + e.code() + " " + e.name()); }
}}
"""


@functools.lru_cache(maxsize=None)
def _error_names(codes: tuple[int, ...], version: str) -> dict[int, str | None]:
    jar = clients_jar(version)  # the clear error when the release was never fetched
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "ErrorNames.java"
        source.write_text(_ERRORS_SOURCE)
        cp = classpath(ensure_jars(version=version, progress=False))  # Errors logs through slf4j
        run = subprocess.run([find_java(), "-cp", cp, str(source), *map(str, codes)],
                             capture_output=True, text=True, timeout=120)
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
    "GROUP_DELETION_FAILED"}`` in 4.4.0, ``{134: None}`` in 4.3.1.

    Raises:
        ProtocolError: the jar is missing, or the JVM failed (its error output quoted).
        labkit.errors.JavaError: no Java 17+.
    """
    return _error_names(tuple(codes), kafka_version(version))


#: The numbers the KIP drafts chose for what they add: (draft, what, kind, number). Sources: seed 001 (KIP-1287:
#: "UNASSIGNED_PARTITION (code 134)", "TxnOffsetCommitRequest and TxnOffsetCommitResponse are both bumped to
#: version 6"), apache/kafka PR #22357 (KIP-1289's draft: "TxnShareAcknowledgeRequest / TxnShareAcknowledgeResponse
#: (apiKey 93, v0)"; seed 000 has "apiKey": TBD).
DRAFT_NUMBERS = (
    ("KIP-1287", "error UNASSIGNED_PARTITION", "error code", 134),
    ("KIP-1287", "TxnOffsetCommit with assignment validation", "TxnOffsetCommit version", 6),
    ("KIP-1289", "TxnShareAcknowledge request", "API key", 93),
)


def draft_collisions(version: str | None = None) -> list[dict]:
    """What Kafka ``version`` (default: the running release) already has at each number of
    :data:`DRAFT_NUMBERS`, read from its jar: one dict per number, ``{"draft", "proposes", "kind", "number",
    "in_release", "taken"}``, where ``in_release`` is the release's error name, API name, or what that
    TxnOffsetCommit version added (its comment), or ``None`` if the number is free, and ``taken`` says whether
    it is. Kafka 4.4.0: all three are taken (GROUP_DELETION_FAILED; KIP-1319's TxnOffsetCommit v6;
    StreamsGroupTopologyDescriptionUpdate); 4.3.1: none is.

    Raises:
        ProtocolError, labkit.errors.JavaError: see :func:`error_names`.
    """
    errors = error_names([n for _, _, kind, n in DRAFT_NUMBERS if kind == "error code"], version)
    txn = api_versions("TxnOffsetCommit", version)
    rows = []
    for draft, proposes, kind, number in DRAFT_NUMBERS:
        if kind == "error code":
            found = errors[number]
        elif kind == "API key":
            found = api_name(number, version)
        else:
            found = txn["added"].get(number) if number <= txn["versions"][1] else None
        rows.append({"draft": draft, "proposes": proposes, "kind": kind, "number": number, "in_release": found,
                     "taken": found is not None})
    return rows


def describe_consumer_group(bootstrap: str, group_id: str, timeout_s: float = 5.0) -> dict:
    """A consumer group (``group.protocol=consumer``) as its coordinator describes it (ConsumerGroupDescribe
    v0, KIP-848): ``{"group_id", "state", "group_epoch", "assignment_epoch", "assignor", "members": [{"member_id",
    "member_epoch", "assignment": {topic: [partitions]}, "target": {topic: [partitions]}}]}``. A member's
    epoch is the one its offset commits are checked against (``ConsumerGroup.validateOffsetCommit``).

    Raises:
        labkit.errors.BrokerUnreachableError: no broker answers.
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
