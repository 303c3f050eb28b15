# The lab's two commands: `make lab` and `make test`. Each does its own set-up.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: lab stop test jars bench setup browser

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "labkit needs Python 3.11 or newer: install it, or run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

# The Kafka 4.3.1 jars, resolved once with Maven into ~/.cache/labkit (or $$LABKIT_HOME).
jars: $(STAMP)
	$(PY) -m labkit.broker.runtime

# With LABKIT_BOOTSTRAP set (e.g. docker compose), the lab uses that cluster: no Java or Maven needed.
lab: $(STAMP)
	@if [ -z "$$LABKIT_BOOTSTRAP" ]; then $(PY) -m labkit.broker.runtime; fi
	$(PY) -m labkit.lab up

stop:
	@if [ -x $(PY) ]; then $(PY) -m labkit.lab down; fi

# Debian's chromium, for the browser test (Playwright drives it; browser downloads do not work here).
browser:
	@command -v chromium >/dev/null || { if [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: no chromium and not root: the browser test is skipped (sudo apt-get install chromium)"; fi; }

test: jars browser
	$(PY) -m pytest --nbval-lax --nbval-cell-timeout=600 -p no:cacheprovider tests notebooks

bench: jars
	$(PY) bench/broker_start.py
	$(PY) bench/participants.py
	$(PY) bench/txn_size.py
