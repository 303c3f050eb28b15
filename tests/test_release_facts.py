"""Facts that a release can change, read from the installed releases (issue 36, "What the notebooks say").

The notebooks state facts about the releases the lab installs: confluent-kafka has no RENEW, Kafka's producer has no
public ``prepareTransaction``, the KIP drafts' wire numbers are taken, what ``share.isolation.level`` defaults to,
and that librdkafka has no KIP-890 (its producer epoch stays put from one transaction to the next). Each test reads
its fact from the installed thing itself:

* the confluent-kafka wheel (its ``AcknowledgeType`` enum and the ``cimpl`` constants behind it);
* the running release's jars in labkit's cache (:func:`labkit.broker.runtime.jar_dir`): ``javap`` of kafka-clients'
  ``KafkaProducer``, and a small Java program run against the release's classpath that prints
  ``org.apache.kafka.common.protocol.ApiKeys``, ``Errors.forCode`` and the group coordinator's
  ``org.apache.kafka.coordinator.group.GroupConfig.SHARE_ISOLATION_LEVEL_DEFAULT``;
* a run on the real broker (the session's, :func:`conftest.broker`): a confluent-kafka transactional producer
  commits three transactions and the partition's batches (:func:`labkit.kafka.logbatches.read_log`) show the epoch
  each was written with, as notebook 02's part 4 shows it with DescribeProducers.

An upgrade that changes one fails with a message naming where the notebooks (and the lessons behind them) state it:
the notebook, the cell's index in the ``.ipynb`` (0-based), its section heading and a quoted phrase of it.
:data:`STATED` holds those phrases; a test checks they are all still there, so the messages cannot go stale.
Each test runs on the release the lab runs (``LABKIT_KAFKA_VERSION``: 4.4.0 by default, or 4.3.2): the facts that
differ between them are asserted per release, and a release with no recorded expectation is skipped with a reason.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from labkit.broker.runtime import classpath, ensure_jars, find_java, jar_dir
from labkit.broker.settings import kafka_version
from labkit.kafka.logbatches import read_log
from labkit.kafka.records import create_topic

ROOT = Path(__file__).resolve().parents[1]

#: Where each fact is stated: (file under the repository, a phrase of one line of the cell or docstring, verbatim).
STATED = {
    "renew": [
        ("notebooks/06_share_groups.ipynb", "confluent-kafka, which has no RENEW;"),
        ("notebooks/06_share_groups.ipynb", "**confluent-kafka 2.16.1's `AcknowledgeType` has only"),
        ("notebooks/06_share_groups.ipynb", "\"librdkafka: no RENEW; the lock expires, the late ACCEPT is refused, delivery 2\""),
        ("notebooks/06_share_groups.ipynb", "librdkafka (no RENEW): the lock expired"),
        ("notebooks/06_share_groups.ipynb", "confluent-kafka 2.16.1 has no RENEW: the lock expires"),
        ("labkit/lessons/share_groups.py", "confluent-kafka 2.16.1's ``AcknowledgeType`` has no RENEW"),
        ("labkit/share/roles/share_consumer.py", "which confluent-kafka 2.16.1 lacks"),
    ],
    "prepare_transaction": [
        ("notebooks/07_share_transactions.ipynb", "accepted as of 2026-12, its producer methods not public in Kafka 4.4.0"),
        ("notebooks/07_share_transactions.ipynb", "KIP-939 (\"Support Participation in 2PC\", accepted as of 2026-12) gives the producer `prepareTransaction` and"),
        ("notebooks/07_share_transactions.ipynb", "match. Kafka 4.4.0's `KafkaProducer` does not expose those methods yet"),
        ("notebooks/07_share_transactions.ipynb", "4.4.0: the config `transaction.two.phase.commit.enable`, the admin's `Admin.forceTerminateTransaction` and the"),
    ],
    "wire_numbers": [
        ("notebooks/05_unassigned_partition.ipynb", "error code 134 and TxnOffsetCommit version 6 (seed 001)"),
        ("notebooks/05_unassigned_partition.ipynb", "Kafka 4.4.0 has all three: error 134 is GROUP_DELETION_FAILED"),
        ("notebooks/05_unassigned_partition.ipynb", "On 4.3.2 (which CI runs this notebook on too) the three numbers are still free"),
        ("notebooks/05_unassigned_partition.ipynb", "only for that partition; its error code 134 and TxnOffsetCommit version 6 are already taken in Kafka 4.4.0"),
        ("notebooks/07_share_transactions.ipynb", "Kafka 4.4.0's `ApiKeys` has no such request"),
        ("notebooks/07_share_transactions.ipynb", "StreamsGroupTopologyDescriptionUpdate (4.3.2 leaves it free): the proposal will need another number"),
        ("notebooks/07_share_transactions.ipynb", "# The draft's API key 93 is taken on Kafka 4.4 (the broker's ApiVersions answer), free on 4.3."),
        ("labkit/kafka/protocol.py", "Kafka 4.4.0: all three are taken (GROUP_DELETION_FAILED"),
    ],
    "stale_member_epoch_error": [
        ("notebooks/05_unassigned_partition.ipynb", "(`TxnOffsetCommitRequest.supportsStaleMemberEpochError`, which exists only in 4.4.0's kafka-clients"),
        ("notebooks/05_unassigned_partition.ipynb", "KIP-1319); Kafka 4.3.2, whose TxnOffsetCommit stops at version 5, always sends ILLEGAL_GENERATION."),
        ("labkit/models/kip1287.py", "(``TxnOffsetCommitRequest.supportsStaleMemberEpochError``, in 4.4.0's kafka-clients only), 4.3.2 always"),
    ],
    "kip_890": [
        ("notebooks/02_zombie_fencing.ipynb", "defence against hanging transactions. librdkafka has no KIP-890 support"),
        ("notebooks/02_zombie_fencing.ipynb", "meets no such error: its epoch stays put."),
        ("notebooks/02_zombie_fencing.ipynb", "# the same for every transaction on librdkafka (no KIP-890)"),
        ("notebooks/02_zombie_fencing.ipynb", "librdkafka, which has no KIP-890 (librdkafka issue 5423)."),
        ("labkit/lessons/fencing.py", "librdkafka has no KIP-890 (librdkafka issue 5423)"),
    ],
}


def _cells(path: Path) -> list[tuple[int, str, str]]:
    """``(index, section heading, source)`` of each cell of notebook ``path``: the heading is the first line of the
    last markdown cell at or before it that starts with ``#``."""
    out, heading = [], ""
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.startswith("#"):
            heading = source.splitlines()[0]
        out.append((i, heading, source))
    return out


