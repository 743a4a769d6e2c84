# agentsite: `make run` serves the portal on http://127.0.0.1:8000, `make test` runs the whole suite.
# Both set everything up first: a .venv made with a Python >= 3.12 found here (PYTHON=..., python3.13,
# python3.12, pyenv's versions, python3), the project installed into it, the database migrated.

SHELL := /bin/bash
VENV := .venv
VPY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/test
SERVICES_REDIS_URL ?= redis://127.0.0.1:6379/0
SOAK_POSTGRES ?= postgres://postgres@127.0.0.1:5432/postgres

.PHONY: run test test-services test-stock setup lint bench soak clean

define find_python
for candidate in "$$PYTHON" python3.13 python3.12 \
    $$(ls -d "$$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)"/versions/3.1[3-9]*/bin/python 2>/dev/null | sort -rV) \
    $$(ls -d "$$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)"/versions/3.12*/bin/python 2>/dev/null | sort -rV) \
    python3 python; do \
  [ -n "$$candidate" ] || continue; \
  if command -v "$$candidate" >/dev/null 2>&1 && "$$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
    command -v "$$candidate"; exit 0; \
  fi; \
done; exit 1
endef

$(VPY):
	@py=$$( $(find_python) ) || { \
	  echo "agentsite needs Python 3.12 or newer (Django 6), and none was found." >&2; \
	  echo "Install one, e.g. 'pyenv install 3.13' or your system's python3.13 package (with venv)," >&2; \
	  echo "or point PYTHON at it: make run PYTHON=/path/to/python3.13" >&2; exit 1; }; \
	echo "Creating $(VENV) with $$py ($$($$py --version))"; \
	"$$py" -m venv $(VENV)

$(VENV)/.installed: $(VPY) pyproject.toml
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[test]'
	@touch $@

setup: $(VENV)/.installed
	@mkdir -p var
	@command -v bwrap >/dev/null 2>&1 || echo "Note: bubblewrap (bwrap) is not installed: tools' commands cannot be sandboxed" \
	  "(only superusers may run them). Install it: apt-get install bubblewrap (docs/deployment.md)." >&2

run: setup
	DEBUG=$${DEBUG:-true} $(VPY) manage.py migrate --noinput
	DEBUG=$${DEBUG:-true} $(VPY) manage.py serve --host $(HOST) --port $(PORT)

# The whole suite on SQLite + the in-memory layer, then the service-backed tests on Postgres + Redis, then
# the socket, queue and turn tests again on the stock stack.
test: setup
	$(VPY) -m pytest
	$(MAKE) --no-print-directory test-services
	$(MAKE) --no-print-directory test-stock

# WebSocket, queue and multi-process tests again on Postgres + channels-redis, when they answer.
# With AGENTSITE_REQUIRE_SERVICES=1 (CI) an unreachable service is a failure, not a skip.
test-services: setup
	@if $(VPY) -m tests.support.services "$(POSTGRES_URL)" "$(SERVICES_REDIS_URL)"; then \
	  DATABASE_URL="$(POSTGRES_URL)" REDIS_URL="$(SERVICES_REDIS_URL)" $(VPY) -m pytest -m "services_rerun or scaled or faults"; \
	elif [ "$${AGENTSITE_REQUIRE_SERVICES:-0}" = "1" ]; then \
	  echo "AGENTSITE_REQUIRE_SERVICES=1 but Postgres/Redis do not answer" >&2; exit 1; \
	else \
	  echo "Postgres/Redis not reachable: skipping the service-backed test run"; \
	fi

# The socket, queue and turn tests with the speed layer off (AGENTSITE_STOCK_STACK=1, agentsite/stack.py):
# Django's, Channels' and openai's plain path (the tests of a trick itself skip); the core ones also on
# Postgres + channels-redis when they answer. A real server on the stock stack: tests/e2e/test_stock_stack.py.
STOCK_TESTS := tests/chat/test_consumer.py tests/chat/test_queue_ws.py tests/chat/test_controller.py \
  tests/agents/test_turn.py tests/chat/test_confirmations_ws.py tests/chat/test_queue_rest.py \
  tests/chat/test_takeover.py tests/chat/test_create_on_connect.py tests/chat/test_account_ended_work.py \
  tests/chat/test_events.py tests/agents/test_llm.py tests/test_ws_tickets.py tests/test_one_hop.py \
  tests/chat/test_user_limits.py tests/chat/test_since.py tests/test_db.py tests/test_stack.py
STOCK_SERVICE_TESTS := tests/chat/test_consumer.py tests/chat/test_queue_ws.py tests/chat/test_controller.py \
  tests/agents/test_turn.py
test-stock: setup
	AGENTSITE_STOCK_STACK=1 $(VPY) -m pytest $(STOCK_TESTS)
	@if $(VPY) -m tests.support.services "$(POSTGRES_URL)" "$(SERVICES_REDIS_URL)"; then \
	  AGENTSITE_STOCK_STACK=1 DATABASE_URL="$(POSTGRES_URL)" REDIS_URL="$(SERVICES_REDIS_URL)" \
	    $(VPY) -m pytest -m "services_rerun" $(STOCK_SERVICE_TESTS); \
	elif [ "$${AGENTSITE_REQUIRE_SERVICES:-0}" = "1" ]; then \
	  echo "AGENTSITE_REQUIRE_SERVICES=1 but Postgres/Redis do not answer" >&2; exit 1; \
	else \
	  echo "Postgres/Redis not reachable: skipping the stock stack's service-backed run"; \
	fi

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PYTHONPATH=. DEBUG=true AGENTSITE_DATA_DIR=var/mypy $(VENV)/bin/mypy agentsite security audit accounts chat agents acp mcpservers cron portal

$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(VPY) -m pip install --quiet -e '.[test,bench]'
	@touch $@

# The socket path (ws_load.py), then the provider path against the floor (provider_load.py, issue 18);
# both always run, and the exit status says whether every target of both was met.
bench: setup $(VENV)/.bench-installed
	@status=0; $(VPY) bench/ws_load.py || status=1; $(VPY) bench/provider_load.py || status=1; exit $$status

# Two servers on Postgres + a Redis of its own under faults, ~10 min (bench/README.md "Soak"). Not in `make test`.
SOAK_ARGS ?=
soak: setup
	$(VPY) bench/soak.py --postgres "$(SOAK_POSTGRES)" $(SOAK_ARGS)

clean:
	rm -rf $(VENV) var/test
