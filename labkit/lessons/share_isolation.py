"""Notebook 06, a share group reading a transactional topic: the group config ``share.isolation.level`` (KIP-932's
``GroupConfig``) on the real broker, on both clients.

A share consumer has no ``isolation.level`` of its own: the broker reads the share partition for the whole group,
at the level the *group* config ``share.isolation.level`` names. ``KafkaApis.handleFetchFromShareFetchRequest``
(KafkaApis.scala line 3563 in the 4.4.0 jar, 3463 in 4.3.2) builds the fetch's
``FetchIsolation.of(-1, groupConfig.shareIsolationLevel, else GroupConfig.defaultShareIsolationLevel())``, and
``GroupConfig``'s static initialiser sets ``SHARE_ISOLATION_LEVEL_DEFAULT`` from ``IsolationLevel.READ_UNCOMMITTED``
(both jars; ``javap -c``). So:

* at the default the broker fetches up to the high watermark (``FetchIsolation.HIGH_WATERMARK``): records of
  aborted transactions, and of transactions still open, are handed out like any other;
* at ``read_committed`` it fetches up to the last stable offset (LSO, ``FetchIsolation.TXN_COMMITTED``), and
  ``SharePartition.maybeFilterAbortedTransactionalAcquiredRecords`` archives the batches of aborted transactions
  (ARCHIVED: never delivered); an open transaction holds the whole share partition back at its first offset, even
  a record written after it outside any transaction.

Neither client filters anything itself: confluent-kafka's and Kafka's Java ``ShareConsumer`` deliver what the
broker hands out, and neither delivers a control record (COMMIT/ABORT marker; the Java client's
``ShareCompletedFetch`` skips control batches). :func:`share_isolation` shows all of it, one share group per client
and setting; :func:`isolation_config` reads what the broker says of the config.
"""

from __future__ import annotations

import time
import uuid

import pandas as pd
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from labkit.broker.probe import KAFKA_LOG, admin
from labkit.broker.settings import kafka_version
from labkit.core.waiting import wait_for
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.participant import Participant
from labkit.crashlab.registry import CLIENTS
from labkit.kafka.records import high_watermarks, last_stable_offsets, produce
from labkit.share.group_config import configure_group

#: The group config (``GroupConfig.SHARE_ISOLATION_LEVEL_CONFIG``, KIP-932).
CONFIG = "share.isolation.level"
#: The settings :func:`share_isolation` can give a group: "default" leaves :data:`CONFIG` unset (the broker's
#: default applies), the others set it.
SETTINGS = ("default", "read_committed", "read_uncommitted")
#: The records :func:`share_isolation` writes, by kind, in this order: a committed transaction, an aborted one, one
#: left open while the consumers read, and a plain (non-transactional) record written after the open one's.
RECORDS = {"committed": ["committed-1", "committed-2"], "aborted": ["aborted-1", "aborted-2"],
           "open": ["open-1", "open-2"], "plain": ["plain-1"]}
_RUNNING = ("running", "stalled")


def _all() -> list[str]:
    """Every value id of :data:`RECORDS`, in the order written."""
    return [v for kind in RECORDS for v in RECORDS[kind]]


def isolation_config(bootstrap: str, group_id: str, timeout_s: float = 10.0) -> dict | None:
    """What the broker says of ``group_id``'s :data:`CONFIG` (DescribeConfigs on a GROUP resource; a group need not
    exist for it): ``{"value": "read_uncommitted" | "read_committed", "default": True if not set on the group}``,
    or ``None`` if the broker has no such group config (a release without it).

    Raises:
        confluent_kafka.KafkaException: the broker did not answer within ``timeout_s`` (s).
    """
    resource = ConfigResource(ResourceType.GROUP, group_id)
    client = admin(bootstrap)  # keep a reference: the futures fail if the client is collected
    entry = client.describe_configs([resource], request_timeout=timeout_s)[resource].result(timeout_s).get(CONFIG)
    return None if entry is None else {"value": entry.value, "default": bool(entry.is_default)}


