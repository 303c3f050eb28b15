"""What each notebook needs to run on this machine: the prerequisites it uses and its memory.

Sources of each requirement:

* the Java participant, compiled with ``javac`` at first use (:mod:`labkit.crashlab.java`): notebooks 01 (its part
  4), 02, 03, 06, 08 and 09;
* a JDK's ``java`` source launcher on the Kafka release's jars: 05 (``jvm/nonmember/NonMemberCommit.java``,
  :mod:`labkit.lessons.nonmember_commit`; ``javac`` present is the doctor's sign of a JDK), which also reads the
  release's error codes from its kafka-clients jar on a JVM (:func:`labkit.kafka.protocol.error_names`);
* a JVM and Spark's Kafka connector jars, resolved with Maven (:func:`labkit.spark.session.connector_jars`): 04;
* a broker of its own (a JVM on the Kafka jars): 08 and 09, also when the lab uses another cluster
  (``LABKIT_BOOTSTRAP``);
* nothing more than the broker: 00 and 07, whose protocol facts the broker itself answers (ApiVersions,
  :mod:`labkit.kafka.api_versions`), so with ``LABKIT_BOOTSTRAP`` (docker compose) they need no Java on this machine;
* the lab broker: every notebook; a local JVM on the Kafka jars unless ``LABKIT_BOOTSTRAP`` names another cluster;
* memory: each notebook's peak, the whole lab's (broker, JupyterLab, kernel, participants), measured the way the lab
  runs: ``bench/lab_memory.py`` in the lab of ``make lab`` (:data:`LAB_MEASURED`, what a laptop is judged by),
  ``bench/hub.py`` for one attendee on the workshop hub (:data:`HUB_MEASURED`), whose broker has a smaller heap
  (:data:`labkit.broker.embedded.HEAP_ENV`) and whose JupyterLab serves the attendee's browser (:data:`MEASURED_FOR`,
  :func:`measured_peaks`); a notebook without a passed run there is not measured, and nothing stands in for its
  figure (:func:`peaks_of`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: Requirement keys (what a check can fail): the lab itself (OS, Python, ports, disk, packages)...
LAB = "lab"
#: ... the lab broker on this machine (a Java 17+ and the Kafka jars; not needed with ``LABKIT_BOOTSTRAP``) ...
LOCAL_BROKER = "local broker"
#: ... a Java 17+ runtime started by the notebook itself ...
JVM = "jvm"
#: ... ``javac`` (a JDK) for the Java participant ...
JAVAC = "javac"
#: ... the Kafka release's jars in the jar cache ...
KAFKA_JARS = "Kafka jars"
#: ... Spark's Kafka connector jars in the jar cache.
SPARK_JARS = "Spark connector jars"


@dataclass(frozen=True)
class Notebook:
    """One notebook's needs.

    Attributes:
        number: the two digits of its file name (``notebooks/NN_*.ipynb``).
        title: a short name, for the report.
        needs: the requirement keys it uses besides :data:`LAB` and the lab broker.
        partly: what of it still runs when only its JDK is missing: no ``javac``, or, while the lab uses another
            cluster (``LABKIT_BOOTSTRAP``), no Java at all (``""``: nothing).
    """

    number: str
    title: str
    needs: frozenset[str]
    partly: str = ""


NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("00", "tour", frozenset()),
    Notebook("01", "idempotence", frozenset({JAVAC, JVM}), partly="parts 1-3 and 5-7 run; part 4 needs a JDK"),
    Notebook("02", "zombie fencing", frozenset({JAVAC, JVM})),
    Notebook("03", "isolation levels", frozenset({JAVAC, JVM})),
    Notebook("04", "Spark pipeline", frozenset({JVM, SPARK_JARS})),
    Notebook("05", "unassigned partition", frozenset({JAVAC, JVM, KAFKA_JARS})),
    Notebook("06", "share groups", frozenset({JAVAC, JVM})),
    Notebook("07", "share transactions", frozenset()),
    Notebook("08", "broker crashes", frozenset({JAVAC, JVM, KAFKA_JARS})),
    Notebook("09", "replication", frozenset({JAVAC, JVM, KAFKA_JARS})),
)
#: The notebooks' measured memory in the lab of ``make lab``: what ``bench/lab_memory.py --json`` wrote (the real lab
#: started by ``python -m labkit up``, each notebook run whole in turn in a kernel of its own; the peak PSS of all the
#: lab's processes). Package data, so that every way labkit is installed has it: the checkout, the hub's copy of
#: ``labkit/`` (:data:`labkit.hub.install.COPIED`), a wheel (pyproject.toml's ``package-data``), the bundle's fresh
#: checkout.
LAB_MEASURED = Path(__file__).with_name("lab-memory.json")
#: The same for one attendee on the workshop hub: what ``bench/hub.py --json`` wrote (a real hub, each notebook run
#: whole in turn in their JupyterLab; the peak PSS of all their processes). Package data too.
HUB_MEASURED = Path(__file__).with_name("hub-memory.json")
#: Each way the lab runs (``"lab"``: ``make lab``, on a laptop; ``"hub"``: an attendee's lab on the workshop hub) ->
#: the file of its figures and where they were measured, as the doctor says it.
MEASURED_FOR = {"lab": (LAB_MEASURED, "measured in make lab"), "hub": (HUB_MEASURED, "measured on the workshop hub")}


def measured_peaks(path: Path = LAB_MEASURED) -> dict[str, int]:
    """Each measured notebook's peak (:func:`peaks_of`) in the memory bench's JSON at ``path`` (default the figures of
    ``make lab``'s lab).

    Raises:
        OSError: no file at ``path`` (an install without it).
        ValueError: the file is not a memory bench's JSON (the message names it).
    """
    try:
        measured = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a memory bench's JSON, nor any JSON: {exc}") from None
    try:
        return peaks_of(measured)
    except ValueError as exc:
        raise ValueError(f"{path} is {exc}") from None


def peaks_of(measured: dict) -> dict[str, int]:
    """Each measured notebook's peak: two-digit number -> MiB, the proportional set size of the whole lab (broker,
    JupyterLab, kernel, participants) summed at its peak, from ``measured`` (the JSON of ``bench/lab_memory.py`` or
    ``bench/hub.py``, parsed: the same rows). Only runs that passed count (``error`` null, no ``live_view_error``, a
    ``peak_mib``): a notebook whose run failed, or whose claims never reached the instructor's live view (the hub's),
    or that was not run, is not there.

    Raises:
        ValueError: ``measured`` is not a memory bench's figures (the message says what they hold).
    """
    try:
        return {row["notebook"][:2]: int(row["peak_mib"]) for row in measured["notebooks"]
                if row.get("error") is None and row.get("live_view_error") is None and row.get("peak_mib") is not None}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a memory bench's JSON (a list of rows under \"notebooks\", each with \"notebook\", "
                         f"\"error\" and \"peak_mib\"): {type(exc).__name__} {exc}; write it again with "
                         "`bench/lab_memory.py --json` (make lab's) or `bench/hub.py --json` (the hub's)") from None


def needs_of(notebook: Notebook, external_broker: bool) -> frozenset[str]:
    """Every requirement key ``notebook`` uses.

    Args:
        external_broker: the lab uses another cluster (``LABKIT_BOOTSTRAP`` set), so the lab broker needs no local
            JVM or Kafka jars (notebooks 08 and 09 still start brokers of their own).
    """
    local = frozenset() if external_broker else frozenset({LOCAL_BROKER, JVM, KAFKA_JARS})
    return notebook.needs | local | {LAB}


def users(key: str, external_broker: bool) -> tuple[str, ...]:
    """The numbers of the notebooks that use requirement ``key`` (see :func:`needs_of`)."""
    return tuple(nb.number for nb in NOTEBOOKS if key in needs_of(nb, external_broker))