def where(fact: str) -> str:
    """Where :data:`STATED` says ``fact`` is stated, for an assert message: one line per place, e.g.
    ``notebooks/06_share_groups.ipynb cell 17 ("## 4. A slow record..."): "confluent-kafka 2.16.1 has no RENEW"``."""
    lines = []
    for file, phrase in STATED[fact]:
        path = ROOT / file
        if path.suffix == ".ipynb":
            found = [(i, h) for i, h, source in _cells(path) if phrase in source]
            place = f"cell {found[0][0]} ({found[0][1]!r})" if found else "(phrase no longer found)"
        else:
            place = "(its text)"
        lines.append(f"  {file} {place}: {phrase!r}")
    return "Update what the lab says, at:\n" + "\n".join(lines)


@pytest.mark.parametrize("fact", sorted(STATED))
def test_every_cited_phrase_is_still_where_the_messages_say(fact):
    """Each quoted phrase is in its file, in one place (a notebook cell, or a module's text)."""
    for file, phrase in STATED[fact]:
        path = ROOT / file
        if path.suffix == ".ipynb":
            hits = [i for i, _, source in _cells(path) if phrase in source]
            assert len(hits) == 1, f"{file}: {phrase!r} is in cells {hits}, not in exactly one: update STATED[{fact!r}]"
        else:
            assert phrase in path.read_text(), f"{file} no longer says {phrase!r}: update STATED[{fact!r}]"


# --- confluent-kafka: no RENEW (KIP-1222) ---------------------------------------------------------------------------

def test_confluent_kafka_has_no_renew_acknowledgement():
    """The wheel's ``AcknowledgeType`` (``confluent_kafka/_model/__init__.py``, ``IntEnum`` over ``cimpl``'s
    ``SHARE_ACKNOWLEDGE_TYPE_*``) has ACCEPT, RELEASE and REJECT: a librdkafka share consumer cannot renew a lock."""
    import confluent_kafka
    from confluent_kafka import AcknowledgeType, cimpl

    types = {t.name: int(t) for t in AcknowledgeType}
    wire = sorted(n for n in dir(cimpl) if n.startswith("SHARE_ACKNOWLEDGE_TYPE_"))
    assert types == {"ACCEPT": 1, "RELEASE": 2, "REJECT": 3} and not hasattr(AcknowledgeType, "RENEW"), (
        f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]}) has "
        f"AcknowledgeType {types}: RENEW (KIP-1222) may have arrived. Notebook 06 part 4 runs librdkafka without it "
        f"(labkit/share/roles/share_consumer.py's renew_ms is Java-only).\n{where('renew')}")
    assert wire == ["SHARE_ACKNOWLEDGE_TYPE_ACCEPT", "SHARE_ACKNOWLEDGE_TYPE_REJECT", "SHARE_ACKNOWLEDGE_TYPE_RELEASE"], (
        f"confluent_kafka.cimpl now defines {wire}: librdkafka may renew.\n{where('renew')}")