def share_group_at(bootstrap: str, group_id: str, setting: str, timeout_s: float = 10.0) -> dict:
    """Configure share group ``group_id`` (:func:`~labkit.share.group_config.configure_group`:
    ``share.auto.offset.reset=earliest``) and, unless ``setting`` is "default", set its :data:`CONFIG` to ``setting``
    (IncrementalAlterConfigs on the GROUP resource). Returns :func:`isolation_config` of the group afterwards.

    Raises:
        ValueError: ``setting`` is not one of :data:`SETTINGS`.
        confluent_kafka.KafkaException: the broker refused (e.g. a release without :data:`CONFIG`: INVALID_CONFIG).
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, not {setting!r}")
    configure_group(bootstrap, group_id, timeout_s=timeout_s)
    if setting != "default":
        entry = ConfigEntry(CONFIG, setting, incremental_operation=AlterConfigOpType.SET)
        client = admin(bootstrap)
        resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=[entry])
        for future in client.incremental_alter_configs([resource]).values():
            future.result(timeout_s)
    return isolation_config(bootstrap, group_id, timeout_s)


def share_isolation(exp: Experiment, clients: tuple[str, ...] = CLIENTS,
                    settings: tuple[str, ...] = ("default", "read_committed"), *, hold_s: float = 1.0,
                    timeout_s: float = 90.0) -> dict:
    """One transactional topic read by share groups at each of ``settings``, on each of ``clients``.

    A one-partition topic gets (:data:`RECORDS`) a committed transaction (``committed-1``, ``committed-2``), an aborted
    one (``aborted-*``), then a transaction left OPEN (``open-*``) and, after it, a plain record ``plain-1``. One
    share consumer participant (:mod:`labkit.share.roles.share_consumer`, ACCEPT every record) per client and
    setting reads it, each in a share group of its own (:func:`share_group_at`). The transaction stays open until
    every consumer got all it can (a group at ``read_uncommitted`` everything up to ``plain-1``, one at
    ``read_committed`` the committed records), and at least ``hold_s`` seconds more; then it is committed, and the
    consumers are stopped once every group got every record it is to get. Each wait has a deadline, no fixed
    budget: a slow machine only waits longer.

    Args:
        clients: of :data:`~labkit.crashlab.registry.CLIENTS`.
        settings: of :data:`SETTINGS`. A setting other than "default" is skipped (with a message in ``skipped``) if
            the broker has no :data:`CONFIG` (:func:`isolation_config` is ``None``).
        hold_s: how long the transaction stays open at least after every consumer got its records (s): the
            read_committed consumers poll meanwhile (every 0.5 s) and get nothing.
        timeout_s: deadline of each wait (s).
    Returns:
        ``{"topic", "table", "offsets", "levels", "lso_while_open", "hw_while_open", "commit_ns", "skipped",
        "default_level", "consumers"}``: ``table`` (one row per client and setting; :func:`table`); ``offsets``:
        ``{kind: [offsets]}`` for each kind of :data:`RECORDS` and "markers" (the control records: the log's offsets
        that hold no record); ``levels``: ``{(client, setting): level the broker reports for that group}``;
        the LSO and high watermark while the transaction was open; ``commit_ns``: ``time.monotonic_ns()`` when
        ``commit_transaction`` was called; ``skipped``: why settings were left out, or ``None``; ``default_level``:
        the broker's default (``None`` without the config); ``consumers``: ``{(client, setting): Participant}``.
    Raises:
        ValueError: an unknown setting or client.
        TimeoutError: a consumer did not get its records within ``timeout_s`` (names which), or ended early.
        confluent_kafka.KafkaException: a write or a transaction failed, or the broker refused a group config.
    """
    probe = isolation_config(exp.bootstrap, f"{exp.name}-probe-{uuid.uuid4().hex[:6]}")
    settings, skipped = runnable(settings, probe)
    topic = exp.topic("txn-share")
    offsets = _write_closed(exp, topic)
    runs = [(c, s) for c in clients for s in settings]
    levels, consumers = {}, {}
    for client, setting in runs:
        group = f"{exp.name}-iso-{client}-{setting}-{uuid.uuid4().hex[:6]}"
        levels[client, setting] = (share_group_at(exp.bootstrap, group, setting) or {"value": None})["value"]
        consumers[client, setting] = exp.participant(
            f"share-{client}-{setting}", "share_consumer", client=client, topic=topic, group_id=group,
            idle_ms=int(timeout_s * 4000), first_ms=int(timeout_s * 4000))
    open_txn = Producer({"bootstrap.servers": exp.bootstrap, "logger": KAFKA_LOG,
                         "transactional.id": f"{topic}-open"})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    exp.history.append("txn_begin", "open-txn", topic=topic, txn=1)
    committed = False
    try:
        offsets["open"] = _send(exp, open_txn, "open-txn", topic, RECORDS["open"], txn=1)
        offsets["plain"] = list(produce(exp.bootstrap, topic, RECORDS["plain"]).offset)
        lso, hw = last_stable_offsets(exp.bootstrap, topic)[0], high_watermarks(exp.bootstrap, topic)[0]
        for p in consumers.values():
            p.start()
        # while open: a read_uncommitted group gets every record, a read_committed one the committed ones only
        for key, p in consumers.items():
            _wait_delivered(exp, p, topic, _all() if levels[key] != "read_committed" else RECORDS["committed"],
                            timeout_s)
        time.sleep(hold_s)
        commit_ns = time.monotonic_ns()
        exp.history.append("txn_commit_start", "open-txn", topic=topic, txn=1)
        open_txn.commit_transaction(30)
        committed = True
        exp.history.append("txn_end", "open-txn", topic=topic, txn=1, outcome="committed", definite=True)
        for key, p in consumers.items():
            if levels[key] == "read_committed":
                _wait_delivered(exp, p, topic, RECORDS["committed"] + RECORDS["open"] + RECORDS["plain"], timeout_s)
        wait_for(lambda: last_stable_offsets(exp.bootstrap, topic)[0] == high_watermarks(exp.bootstrap, topic)[0],
                 f"the COMMIT marker of the open transaction in {topic}", timeout_s, 0.2,
                 hint="the broker's server.log")
    finally:
        if not committed:  # a failed run leaves no transaction holding the topic back until it times out
            open_txn.abort_transaction(30)
        for p in consumers.values():
            p.stop()
    written = {o for kind in RECORDS for o in offsets[kind]}
    offsets["markers"] = sorted(set(range(high_watermarks(exp.bootstrap, topic)[0])) - written)
    result = {"topic": topic, "offsets": offsets, "levels": levels, "lso_while_open": lso, "hw_while_open": hw,
              "commit_ns": commit_ns, "skipped": skipped, "default_level": probe and probe["value"],
              "consumers": consumers}
    result["table"] = table(exp, result)
    return result


def table(exp: Experiment, run: dict) -> pd.DataFrame:
    """What each consumer of ``run`` (:func:`share_isolation`'s result) was delivered, one row per client and
    setting: ``level`` (the group's :data:`CONFIG` as the broker reports it), the value ids delivered of the
    ``committed`` and the ``aborted`` transaction, ``while open`` (those at or past the LSO the open transaction held,
    its first offset, delivered before ``commit_transaction`` was called), ``after commit`` (every value id delivered
    after that call), ``markers`` (offsets of control records delivered) and ``deliveries`` (how many in all)."""
    rows, events = [], exp.history.events()
    markers, lso, commit_ns = set(run["offsets"]["markers"]), run["lso_while_open"], run["commit_ns"]
    for (client, setting), p in run["consumers"].items():
        got = sorted((e.offset, e.mono_ns, e.value_id) for e in events
                     if e.kind == "delivered" and e.participant == p.name and e.topic == run["topic"])
        rows.append((client, setting, run["levels"][client, setting],
                     [v for _, _, v in got if v in RECORDS["committed"]],
                     [v for _, _, v in got if v in RECORDS["aborted"]],
                     [v for o, ns, v in got if o >= lso and ns < commit_ns],
                     [v for _, ns, v in got if ns >= commit_ns],
                     [o for o, _, _ in got if o in markers], len(got)))
    return pd.DataFrame(rows, columns=["client", "setting", "level", "committed", "aborted", "while open",
                                       "after commit", "markers", "deliveries"])


def runnable(settings: tuple[str, ...], probe: dict | None) -> tuple[tuple[str, ...], str | None]:
    """The ``settings`` a broker can run, given ``probe`` (:func:`isolation_config` of a group, ``None`` if the broker
    has no :data:`CONFIG`), and why any were left out (``None`` if none): without the config only "default" runs.

    Raises:
        ValueError: a setting is not one of :data:`SETTINGS`.
    """
    for s in settings:
        if s not in SETTINGS:
            raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, not {s!r}")
    if probe is not None or all(s == "default" for s in settings):
        return settings, None
    return (tuple(s for s in settings if s == "default"),
            f"Kafka {kafka_version()}: the broker has no share group config {CONFIG}, so "
            f"{', '.join(s for s in settings if s != 'default')} cannot be set; only the default is shown")


def _write_closed(exp: Experiment, topic: str) -> dict[str, list[int]]:
    """The committed and the aborted transaction, each with its marker written (``produce``'s ``wait_marker``), their
    offsets recorded as ``ack`` events. Returns ``{"committed": [offsets], "aborted": [offsets]}``."""
    offsets = {}
    for txn, (kind, outcome) in enumerate((("committed", "commit"), ("aborted", "abort")), start=2):
        acked = produce(exp.bootstrap, topic, RECORDS[kind], transactional_id=f"{topic}-{kind}", outcome=outcome,
                        wait_marker=True)
        offsets[kind] = list(acked.offset)
        exp.history.append_batch("ack", f"{kind}-txn", {"mono_ns": [time.monotonic_ns()] * len(acked),
                                                        "offset": offsets[kind], "value_id": list(acked.value)},
                                 topic=topic, partition=0, txn=txn, definite=True)
    return offsets


def _send(exp: Experiment, producer: Producer, name: str, topic: str, values: list[str], txn: int) -> list[int]:
    """Send ``values`` with ``producer`` (in its open transaction), wait for their acks (recorded as ``ack`` events);
    returns their offsets."""
    acked, errors = [], []
    for v in values:
        producer.produce(topic, v.encode(), partition=0, on_delivery=lambda err, msg: (errors if err else acked).append(
            err or msg.offset()))
    producer.flush(30)
    if errors or len(acked) != len(values):
        raise KafkaException(errors[0] if errors else f"{name}: records of {topic} unacknowledged after 30 s")
    exp.history.append_batch("ack", name, {"mono_ns": [time.monotonic_ns()] * len(values), "offset": acked,
                                           "value_id": values}, topic=topic, partition=0, txn=txn, definite=True)
    return acked


def _wait_delivered(exp: Experiment, p: Participant, topic: str, wanted: list[str], timeout_s: float) -> None:
    """Wait until ``p`` was delivered every value id of ``wanted``; fail early if it ended."""
    def done() -> bool:
        got = {e.value_id for e in exp.history.events() if e.kind == "delivered" and e.participant == p.name
               and e.topic == topic}
        if p.status not in _RUNNING and not set(wanted) <= got:
            raise TimeoutError(f"{p.name} ended ({p.status}) before it was delivered {sorted(set(wanted) - got)}")
        return set(wanted) <= got

    wait_for(done, f"{p.name} was not delivered {wanted}", timeout_s, 0.2)
