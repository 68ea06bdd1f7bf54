# Targets match the README's quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# A second, tiny venv with an old librdkafka (confluent-kafka 2.3.0 bundles librdkafka 2.3.0)
# for tests/broker/test_old_librdkafka.py; it skips where this venv is missing.
CK23_VENV  ?= .venv-ck23
CK23_STAMP := $(CK23_VENV)/.installed

.PHONY: setup system-deps old-librdkafka demo test test-fast lint format bench clean

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

# The main job: the end-to-end showcase.
demo: setup
	$(BIN)/quorumlog demo

# The whole suite, slow real-cluster tests included (this is what CI runs), on two pytest-xdist
# workers: most real-cluster tests wait on processes and sockets, so two share 2 cores well.
# A file's tests stay on one worker (--dist loadfile: module fixtures start one cluster).
test: setup
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# Everything but the slow real-cluster tests, for a quick local loop.
test-fast: setup
	$(BIN)/python -m pytest -q -m 'not slow'

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: setup
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(CK23_VENV) .pytest_cache .hypothesis
