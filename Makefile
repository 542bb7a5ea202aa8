# make demo / make test / make bench: each creates .venv if missing and installs what it needs.
# The distribution's CPython (built with PGO/LTO) runs rmqtool's hot loops about 30% faster
# than a default pyenv build, so it is preferred when it is 3.10 or newer; PYTHON=... overrides.
PYTHON ?= $(shell for p in /usr/bin/python3 python3; do \
	$$p -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' 2>/dev/null && echo $$p && break; done)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test fuzz bench bench-readme venv clean report-picture native

venv: $(STAMP)

# Headless Chromium (Debian's package) is installed with the venv when missing: tests/test_report_html.py opens
# the HTML report in it (the Makefile is a prerequisite, so a venv made before this rule gets it too).
# SUDO: empty when make runs as root (a container without sudo), else sudo.
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(STAMP): pyproject.toml Makefile $(wildcard rmqtool/native/*.c rmqtool/native/*.h)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[dev,codecs,fast,spark]'
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
		$(SUDO) apt-get install -y chromium || { $(SUDO) apt-get update && $(SUDO) apt-get install -y chromium; }
	touch $(STAMP)

# the native kernel built again in place (after editing rmqtool/native/*.c; the install builds it too)
native: $(STAMP)
	$(PY) -c 'from setuptools import setup; setup()' -q build_ext --inplace

demo: $(STAMP)
	$(PY) -m rmqtool.demo

# two workers (pytest-xdist), a worker taking tests from the other when it runs out (a long
# Spark file no longer holds the end); the suite stays within 5 minutes on 2 cores
TEST_WORKERS ?= -n 2 --dist worksteal

test: $(STAMP)
	$(PY) -m compileall -q rmqtool formats benchmarks tests
	$(PY) -m pytest -q $(TEST_WORKERS)

# the property tests at the deep hypothesis profile (tests/conftest.py): 20x the examples
fuzz: $(STAMP)
	RMQTOOL_HYPOTHESIS=deep $(PY) -m pytest -q $(TEST_WORKERS)

# make bench: every module, its output kept in .bench/last-run.txt for `make bench-readme`;
# BENCH=read runs the modules whose name has "read"; AGAINST=REV runs REV's modules and these in
# turns and prints the lines that regressed (output in .bench/last-against.txt)
BENCH_LOG := $(if $(AGAINST),.bench/last-against.txt,.bench/last-run.txt)
bench: $(STAMP)
	mkdir -p .bench
	bash -o pipefail -c '$(PY) -m benchmarks $(if $(AGAINST),--against $(AGAINST)) $(BENCH) | tee $(BENCH_LOG)'

# README's performance section written again from the last whole `make bench` run
bench-readme: $(STAMP)
	$(PY) -m benchmarks.readme .bench/last-run.txt README.md

# docs/report.png, the README's picture of `rmqtool report --html`: the demo store's page in headless Chromium
report-picture: $(STAMP)
	$(PY) docs/make_report_picture.py docs/report.png

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .bench
