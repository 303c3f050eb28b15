"""The lab for a venue with no network: one archive for a USB stick (``make bundle``), installed with
``make lab BUNDLE=<archive>`` and nothing downloaded.

- :mod:`labkit.bundle.build` (the venv's python, with the network): the wheels ``make lab`` installs, for this
  platform and Python (``pip wheel``); the Kafka jar cache of each release asked for (default: the lab's release) and
  Spark's Kafka connector jars, as Maven copied them into ``$LABKIT_HOME``; the broker's launcher and the Java
  participant as ``javac`` compiled them there; a manifest (:mod:`labkit.bundle.manifest`) with their versions and
  SHA-256 hashes. Written to ``dist/labkit-bundle-<version>-<python>-<platform>.tar``.
- :mod:`labkit.bundle.install` (the system python, standard library only: it runs before the venv exists): checks the
  archive against its manifest, this Python and this checkout's requirements.txt, then unpacks the wheels into
  ``.bundle/wheels`` (pip then installs with ``--no-index --find-links .bundle/wheels``) and the jar caches into
  ``$LABKIT_HOME``, where the lab looks for them, so Maven is never called.
Its end-to-end test is tooling outside the package, :mod:`labkit_dev.offline_check`, run outside ``make test`` (the
archive is large: its size as measured is in bench/results/bundle.json, which that test writes): build, install into a
fresh copy of the checkout with no network at all (``unshare -n``), run notebook 00.

``python -m labkit.bundle build|install ...`` (:mod:`labkit.bundle.__main__`).
"""
