# Targets match the README's quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# A second, tiny venv with an old librdkafka (confluent-kafka 2.3.0 bundles librdkafka 2.3.0)
# for tests/broker/test_old_librdkafka.py; it skips where this venv is missing.
CK23_VENV  ?= .venv-ck23
CK23_STAMP := $(CK23_VENV)/.installed

.PHONY: setup bytecode rewrite-cache system-deps old-librdkafka demo test test-fast lint format bench compat compat-deps compat-runner clean

setup: $(STAMP) old-librdkafka system-deps

old-librdkafka: $(CK23_STAMP)

$(CK23_STAMP):
	$(PYTHON) -m venv $(CK23_VENV)
	$(CK23_VENV)/bin/pip install --quiet confluent-kafka==2.3.0
	touch $(CK23_STAMP)

# Debian packages (command:package): kcat for the interop tests, iptables for the nemesis's
# network partitions, ip (iproute2) for the multi-host tests' network namespaces; installed where
# we are root with apt-get, otherwise what needs them skips with a note.
SYSTEM_PACKAGES := kcat:kcat iptables:iptables ip:iproute2
system-deps:
	@for entry in $(SYSTEM_PACKAGES); do \
	  tool=$${entry%%:*}; package=$${entry##*:}; \
	  command -v $$tool >/dev/null 2>&1 || PATH="$$PATH:/usr/sbin:/sbin" command -v $$tool >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$package >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$package >/dev/null 2>&1; } || \
	    echo "note: could not install $$package; what needs it will skip"; \
	  else echo "note: $$tool not installed (needs root + apt-get); what needs it will skip"; fi; }; \
	done

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all]'
	touch $(STAMP)

# Byte-code for the project's own modules, written once here. pip compiles an installed
# package's modules; an editable install's are compiled by every process that imports them, and
# the result is not kept where PYTHONDONTWRITEBYTECODE is set (as on CI): each node, command and
# Spark worker of a suite run compiled the same sources again, 0.3-0.5 s of CPU apiece on a
# 2-core box. compileall writes regardless, and only what changed (under a second otherwise).
BYTECODE_DIRS := log quorum tools producer spark bench tests pyspark_quorumlog.py
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 $(BYTECODE_DIRS) >/dev/null

