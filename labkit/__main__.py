"""labkit's command line, what ``make`` runs: ``python -m labkit COMMAND``.

Commands: ``jars [VERSION ...]`` (check Java, resolve the Kafka jars and Spark's Kafka connector jars, make the broker's
and the Java participant's class-data archives, :mod:`labkit.lab.jvm_archives`), ``up``, ``down``, ``status`` (the lab:
broker and JupyterLab), ``serve-broker`` (the lab broker daemon that ``up`` starts), ``spark-cluster up|down|status`` (a
local Spark standalone cluster, :mod:`labkit.lab.spark_cluster`), ``doctor [--lab]`` (whether this machine can run the
lab, :mod:`labkit.doctor`), ``reset [--yes]`` (remove the topics the lab created and the experiment files; ``--yes``: no
question on a broker that is not the lab's own, :mod:`labkit.lab.reset`). A :class:`~labkit.core.errors.LabkitError` is
printed as its message alone (it names the fix), exit 1.
"""

import sys

from labkit.broker import runtime
from labkit.broker.settings import kafka_version
from labkit.core.errors import LabkitError
from labkit.lab import server as lab

if __name__ == "__main__":
    args = sys.argv[1:]
    try:
        if args[:1] == ["spark-cluster"]:
            from labkit.lab import spark_cluster

            sys.exit(spark_cluster.main(args[1:]))
        if args[:1] == ["doctor"]:
            from labkit.doctor.cli import main as doctor

            sys.exit(doctor(args[1:]))
        if args[:1] == ["reset"]:
            from labkit.lab import reset

            sys.exit(reset.main(args[1:]))
        if args[:1] == ["jars"]:
            from labkit.spark.session import connector_jars, SPARK_VERSION

            from labkit.lab.jvm_archives import make_archives

            code = runtime.main(args[1:])
            print(f"Spark {SPARK_VERSION} Kafka connector jars: {len(connector_jars())}")
            for version in args[1:] or [kafka_version()]:
                made = make_archives(version)
                print(f"Kafka {version} class-data archives: {', '.join(made) + ' made' if made else 'made before'}")
            sys.exit(code)
        sys.exit(lab.main(args))
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        sys.exit(1)
