"""What each notebook needs to run on this machine: the prerequisites it uses and its memory.

Sources of each requirement:

* the Java participant, compiled with ``javac`` at first use (:mod:`labkit.crashlab.java`): notebooks 01 (its part
  4), 02, 03, 06 and 08;
* a JDK's ``java`` source launcher on the Kafka release's jars: 05 (``jvm/nonmember/NonMemberCommit.java``,
  :mod:`labkit.lessons.nonmember_commit`; ``javac`` present is the doctor's sign of a JDK), which also reads the
  release's error codes from its kafka-clients jar on a JVM (:func:`labkit.kafka.protocol.error_names`);
* a JVM and Spark's Kafka connector jars, resolved with Maven (:func:`labkit.spark.session.connector_jars`): 04;
* a broker of its own (a JVM on the Kafka jars): 08, also when the lab uses another cluster (``LABKIT_BOOTSTRAP``);
* nothing more than the broker: 00 and 07, whose protocol facts the broker itself answers (ApiVersions,
  :mod:`labkit.kafka.api_versions`), so with ``LABKIT_BOOTSTRAP`` (docker compose) they need no Java on this machine;
* the lab broker: every notebook; a local JVM on the Kafka jars unless ``LABKIT_BOOTSTRAP`` names another cluster;
* memory: each notebook's peak, the whole lab's (broker, JupyterLab, kernel, participants), measured in a browser run
  of the notebook (the hub issue's measurement); 01 and 03 are estimates, not measured.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        peak_mib: the whole lab's peak memory while it runs, MiB (resident, the hub issue's browser measurement).
        estimate: ``peak_mib`` is an estimate, not a measurement.
        needs: the requirement keys it uses besides :data:`LAB` and the lab broker.
        partly: what of it still runs when only its JDK is missing: no ``javac``, or, while the lab uses another
            cluster (``LABKIT_BOOTSTRAP``), no Java at all (``""``: nothing).
    """

    number: str
    title: str
    peak_mib: int
    estimate: bool
    needs: frozenset[str]
    partly: str = ""


#: JupyterLab's own share of the memory, MiB, left out of notebook 04's measurement (1945 MiB without it).
JUPYTERLAB_MIB = 126

NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("00", "tour", 780, False, frozenset()),
    Notebook("01", "idempotence", 900, True, frozenset({JAVAC, JVM}),
             partly="parts 1-3 and 5-7 run; part 4 needs a JDK"),
    Notebook("02", "zombie fencing", 1577, False, frozenset({JAVAC, JVM})),
    Notebook("03", "isolation levels", 900, True, frozenset({JAVAC, JVM})),
    Notebook("04", "Spark pipeline", 1945 + JUPYTERLAB_MIB, False, frozenset({JVM, SPARK_JARS})),
    Notebook("05", "unassigned partition", 1010, False, frozenset({JAVAC, JVM, KAFKA_JARS})),
    Notebook("06", "share groups", 1048, False, frozenset({JAVAC, JVM})),
    Notebook("07", "share transactions", 955, False, frozenset()),
    Notebook("08", "broker crashes", 1469, False, frozenset({JAVAC, JVM, KAFKA_JARS})),
)


def needs_of(notebook: Notebook, external_broker: bool) -> frozenset[str]:
    """Every requirement key ``notebook`` uses.

    Args:
        external_broker: the lab uses another cluster (``LABKIT_BOOTSTRAP`` set), so the lab broker needs no local
            JVM or Kafka jars (notebook 08 still starts one of its own).
    """
    local = frozenset() if external_broker else frozenset({LOCAL_BROKER, JVM, KAFKA_JARS})
    return notebook.needs | local | {LAB}


def users(key: str, external_broker: bool) -> tuple[str, ...]:
    """The numbers of the notebooks that use requirement ``key`` (see :func:`needs_of`)."""
    return tuple(nb.number for nb in NOTEBOOKS if key in needs_of(nb, external_broker))
