"""The lab as a published book of real runs (issue 40): ``python -m labkit.book`` (``make book``).

One job per module:

* :mod:`labkit.book.stamp`: whether a notebook's recorded run is still current (a hash of its source and labkit's).
* :mod:`labkit.book.execute`: runs the notebooks (nbclient, the lab's kernel, ``LABKIT_CI=1``), at most 2 at once.
* :mod:`labkit.book.provenance`: the line every page carries (Kafka, clients, Spark, the run's date).
* :mod:`labkit.book.clean`: turns a run into a page (no errors, no progress bars, no local paths, static plotly, claims
  collapsed, widgets replaced by a note).
* :mod:`labkit.book.site`: the Sphinx + MyST-NB source folder and the offline HTML build in the builder's own venv.
"""
