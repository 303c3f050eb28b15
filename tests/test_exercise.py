"""Every notebook exercise checked both ways (issue 12): the reference solution is judged right, a wrong answer
is not and gets a hint; an unanswered exercise asks for an answer (issue 48: unanswered, wrong and right are three
states, and a check that could not judge, the broker or the run failing, raises: an error, never a wrong answer).
Real broker, real runs."""

import ast
import json
import re
import subprocess
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from instructor.solutions import SOLUTIONS, WRONG
from labkit.broker.ports import free_port
from labkit.crashlab.experiment import Experiment
from labkit.crashlab.proxy import FaultProxy
from labkit.learn import marks
from labkit.learn.exercise import ERROR_NOTE, UNANSWERED, CheckError, Verdict, compare, unanswered
from labkit.lessons import broker_crashes, fencing, idempotence, isolation, share_groups, share_transactions, spark_pipeline, tour, unassigned
from labkit.share.check import check_share
from labkit.spark.timeline import batch_rows
from tests.test_spark_timeline import transactional_history

ORDERS = ("ack_first", "sink_first")
REPO = Path(__file__).parents[1]


def both_ways(check, exercise: str, hint: str) -> None:
    """``check(answer)`` is right for the solution, wrong (with ``hint`` in its message) for the wrong answer,
    and unanswered, asking for an answer, while there is none."""
    right, wrong, blank = check(SOLUTIONS[exercise]), check(WRONG[exercise]), check(UNANSWERED)
    assert right.ok and right.state == "right", right
    assert not wrong.ok and wrong.state == "wrong" and hint in wrong.message, wrong
    assert not blank.ok and blank.state == "unanswered" and "in place of `...`" in blank.message


@pytest.fixture
def heard():
    """The exercise marks published while the test runs (:mod:`labkit.learn.marks`), as ``[(kind, state)]`` (a check that
    runs an experiment also publishes its start, which is not the check's)."""
    got: list[tuple[str, str]] = []
    observer = lambda kind, state: kind == "exercise" and got.append((kind, state))  # noqa: E731
    marks.subscribe(observer)
    yield got
    marks.unsubscribe(observer)


def test_every_notebook_exercise_ships_unanswered_with_a_solution_and_a_wrong_answer():
    with_exercise = set()
    for nb in sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb")):
        cells = ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"]]
        if any(c.startswith("## ") and ". Exercise: " in c.splitlines()[0] for c in cells):
            with_exercise.add(nb.name[:2])
            assert any(re.search(r"^answer = \.\.\.  #", c, re.M) for c in cells), f"{nb.name}: the answer cell is not blank"
    assert with_exercise == SOLUTIONS.keys() == WRONG.keys()


def test_verdicts():
    assert unanswered(3, "a number") is None and unanswered(..., "a number").state == "unanswered"
    assert compare(1, 1, "yes", "no") == Verdict("right", "yes") and compare(1, 2, "yes", "no") == Verdict("wrong", "no")
    assert Verdict("wrong", "try again")._repr_markdown_().startswith("✗ **Not yet.**")
    assert Verdict("unanswered", "write it")._repr_markdown_().startswith("✎ **Your answer first.**")
    assert [repr(Verdict(s, "m")) for s in ("right", "wrong", "unanswered")] == ["RIGHT: m", "NOT YET: m",
                                                                               "UNANSWERED: m"]
    with pytest.raises(ValueError, match="one of unanswered, wrong, right"):
        Verdict("error", "a check that could not judge raises")


def test_a_verdict_is_a_value_that_publishes_nothing(heard):
    Verdict("right", "made, compared, shown")._repr_markdown_()
    unanswered(..., "a number")
    assert heard == []