# pytest's assertion-rewritten test modules, which it keeps in tests/**/__pycache__ (see
# tests/conftest.py): written here by one collection, in two halves side by side, whenever a
# test file is newer than the stamp. Without them each of `make test`'s three workers rewrites
# and compiles all ~240 test modules itself as it collects: on a fresh clone a collection took
# 18 s of CPU, 7 s with them (2-core box, 2026-11-27). A test file that does not import is left
# for pytest to report.
REWRITE_STAMP := tests/__pycache__/rewritten.stamp
rewrite-cache: $(REWRITE_STAMP)
$(REWRITE_STAMP): $(STAMP) $(shell find tests -name '*.py' -not -path '*/__pycache__/*')
	@set -- $$(ls -d tests/*/ | grep -v __pycache__); first="tests/test_*.py"; second=; \
	while [ $$# -gt 0 ]; do first="$$first $$1"; second="$$second $${2:-}"; shift; \
	  [ $$# -gt 0 ] && shift; done; \
	collect() { $(BIN)/python -m pytest --collect-only -q -p no:xdist -p no:cacheprovider "$$@" \
	  >/dev/null 2>&1; }; \
	collect $$first & pid=$$!; collect $$second && wait $$pid && touch $@ || true

# The main job: the end-to-end showcase.
demo: setup bytecode
	$(BIN)/quorumlog demo

# The whole suite, slow real-cluster tests included (this is what CI runs), on three pytest-xdist
# workers: real-cluster tests spend much of their time waiting on processes and sockets. On a
# 2-core box with two workers the suite's processes used 59 % of the cores (13:55 of pytest);
# with three, 12:24-13:11 over six runs, the workers finishing within 10 s of each other
# (2026-11-27); with the harness's nodes forked from a fork server, the pipeline test in the
# shared session and leaner test JVMs, 10:23-11:53 over five runs in place and 12:24-12:51 for
# two fresh clones' first runs; with Spark's Python workers on the installed, compiled pyspark
# (spark/worker_site) and standby controllers no longer polling, 9:30-9:54 for three runs in place
# (10:40 with the first alone) and 10:14-10:34 for three fresh clones' first runs (2026-11-27,
# same box); with Raft's tick threads sleeping until a heartbeat or election is due, 9:57 for a
# fresh clone's first run, and with the rewrite cache below written first, 9:39-10:40 for three
# (13:03-14:31 with the venvs and librdkafka's runner built) and 9:26-10:15 in place: the box's
# speed varied by more than the changes saved (same box, later the same day). With new
# partitions' epoch checkpoints no longer fsynced on the event loop: 9:58 for a fresh clone's
# first run (13:47 in all), 9:19 in place (2026-11-27). With shared clusters stopped when their
# group ends (they had idled to the end of the run): 10:08 for a fresh clone's first run, 8:57
# in place, on a slower box (timeit 19-31 us; 10:14-10:31 in four runs earlier that day).
# A file's tests stay on one worker, all of tests/spark on one (tests/conftest.py puts them in
# xdist groups: module and session fixtures start one cluster), heaviest groups handed out first.
# The 25 slowest tests are listed at the end: where to look when the suite grows slower.
test: setup bytecode rewrite-cache compat-runner
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup --no-loadscope-reorder --durations=25

# Everything but the slow real-cluster tests, for a quick local loop.
test-fast: setup bytecode
	$(BIN)/python -m pytest -q -m 'not slow'

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: setup bytecode
	$(BIN)/python -m bench

# `make compat`: peers' own test suites against a local 3-node cluster on free ports, one table
# (bench/compat.py; bench/results/compat.json, which `make bench` adds to its report).
# compat-deps, as root on Debian bookworm (elsewhere what is missing is reported "not run"):
# librdkafka's source package (pinned) and its build dependencies through a deb-src entry, its
# test-runner built under build/compat/; a venv there with confluent-kafka (the version .venv
# has) and what its integration tests import, and those tests at the matching release tag
# (GitHub's tarball: the PyPI sdist ships no tests); kafka-python's tests at the .venv's version
# (GitHub's tarball: its sdist lacks test/service.py), run against an external broker.
COMPAT_DIR        := build/compat
LIBRDKAFKA_SOURCE := librdkafka=2.0.2-1
LIBRDKAFKA_DIR    := $(COMPAT_DIR)/librdkafka-2.0.2
CK_VENV           := $(COMPAT_DIR)/ck-venv
CK_TEST_PINS      := pytest==9.2.0 pytest-timeout==2.4.0 pytest-asyncio==1.5.0 trivup==0.12.2 \
                     async-timeout==5.0.1
DEB_SRC_LIST      := /etc/apt/sources.list.d/quorumlog-deb-src.sources
# librdkafka's test-runner alone: `make test` builds it too, so CI runs the quick selection of
# librdkafka's suite (tests/compat/test_librdkafka_suite.py; it skips where this could not build).
compat-runner:
	@mkdir -p $(COMPAT_DIR)
	@if [ ! -x $(LIBRDKAFKA_DIR)/tests/test-runner ]; then \
	  if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "note: librdkafka's suite needs root + apt-get to build; it will be reported not run"; \
	  else \
	    if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then \
	      printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > $(DEB_SRC_LIST); \
	    fi; \
	    apt-get update -qq && \
	    (cd $(COMPAT_DIR) && apt-get source -qq $(LIBRDKAFKA_SOURCE)) && \
	    DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq $(LIBRDKAFKA_SOURCE) && \
	    (cd $(LIBRDKAFKA_DIR) && ./configure >../build.log 2>&1 && \
	     $(MAKE) -j2 libs >>../build.log 2>&1 && $(MAKE) -j2 -C tests build >>../build.log 2>&1) || \
	      echo "note: building librdkafka's suite failed ($(COMPAT_DIR)/build.log)"; \
	  fi; \
	fi

compat-deps: setup compat-runner
	@version=$$($(BIN)/python -c 'import confluent_kafka; print(confluent_kafka.__version__)'); \
	[ -x $(CK_VENV)/bin/python ] || { $(PYTHON) -m venv $(CK_VENV) && \
	  $(CK_VENV)/bin/pip install --quiet "confluent-kafka[schemaregistry,avro,json,protobuf]==$$version" \
	    $(CK_TEST_PINS); }; \
	tree=$(COMPAT_DIR)/confluent-kafka-python-$$version; \
	[ -d $$tree/tests/integration ] || { mkdir -p $$tree && \
	  curl -fsSL https://github.com/confluentinc/confluent-kafka-python/archive/refs/tags/v$$version.tar.gz \
	    | tar xz -C $$tree --strip-components=1 || \
	  echo "note: could not fetch confluent-kafka-python v$$version's tests; reported not run"; }
	@version=$$($(BIN)/python -c 'import kafka; print(kafka.__version__)'); \
	tree=$(COMPAT_DIR)/kafka-python-$$version; \
	[ -d $$tree/test/integration ] || { mkdir -p $$tree && \
	  curl -fsSL https://github.com/dpkp/kafka-python/archive/refs/tags/$$version.tar.gz \
	    | tar xz -C $$tree --strip-components=1 || \
	  echo "note: could not fetch kafka-python $$version's tests; reported not run"; }

compat: compat-deps
	$(BIN)/python -m bench.compat

clean:
	rm -rf $(VENV) $(CK23_VENV) .pytest_cache .hypothesis
