"""The learner's own lab: ``make lab``'s broker and JupyterLab, their notebooks and what a notebook connects to.

* :mod:`labkit.lab.server`: ``make lab`` / ``make stop``: the lab broker and JupyterLab in the background.
* :mod:`labkit.lab.spark_cluster`: ``python -m labkit spark-cluster``: a Spark standalone cluster daemon (notebook 04).
* :mod:`labkit.lab.connection`: which broker a notebook talks to (``labkit.connect()``), and the fault proxy.
* :mod:`labkit.lab.workspace`: the learner's working copies of the notebooks and JupyterLab's settings.
* :mod:`labkit.lab.reset`: ``make reset``: the lab's topics and experiment files removed, nothing else.
* :mod:`labkit.lab.jvm_archives`: the class-data sharing archives of the JVMs the lab starts.
* :mod:`labkit.lab.logview`: what a partition's log holds, and what each isolation level reads of it.
"""