# --- the release's jars -----------------------------------------------------------------------------------------------

def javap(version: str, jar: str, cls: str, *flags: str) -> str:
    """``javap`` (beside the lab's ``java``, else on PATH) of class ``cls`` in ``jar`` (a file name in Kafka
    ``version``'s jar cache), with ``flags`` (e.g. ``-public``): its output text.

    Raises:
        FileNotFoundError: the jar is not cached (``python -m labkit jars <version>`` fetches it).
        RuntimeError: javap failed (its error output quoted).
    """
    path = jar_dir(version=version) / jar
    if not path.exists():
        raise FileNotFoundError(f"{path}: run `.venv/bin/python -m labkit jars {version}`")
    sibling = Path(find_java()).resolve().parent / "javap"
    tool = str(sibling) if sibling.exists() else shutil.which("javap")
    run = subprocess.run([tool, *flags, "-cp", str(path), cls], capture_output=True, text=True, timeout=120)
    if run.returncode:
        raise RuntimeError(f"javap {cls} in {path.name} failed: {run.stderr.strip()[-500:]}")
    return run.stdout


def test_kafka_producer_has_no_public_prepare_transaction():
    """KIP-939's client methods (``prepareTransaction``, ``completeTransaction``, ``initTransactions(boolean)``) are
    not on the running release's ``KafkaProducer`` (``javap -public`` of kafka-clients); its 2PC config is
    (``ProducerConfig.TRANSACTION_TWO_PHASE_COMMIT_ENABLE_CONFIG``, ``javap -constants``)."""
    version = kafka_version()
    jar = f"kafka-clients-{version}.jar"
    producer = javap(version, jar, "org.apache.kafka.clients.producer.KafkaProducer", "-public")
    methods = sorted(set(re.findall(r"\b(\w+)\(", producer)) - {"KafkaProducer"})
    kip939 = [m for m in ("prepareTransaction", "completeTransaction") if m in methods]
    init = re.findall(r"public void initTransactions\(([^)]*)\)", producer)
    assert not kip939 and init == [""], (
        f"Kafka {version}'s KafkaProducer ({jar}) now has public {kip939 or 'initTransactions(' + str(init) + ')'}: "
        f"KIP-939's two-phase commit reached the client API. Its public methods: {methods}.\n{where('prepare_transaction')}")
    config = javap(version, jar, "org.apache.kafka.clients.producer.ProducerConfig", "-constants")
    assert 'TRANSACTION_TWO_PHASE_COMMIT_ENABLE_CONFIG = "transaction.two.phase.commit.enable"' in config, (
        f"Kafka {version}'s ProducerConfig has no transaction.two.phase.commit.enable any more.\n"
        f"{where('prepare_transaction')}")


_PROBE = """
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
public class ReleaseFacts { public static void main(String[] args) throws Exception {
  for (ApiKeys k : ApiKeys.values()) System.out.println("api\\t" + k.id + "\\t" + k.name);
  System.out.println("txn_offset_commit_latest\\t" + ApiKeys.TXN_OFFSET_COMMIT.latestVersion(true));
  for (String c : args) { Errors e = Errors.forCode(Short.parseShort(c));
    System.out.println("error\\t" + c + "\\t" + (e.code() == Short.parseShort(c) ? e.name() : "-")); }
  Class<?> g = Class.forName("org.apache.kafka.coordinator.group.GroupConfig");
  System.out.println("share_isolation_level_default\\t" + g.getField("SHARE_ISOLATION_LEVEL_DEFAULT").get(null));
}}
"""