def test_a_check_publishes_unanswered_wrong_right_or_error_once_each(heard):
    """The four outcomes of a check as marks, in order: the model's exercise (07) unanswered, wrong, right; 04's
    check on a run that skipped no replay raises (the lab's failure) with the note saying so, an ``error`` mark."""
    check = share_transactions.check_abort_prediction
    assert [check(a).state for a in (UNANSWERED, WRONG["07"], SOLUTIONS["07"])] == ["unanswered", "wrong", "right"]
    rows = batch_rows(transactional_history(), "in", "out")[:1]  # batch 0 only: its replay ran
    with pytest.raises(CheckError, match="No replay was skipped") as raised:
        spark_pipeline.check_skip_point("after_commit", rows)
    assert raised.value.__notes__ == [ERROR_NOTE]
    assert heard == [("exercise", "unanswered"), ("exercise", "wrong"), ("exercise", "right"), ("exercise", "error")]


def test_every_check_is_marked_and_no_exercise_nor_lesson_imports_the_hub():
    """Read from the sources (nothing imported): each lesson's ``check_...`` is decorated ``@marked``; labkit.learn.exercise,
    labkit.learn.marks, labkit.learn.claims and every lesson import nothing of labkit.hub; and importing labkit.learn.exercise in a
    fresh interpreter loads none of it."""
    checks, hub = [], []
    for path in [REPO / "labkit" / "learn" / f"{m}.py" for m in ("exercise", "marks", "claims")] + \
            sorted((REPO / "labkit" / "lessons").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("check_"):
                checks.append((path.stem, node.name, [ast.unparse(d) for d in node.decorator_list]))
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module \
                else []
            hub += [(path.stem, n) for n in names if n.startswith("labkit.hub") or n == "labkit.hub"]
    assert len(checks) == 10 and all(d == ["marked"] for *_, d in checks), checks
    assert hub == [], hub
    loaded = subprocess.run([sys.executable, "-c", "import sys, labkit.learn.exercise\n"
                             "print(sorted(m for m in sys.modules if m.startswith('labkit.hub')))"],
                            env={"PATH": "/usr/bin:/bin"}, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr


def test_00_predict_the_isolation_levels(bootstrap):
    topic = tour.quiz_topic(bootstrap)
    both_ways(lambda a: tour.check_prediction(bootstrap, topic, a), "00", "skips what an aborted transaction wrote")
    assert "exactly two keys" in tour.check_prediction(bootstrap, topic, {"read_committed": []}).message


def test_00_an_answer_whose_values_are_not_lists_is_wrong_not_an_error():
    verdict = tour.check_prediction("127.0.0.1:1", "t", {"read_committed": 3, "read_uncommitted": None})  # no broker
    assert verdict.state == "wrong" and "list of values" in verdict.message, verdict


def test_01_pick_the_configs_that_stop_the_duplicates(broker, tmp_path):
    """Right: every record acked, no duplicate, one producer id, and the proxy's own count of the responses it
    lost. Wrong, each said as such: retried without a producer id (duplicates); not retried, by no retries or by a
    message timeout shorter than the request's: the lost-response records fail delivery although the broker wrote
    them (at most once)."""
    exp = Experiment("exercise01", broker.bootstrap_servers, folder=tmp_path)
    with FaultProxy.for_broker(broker) as proxy:
        check = lambda a: idempotence.check_configs(exp, proxy, a)  # noqa: E731
        right, duplicated = check(SOLUTIONS["01"]), check(WRONG["01"])
        no_retries, timed_out = check({"retries": 0}), check({"message.timeout.ms": 1000})
        blank = check(UNANSWERED)
        assert proxy.dropped_responses == 12  # three in each of the four runs
    assert right.ok and "12 records acknowledged, 3 responses lost" in right.message, right
    assert "one producer id" in right.message and "sequence numbers 0 to 11" in right.message, right
    assert not duplicated.ok, duplicated
    assert "3 record(s) in the log more than once and 0 lost" in duplicated.message, duplicated
    assert "appended again" in duplicated.message, duplicated
    for wrong in (no_retries, timed_out):
        assert not wrong.ok and re.search(r"^3 record\(s\) failed delivery \([\w, ]+\), and 3 of them are in the log",
                                          wrong.message), wrong
        assert "proxy lost 3 responses" in wrong.message and "at most once" in wrong.message, wrong
    assert "_MSG_TIMED_OUT" in timed_out.message, timed_out
    assert blank.state == "unanswered" and "in place of `...`" in blank.message
    assert len(exp.participants) == 4  # the blank answer ran nothing


def test_01_a_clean_log_without_one_producer_id_is_not_right(broker, tmp_path, monkeypatch):
    """The right verdict's claim, the leader recognised the retries by a producer id, is read from the broker: a
    leader that reported no producer id for the run (as for a producer without idempotence) is not judged right,
    however clean the log."""
    describe = idempotence.describe_producers
    monkeypatch.setattr(idempotence, "describe_producers", lambda bootstrap, topic: describe(bootstrap, topic)[:0])
    exp = Experiment("exercise01-pid", broker.bootstrap_servers, folder=tmp_path)
    with FaultProxy.for_broker(broker) as proxy:
        verdict = idempotence.check_configs(exp, proxy, SOLUTIONS["01"])
    assert not verdict.ok and verdict.message.startswith("The partition leader knows 0 producer id(s)"), verdict


def test_01_configs_the_client_refuses_are_wrong_before_any_run(tmp_path):
    """Each refused when the client is made (librdkafka's own checks, in this process): no run, no broker needed."""
    exp = Experiment("exercise01-refused", "127.0.0.1:1", folder=tmp_path)
    with FaultProxy(free_port(), free_port()) as proxy:
        verdicts = [idempotence.check_configs(exp, proxy, answer) for answer in (
            {"acks": "most"}, {"linger.msec": 5}, {"transactional.id": "t"},
            {"enable.idempotence": True, "max.in.flight.requests.per.connection": 10})]
    for verdict, why in zip(verdicts, ("Invalid value", "No such configuration property", "requires",
                                       "must be set <= 5")):
        assert verdict.state == "wrong" and verdict.message.startswith("The client refuses these configs: "), verdict
        assert why in verdict.message, verdict
    assert not exp.participants


def test_01_a_broker_that_does_not_answer_is_an_error_not_a_wrong_answer(tmp_path, heard):
    exp = Experiment("exercise01-down", f"127.0.0.1:{free_port()}", folder=tmp_path)  # nothing listens there
    with FaultProxy(free_port(), free_port()) as proxy, pytest.raises((TimeoutError, KafkaException)) as raised:  # creating its topic (the admin times out either way)
        idempotence.check_configs(exp, proxy, SOLUTIONS["01"])
    assert ERROR_NOTE in raised.value.__notes__ and heard == [("exercise", "error")]


def raises_in_the_step(producer, consumer, offsets):  # 02, wrong: the group's metadata left out
    producer.send_offsets_to_transaction(offsets)


def test_02_write_the_offsets_step_and_crash_it(bootstrap, tmp_path):
    # the answer is the code the processor runs, so each answer needs a real run of its own: the three run side by
    # side, each in its own experiment (own topics, group and transactional.id)
    def nothing(producer, consumer, offsets):  # offsets never committed: the restart reads everything again
        pass

    answers = {"right": SOLUTIONS["02"], "wrong": WRONG["02"], "nothing": nothing, "raises": raises_in_the_step}
    with ThreadPoolExecutor(len(answers)) as pool:
        runs = {key: pool.submit(fencing.check_offsets_step, Experiment(f"exercise02-{key}", bootstrap, folder=tmp_path),
                                 answer) for key, answer in answers.items()}
        verdicts = {key: run.result() for key, run in runs.items()}
    assert verdicts["right"].ok, verdicts["right"]
    assert not verdicts["wrong"].ok and "same transaction as the outputs" in verdicts["wrong"].message, verdicts["wrong"]
    assert not verdicts["nothing"].ok and "Which producer call" in verdicts["nothing"].message, verdicts["nothing"]
    # the learner's step raised in the processor: a wrong answer, its error quoted, not the lab's failure
    raised = verdicts["raises"]
    assert raised.state == "wrong" and "after running your raises_in_the_step" in raised.message, raised
    assert "TypeError" in raised.message, raised
    exp = Experiment("exercise02", bootstrap, folder=tmp_path)  # answers refused before any run
    blank = fencing.check_offsets_step(exp, UNANSWERED)
    assert blank.state == "unanswered" and "in place of `...`" in blank.message
    assert "with def" in fencing.check_offsets_step(exp, print).message
    assert "with def" in fencing.check_offsets_step(exp, lambda p, c, o: None).message  # no name to call it by
    assert not exp.participants


def test_02_a_run_that_failed_before_the_step_ran_is_an_error(tmp_path, monkeypatch, heard):
    """The processor failed before it ever ran the learner's step (here: it never started; a broker gone, a lab
    bug): the check raises, never a wrong answer."""
    log = tmp_path / "processor-1.stderr.log"
    log.write_text("COORDINATOR_NOT_AVAILABLE\n")  # no traceback through the learner's code

    def lab_failed(exp, step):
        processor = types.SimpleNamespace(name="processor-1", stderr_log=log)  # it never ran the step
        raise fencing.NoPlannedCrash(processor, "processor-1 ended failed: COORDINATOR_NOT_AVAILABLE, not crashed "
                                                "after your step")

    monkeypatch.setattr(fencing, "offsets_step_run", lab_failed)
    with pytest.raises(RuntimeError, match="COORDINATOR_NOT_AVAILABLE"):
        fencing.check_offsets_step(Experiment("exercise02-lab", "127.0.0.1:1", folder=tmp_path), SOLUTIONS["02"])
    assert heard == [("exercise", "error")]


def test_03_predict_the_lso(bootstrap):
    both_ways(lambda a: isolation.check_lso(bootstrap, a), "03", "first offset of the oldest transaction whose marker is not yet in")


def test_04_the_crash_point_whose_replay_is_skipped():
    # a sink B run as the timeline tests write it: batch 1's driver dies after_commit, its replay is skipped
    rows = batch_rows(transactional_history(), "in", "out")
    both_ways(lambda a: spark_pipeline.check_skip_point(a, rows), "04", "after the Kafka commit but before")
    with pytest.raises(CheckError, match="No replay was skipped"):  # the run, not the answer: no verdict
        spark_pipeline.check_skip_point("after_commit", rows[:1])


def test_05_write_the_guard(bootstrap, tmp_path):
    bug = unassigned.unassigned_commit(Experiment("exercise05", bootstrap, folder=tmp_path))
    both_ways(lambda a: unassigned.check_guard(a, bug), "05", "keep only the partitions the member holds")
    assert "raised" in unassigned.check_guard(lambda a, o: 1 / 0, bug).message


def test_06_choose_the_acknowledgement_order(bootstrap, tmp_path):
    exp = Experiment("exercise06", bootstrap, folder=tmp_path)
    with ThreadPoolExecutor(2) as pool:  # the two orders' runs side by side (own topics, groups and workers)
        topics = dict(zip(ORDERS, pool.map(lambda order: share_groups.framework_sink(exp, order)["topic"], ORDERS)))
    runs = {order: check_share(exp.history.events(), topic=topic, sink=True) for order, topic in topics.items()}
    both_ways(lambda a: share_groups.check_order(a, runs), "06", "cannot seek() back to it")
    assert "one of" in share_groups.check_order("both", runs).message


def test_06_an_answer_of_the_wrong_type_is_wrong_not_an_error():
    verdict = share_groups.check_order(["sink_first"], dict.fromkeys(ORDERS))  # refused before the runs are read
    assert verdict.state == "wrong" and verdict.message.startswith("The answer is one of"), verdict


def test_07_predict_an_abort_modelled():
    both_ways(share_transactions.check_abort_prediction, "07", "every acquisition counts a delivery")


def test_08_predict_the_restart_after_a_commit(bootstrap, tmp_path):
    """On a real run. Right; wrong as part 4's answer (every part, each hinted); wrong in where the restart begins
    only (that hint alone); the old question's keys (the coordinator's state, which part 3's table shows)."""
    exp = Experiment("exercise08", bootstrap, folder=tmp_path)
    check = lambda a: broker_crashes.check_restart_prediction(exp, a)  # noqa: E731
    both_ways(check, "08", "what is left for init_transactions")
    assert check(SOLUTIONS["08"]).message.startswith("The run agrees: {'outcome': None, 'first_input': 4, "
                                                     "'read_uncommitted': 1}. init_transactions found the "
                                                     "transaction CompleteCommit"), check(SOLUTIONS["08"])
    assert check(WRONG["08"]).message.endswith("(wrong: outcome, first_input, read_uncommitted)")
    restart_only = check({**SOLUTIONS["08"], "first_input": 3})
    assert not restart_only.ok and restart_only.message.endswith("(wrong: first_input)"), restart_only
    assert "exactly the keys" in check({"state": "CompleteCommit", "outcome": None, "read_uncommitted": 1}).message
    # every answer was graded against one real run: one processor, restarted once after its kill
    assert sum(e.kind == "txn_init" for e in exp.history.events()) == 1
    assert sum(e.kind == "crash" for e in exp.history.events()) == 1


def test_03_a_malformed_answer_is_refused_before_the_scenario_runs():
    blank_key = isolation.check_lso("127.0.0.1:1", {"high_watermark": 6, "last_stable_offset": 4})  # nothing contacted
    assert not blank_key.ok and "exactly the keys" in blank_key.message, blank_key
    assert "exactly the keys" in isolation.check_lso("127.0.0.1:1", [6, 4, []]).message


def test_03_only_the_wrong_part_of_a_prediction_gets_a_hint(bootstrap):
    # the LSO taken for the high watermark: the other two parts are right and get no hint
    verdict = isolation.check_lso(bootstrap, {**SOLUTIONS["03"], "last_stable_offset": 6})
    assert not verdict.ok and verdict.message.endswith("(wrong: last_stable_offset)"), verdict
    assert "whose marker is not yet in the partition" in verdict.message and "COMMIT marker" not in verdict.message, verdict


def test_04_a_crash_point_whose_replay_ran_and_one_of_the_other_sink():
    rows = batch_rows(transactional_history(), "in", "out")  # batch 0 died mid_produce and its replay wrote again
    ran = spark_pipeline.check_skip_point("mid_produce", rows)
    assert not ran.ok and "after the Kafka commit but before" in ran.message, ran
    other_sink = spark_pipeline.check_skip_point("after_produce", rows)  # sink A's point, not sink B's
    assert not other_sink.ok, other_sink
    assert other_sink.message.startswith("The answer is one of 'before_produce', 'mid_produce'"), other_sink


def test_07_each_wrong_part_of_a_prediction_gets_its_own_hint():
    right = SOLUTIONS["07"]
    stopped = share_transactions.check_abort_prediction({**right, "state": "AVAILABLE"})
    assert not stopped.ok and stopped.message == "Does the loop stop after the abort, or does it poll again? (MODELLED)"
    twice = share_transactions.check_abort_prediction({**right, "outputs_committed": 2})
    assert not twice.ok and twice.message.startswith("An aborted transaction's output is never committed"), twice
    malformed = share_transactions.check_abort_prediction({"state": "ACKNOWLEDGED"})
    assert not malformed.ok and "exactly the keys" in malformed.message, malformed
