# The README's commands.  Each one creates .venv and installs the package on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: test test-all demo bench lint clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

## make test: the CI suite (fast tests plus the seeded subset of slow ones marked `ci`), in two
## pytest-xdist workers of one thread each (tests/conftest.py), a test file to a worker
test: $(STAMP)
	$(PY) -m pytest -m "not slow or ci" -q -n 2 --dist loadfile

## make test-all: every test, slow statistical checks included
test-all: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile

## make demo: a small end-to-end run; figures and tables go to results/
demo: $(STAMP)
	$(PY) -m rmt.app.demo --out results/demo

## make bench: the benchmark scripts (numbers go to benchmarks/RESULTS.md by hand)
bench: $(STAMP)
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) benchmarks/bench_hvp.py

## make lint: ruff check and ruff format --check (ruff comes with the [test] extra)
lint: $(STAMP)
	$(PY) -m ruff check rmt tests benchmarks tools
	$(PY) -m ruff format --check rmt tests benchmarks tools

clean:
	rm -rf $(VENV) results .pytest_cache