@functools.cache
def release_facts(version: str) -> dict:
    """What Kafka ``version``'s jars say, printed by a Java program run on the release's classpath (about 2 s, once
    per release): ``{"apis": {id: name}`` (every ``ApiKeys``: id and protocol name), ``"txn_offset_commit_latest"``
    (``ApiKeys.TXN_OFFSET_COMMIT.latestVersion(true)``), ``"errors": {134: name or None}`` (``Errors.forCode``),
    ``"share_isolation_level_default"`` (``GroupConfig.SHARE_ISOLATION_LEVEL_DEFAULT``, kafka-group-coordinator)}``.

    Raises:
        RuntimeError: the program failed (its error output quoted).
    """
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "ReleaseFacts.java"
        source.write_text(_PROBE)
        cp = classpath(ensure_jars(version=version, progress=False))
        run = subprocess.run([find_java(), "-cp", cp, str(source), "134"], capture_output=True, text=True, timeout=180)
    if run.returncode:
        raise RuntimeError(f"reading Kafka {version}'s jars failed (exit {run.returncode}): {run.stderr.strip()[-800:]}")
    out = {"apis": {}, "errors": {}}
    for line in run.stdout.splitlines():
        kind, *rest = line.split("\t")
        if kind == "api":
            out["apis"][int(rest[0])] = rest[1]
        elif kind == "error":
            out["errors"][int(rest[0])] = None if rest[1] == "-" else rest[1]
        elif kind in ("txn_offset_commit_latest", "share_isolation_level_default"):
            out[kind] = int(rest[0]) if kind.startswith("txn") else rest[0]
    return out


#: What each release has at the drafts' numbers (labkit.kafka.protocol.DRAFT_NUMBERS: KIP-1287's error code 134 and
#: TxnOffsetCommit version 6, KIP-1289's API key 93), read from its jar when this was written.
DRAFT_NUMBERS_BY_RELEASE = {
    "4.4.0": {"api key 93": "StreamsGroupTopologyDescriptionUpdate", "error code 134": "GROUP_DELETION_FAILED",
              "TxnOffsetCommit newest version": 6},
    "4.3.2": {"api key 93": None, "error code 134": None, "TxnOffsetCommit newest version": 5},
}


def test_the_drafts_wire_numbers_per_release():
    """KIP-1287's error code 134 and TxnOffsetCommit v6 and KIP-1289's API key 93 are all taken in 4.4.0 and all free
    in 4.3.2 (``ApiKeys`` and ``Errors`` of kafka-clients, run on a JVM). None of the requests the drafts or seed 004
    name exists in either (TxnShareAcknowledge, AddShareAcksToTxn, a BeginTxn)."""
    version = kafka_version()
    facts = release_facts(version)
    found = {"api key 93": facts["apis"].get(93), "error code 134": facts["errors"][134],
             "TxnOffsetCommit newest version": facts["txn_offset_commit_latest"]}
    proposed = sorted(n for n in facts["apis"].values()
                      if n in ("TxnShareAcknowledge", "AddShareAcksToTxn", "BeginTxn", "BeginTransaction"))
    assert not proposed, (f"Kafka {version}'s ApiKeys has {proposed}: a proposed request shipped (with which "
                          f"number?).\n{where('wire_numbers')}")
    if version not in DRAFT_NUMBERS_BY_RELEASE:
        pytest.skip(f"no expectation recorded for Kafka {version}: it has {found}; add it to DRAFT_NUMBERS_BY_RELEASE "
                    f"once notebooks 05 and 07 say so")
    assert found == DRAFT_NUMBERS_BY_RELEASE[version], (
        f"Kafka {version}'s jar has {found} at the drafts' numbers, the notebooks say "
        f"{DRAFT_NUMBERS_BY_RELEASE[version]}.\n{where('wire_numbers')}")


#: Whether each release's kafka-clients has ``TxnOffsetCommitRequest.supportsStaleMemberEpochError`` (TxnOffsetCommit
#: version 6, KIP-1319), and whether its group coordinator's ``OffsetMetadataManager`` asks it before it sends
#: STALE_MEMBER_EPOCH as ILLEGAL_GENERATION (a release without it always sends ILLEGAL_GENERATION).
STALE_MEMBER_EPOCH_BY_VERSION = {"4.4.0": True, "4.3.2": False}


@pytest.mark.parametrize("version", sorted(STALE_MEMBER_EPOCH_BY_VERSION))
def test_supports_stale_member_epoch_error_exists_in_4_4_0_only(version):
    """Notebook 05 part 2 names ``TxnOffsetCommitRequest.supportsStaleMemberEpochError`` as what decides, by the
    request's version, whether a refused TxnOffsetCommit says STALE_MEMBER_EPOCH or ILLEGAL_GENERATION: the method is
    4.4.0's (``javap`` of kafka-clients), and only 4.4.0's ``OffsetMetadataManager`` (kafka-group-coordinator) calls
    it; 4.3.2's catches StaleMemberEpochException and sends ILLEGAL_GENERATION whatever the version. Each release's
    jars, read whether or not the lab runs on it (both are cached by ``make test``'s ``python -m labkit jars``)."""
    request = javap(version, f"kafka-clients-{version}.jar", "org.apache.kafka.common.requests.TxnOffsetCommitRequest",
                    "-public")
    coordinator = javap(version, f"kafka-group-coordinator-{version}.jar",
                        "org.apache.kafka.coordinator.group.OffsetMetadataManager", "-c", "-p")
    found = {"method": "supportsStaleMemberEpochError(short)" in request,
             "asked": "TxnOffsetCommitRequest.supportsStaleMemberEpochError" in coordinator}
    expected = STALE_MEMBER_EPOCH_BY_VERSION[version]
    assert found == {"method": expected, "asked": expected}, (
        f"Kafka {version}: {found}, the notebooks say {expected} for both.\n{where('stale_member_epoch_error')}")
    assert "StaleMemberEpochException" in coordinator and "Errors.ILLEGAL_GENERATION" in coordinator, version


