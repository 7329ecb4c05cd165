VENV ?= .venv
PY := $(VENV)/bin/python
DB ?= net.db

.PHONY: help install serve test test-slow test-all interop bench fuzz soak chaos check lint clean

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-9s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed  ## create .venv with ziti-lite and test tools

serve: install  ## start a controller on $(DB)
	$(VENV)/bin/ziti-lite serve --db $(DB)

# the tests run with bytecode caching on even where the environment turns it off: compiling and
# assertion-rewriting every test module again on each run costs ~5 s
test: install  ## the fast tests: all but the slow (servers, TLS, SDKs, oracles) and interop ones
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n auto -m "not slow and not interop"

# the servers of the tests run on uvloop (serve's default); the TLS, connection and edge tests
# run once more on asyncio's loop, which stays supported (serve --loop asyncio)
LOOP_TESTS := tests/test_connections.py tests/test_server.py tests/test_tls.py tests/edge tests/enroll/test_live_tls.py

test-slow: install  ## the slow tests only (test + test-slow = test-all: what CI runs), TLS ones also on asyncio's loop
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -m "slow and not interop"
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n auto -m "not interop" --loop asyncio $(LOOP_TESTS)

test-all: install  ## every test but the interop ones, in one session
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -m "not interop"

interop: install  ## interop with real SDKs, the ziti CLI and litestream built here (needs go and the Go module proxy), and the console
	$(VENV)/bin/pip install -q playwright   # its Python API drives Debian's chromium (tests/interop/test_zac45.py)
	$(PY) -m pytest -m interop -q

bench: install  ## benchmarks: one table (vs bare stack, logins, router, OpenZiti), then policy, client API, real routers, the router data model, scale, fabric, events, permission check, backups (recovery point and time, snapshot cost)
	$(PY) benchmarks/table.py
	$(PY) benchmarks/policy_bench.py
	$(PY) benchmarks/client_bench.py
	$(PY) benchmarks/router_bench.py
	$(PY) benchmarks/datamodel_bench.py
	$(PY) benchmarks/datamodel_bench.py --identities 100000
	$(PY) benchmarks/scale_bench.py
	$(PY) benchmarks/fabric_bench.py
	$(PY) benchmarks/events_bench.py
	$(PY) benchmarks/permissions_bench.py
	$(PY) benchmarks/backup_bench.py

fuzz: install  ## schemathesis against the served spec
	$(VENV)/bin/pip install -q schemathesis
	$(PY) benchmarks/fuzz.py

soak: install  ## long-running mixed load
	$(PY) benchmarks/soak.py

chaos: install  ## hostile-network figures: idle sockets, login flood, kill -9, snapshot under writes, shutdown
	$(PY) benchmarks/chaos.py

$(VENV)/.check-installed: $(VENV)/.installed pyproject.toml
	$(VENV)/bin/pip install -q -e '.[test,check]'
	touch $@

check: $(VENV)/.check-installed  ## ruff check . and mypy (configured in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

lint: check  ## the same as check

clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
