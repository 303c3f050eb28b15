# The lab's two commands: `make lab` and `make test`. Each does its own set-up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Kafka releases the suite checks: the full suite on the first (the default), notebooks 00, 05 and 09 on the others
# (tests/test_older_releases.py, in the same run), and the facts that differ per release (tests/test_java.py's
# timed-out commit, tests/test_release_facts.py's jars).
KAFKA_VERSIONS := 4.4.0 4.3.2
# Parallel workers (pytest-xdist), each with its own broker; a file runs whole in one worker, the slowest first
# (conftest.SLOWEST). auto: two per CPU the run may use, at least 4, at most one per 3 GiB of memory
# (conftest.pytest_xdist_auto_num_workers); the suite mostly waits on real timeouts. WORKERS=N sets it.
WORKERS ?= auto
# SPEED=half: the whole suite on one of the machine's CPUs (taskset -c 0), i.e. on a machine twice as slow with half the
# CPU; every process the suite starts (brokers, JVMs, kernels) inherits it, and the JVMs then see one CPU and pick
# other defaults (serial GC, fewer compiler threads). The suite must pass in it too (docs/testing.md).
ifeq ($(SPEED),half)
CPUS := taskset -c 0
else ifneq ($(SPEED),)
$(error SPEED=$(SPEED): the only speed is SPEED=half (or none))
endif
PYTEST := $(CPUS) $(PY) -m pytest -rs --nbval-lax --nbval-cell-timeout=600 -p no:cacheprovider

.PHONY: lab stop reset test jars bench setup browser

setup: $(STAMP)

# BUNDLE=<archive> (what `make bundle` wrote, labkit/bundle/): set up with no network. The system python (standard
# library only: the venv does not exist yet) checks the archive and unpacks its wheels into .bundle/wheels and its jar
# caches into $$LABKIT_HOME; pip then installs from those wheels alone, and Maven is never needed.
ifneq ($(BUNDLE),)
PIP_FROM := --no-index --find-links .bundle/wheels
endif
.PHONY: unbundle
unbundle:
	$(if $(BUNDLE),$(PYTHON) -m labkit.bundle install $(BUNDLE),@:)

# -W "ignore:Editable installation": setuptools' boxed notice on every editable install (pip shows a build backend's
# warnings even with -q) is no error, but a newcomer's first `make` would look failed; only that one is hidden.
$(STAMP): requirements.txt pyproject.toml | unbundle
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "labkit needs Python 3.11 or newer: install it, or run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(PIP_FROM) --upgrade pip
	$(PY) -m pip install -q $(PIP_FROM) -r requirements.txt
	$(PY) -W "ignore:Editable installation" -m pip install -q $(PIP_FROM) --no-deps -e .
	touch $(STAMP)

# The Kafka jars (LABKIT_KAFKA_VERSION, default 4.4.0), resolved once with Maven into ~/.cache/labkit (or $$LABKIT_HOME).
jars: $(STAMP)
	$(PY) -m labkit jars

# With LABKIT_BOOTSTRAP set (e.g. docker compose), the lab uses that cluster: no Java or Maven needed. JupyterLab serves
# the learner's own copies of the notebooks ($$LABKIT_HOME/work, labkit/lab/workspace.py), never the repository's.
lab: $(STAMP) preflight
	@if [ -z "$$LABKIT_BOOTSTRAP" ]; then $(PY) -m labkit jars; fi
	$(PY) -m labkit up

# One archive for a venue with no network (labkit/bundle/): this platform's wheels, the jar caches of the lab's Kafka
# release and of Spark's connector, the compiled Java code, a manifest; dist/labkit-bundle-*.tar (its measured size:
# bench/results/bundle.json).
# ARGS: --out DIR, Kafka releases. The offline test (outside make test): python -m labkit_dev.offline_check.
.PHONY: bundle
bundle: $(STAMP)
	$(PY) -m labkit.bundle build $(ARGS)

stop:
	@if [ -x $(PY) ]; then $(PY) -m labkit down; $(PY) -m labkit spark-cluster down; fi

# Remove the lab's topics and experiment files (nothing else); works with the lab running or stopped.
reset: $(STAMP)
	$(PY) -m labkit reset $(ARGS)