#: ``share.isolation.level``'s default per release (``GroupConfig.SHARE_ISOLATION_LEVEL_DEFAULT``).
SHARE_ISOLATION_DEFAULT = {"4.4.0": "read_uncommitted", "4.3.2": "read_uncommitted"}


def test_share_isolation_level_default():
    """A share group delivers aborted transactional records unless ``share.isolation.level`` (a group config, KIP-932)
    says otherwise: its default is read_uncommitted in 4.4.0 and 4.3.2 (the group coordinator's ``GroupConfig``).
    Notebook 06 part 2 shows it on the real broker (labkit/lessons/share_isolation.py); a cell that names
    ``share.isolation.level`` must name the default too (checked here)."""
    version = kafka_version()
    default = release_facts(version)["share_isolation_level_default"]
    cells = [(nb.name, i, h) for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))
             for i, h, source in _cells(nb) if "share.isolation.level" in source and default not in source]
    assert not cells, (f"these cells name share.isolation.level without its default on Kafka {version}, {default!r} "
                       f"(GroupConfig.SHARE_ISOLATION_LEVEL_DEFAULT): {cells}")
    if version not in SHARE_ISOLATION_DEFAULT:
        pytest.skip(f"no expectation recorded for Kafka {version} (its default is {default!r})")
    assert default == SHARE_ISOLATION_DEFAULT[version], (
        f"Kafka {version}'s share.isolation.level now defaults to {default!r} (GroupConfig.SHARE_ISOLATION_LEVEL_DEFAULT "
        f"in kafka-group-coordinator-{version}.jar), not {SHARE_ISOLATION_DEFAULT[version]!r}: update notebook 06's "
        "section 'A transactional topic: the group's share.isolation.level' and its claims part 2 "
        "(labkit/lessons/share_isolation.py), notebook 07's sentence on KIP-1289's loop, and check that parts 2-6 of "
        "notebook 06 (share consumers that leave it unset) still get every record they count.")


# --- librdkafka: no KIP-890 (no epoch bump per transaction) -----------------------------------------------------------

def test_librdkafka_keeps_its_producer_epoch_from_one_transaction_to_the_next(bootstrap):
    """A confluent-kafka transactional producer commits three transactions (one ``init_transactions``); the log's
    batches (:func:`~labkit.kafka.logbatches.read_log`) hold each transaction's record and its COMMIT marker, all with
    one producer id and one epoch. A client on transaction version 2 (KIP-890 part 2: Kafka's Java client) would have
    a new epoch after each commit, as notebook 02's part 4 shows beside it."""
    import confluent_kafka

    topic = create_topic(bootstrap, "kip890")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    for n in range(3):
        producer.begin_transaction()
        producer.produce(topic, f"t{n}".encode(), partition=0)
        producer.commit_transaction(30)
    log = read_log(bootstrap, topic)
    for _ in range(50):  # the last COMMIT marker may be written just after commit_transaction returned
        if (log.marker == "COMMIT").sum() == 3:
            break
        time.sleep(0.1)
        log = read_log(bootstrap, topic)
    assert list(log.value.dropna()) == ["t0", "t1", "t2"] and list(log.marker.dropna()) == ["COMMIT"] * 3, log
    assert set(log.outcome.dropna()) == {"committed"} and log.producer_id.nunique() == 1, log
    epochs = log[["offset", "producer_epoch", "marker", "value"]].to_dict("records")
    assert log.producer_epoch.nunique() == 1, (
        f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]}) bumped its "
        f"producer epoch between transactions on Kafka {kafka_version()}: {epochs}. librdkafka may speak transaction "
        f"version 2 (KIP-890 part 2) now; notebook 02 part 4 asserts one epoch for every librdkafka transaction.\n"
        f"{where('kip_890')}")