# Debian's chromium, for the browser test (Playwright drives it; browser downloads do not work here).
browser:
	@command -v chromium >/dev/null || { if [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: no chromium and not root: the browser test is skipped (sudo apt-get install chromium)"; fi; }

# The suite starts hundreds of Python processes (workers, kernels, participants): each reuses the bytecode the first
# one compiled (__pycache__), even where the environment says PYTHONDONTWRITEBYTECODE (a worker's collection: 13.6 ->
# 8.2 CPU s). LABKIT_CI=1: the notebooks' CI-only cells press the playgrounds' buttons (labkit.under_test(); conftest.py
# sets it too, for a pytest run without make); a learner's Run All leaves them to the learner.
test: $(STAMP) browser
	$(PY) -m labkit jars $(KAFKA_VERSIONS)
	env -u LABKIT_BOOTSTRAP -u LABKIT_PROXIED -u PYTHONDONTWRITEBYTECODE LABKIT_CI=1 LABKIT_KAFKA_VERSION=$(firstword $(KAFKA_VERSIONS)) \
	  $(PYTEST) \
	  -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 tests notebooks

bench: jars
	$(PY) bench/broker_start.py
	$(PY) bench/jvm_cpu.py
	$(PY) bench/participants.py
	$(PY) bench/history_reads.py
	$(PY) bench/txn_size.py
	$(PY) bench/share_observer.py
	$(PY) bench/explore.py
	$(PY) bench/spark_pipeline.py

# The lab for a room (labkit/hub/, docs/instructor.md): JupyterHub as root on this machine, one Unix user per attendee.
# Its own set-up, once per machine: a shared venv and a copy of labkit in /opt/labkit (LABKIT_HUB_PREFIX), the proxy
# from npm in .hub/. Passwords: LABKIT_HUB_PASSWORD (the workshop code, asked on an attendee's first sign-in, when they
# set their own) and LABKIT_HUB_ADMIN_PASSWORD (the instructor's). Limits per attendee: ARGS="--memory MIB --tasks N".
# e.g. sudo LABKIT_HUB_PASSWORD=... LABKIT_HUB_ADMIN_PASSWORD=... make hub ARGS="--ip 0.0.0.0 --port 8000"
# Each run is a room (labkit/hub/rooms.py): a new one (.hub/rooms/<date>) unless ROOM=NAME names one to resume; its
# first lines say which. The end of the day: sudo make hub-end ROOM=NAME (the hub stopped) writes the room's marks and
# predictions to a CSV, prints its path, then removes the room's Unix users, hub accounts, passwords and marks.
.PHONY: hub hub-end
hub: $(STAMP)
	@$(PY) -m labkit.hub $(if $(ROOM),--room $(ROOM)) $(ARGS)

hub-end: $(STAMP)
	@$(PY) -m labkit.hub end-room $(ROOM) $(ARGS)

# Whether this machine can run the lab (labkit/doctor/): one line per prerequisite with its fix, then which notebooks
# can run here; exit 1 when one cannot. `make lab` runs it first as `preflight` (about 0.6 s with the caches filled;
# each network probe at most 3 s, and only for what is not cached), which stops only when no notebook can run.
.PHONY: doctor preflight
doctor: $(STAMP)
	$(PY) -m labkit doctor $(ARGS)

preflight: $(STAMP)
	@$(PY) -m labkit doctor --lab

# The lab as a book of real runs (labkit/book/, issue 40): every notebook run against an embedded broker with
# LABKIT_CI=1 (at most 2 at once; a notebook whose source and labkit have not changed since its last run is reused),
# then a static site built offline by Sphinx + MyST-NB in its own venv (.venv-book, requirements-book.txt), into
# $$LABKIT_HOME/book/html (default ~/.cache/labkit/book/html). Serve it: python -m http.server -d <that folder>.
# ARGS: notebook numbers (ARGS="00 05"), --out DIR, --no-run, --allow-failures (a cell that raised otherwise stops
# the build, named; with it the book shows each failed cell as failed, and make still fails).
BOOK_VENV := .venv-book
.PHONY: book
$(BOOK_VENV)/.installed: requirements-book.txt
	$(PYTHON) -m venv $(BOOK_VENV)
	$(BOOK_VENV)/bin/python -m pip install -q -r requirements-book.txt
	touch $@

book: $(STAMP) $(BOOK_VENV)/.installed
	$(PY) -m labkit jars
	$(CPUS) $(PY) -m labkit.book --builder $(BOOK_VENV)/bin/python $(ARGS)
