"""A server process does not load the SDKs that only some chats need: the openai SDK (~38 MB) when a real
provider is first called, the MCP SDK with jsonschema (~29 MB) when an MCP server is first used
(agents/llm.py, mcpservers/tools.py); nor what libraries import only if it is installed and agentsite never
uses (agentsite/lean_imports.py). Checked in a fresh interpreter, as a server starts."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings

from agentsite.lean_imports import UNUSED_OPTIONAL_IMPORTS
from agentsite.stack import STOCK_STACK
from tests.support.stack import speed_layer_only

LAZY = (
    "openai",
    "mcp",
    "mcp_types",
    "jsonschema",
    "httpx2",
    "uvicorn",
    "starlette",
    "requests",
    "click",
    "psycopg",
)


def test_the_application_starts_without_the_sdks_some_chats_need() -> None:
    lazy = LAZY
    if STOCK_STACK:  # optional imports as the libraries make them (agentsite/stack.py)
        lazy = tuple(m for m in LAZY if not any(m in names for _, names in UNUSED_OPTIONAL_IMPORTS))
    script = (
        "import sys, django; django.setup();"
        "import agentsite.asgi, agentsite.urls, agentsite.management.commands.serve;"
        f"print(','.join(m for m in {lazy!r} if m in sys.modules))"
    )
    done = _fresh_interpreter(script)
    assert done.stdout.strip() == "", f"loaded at start: {done.stdout.strip()}"


def _fresh_interpreter(script: str) -> subprocess.CompletedProcess[str]:
    """Run `script` as a server on SQLite would start (on Postgres its backend loads psycopg, as it must)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="agentsite.settings", AGENTSITE_DATA_DIR=str(settings.DATA_DIR))
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


@speed_layer_only
def test_the_skipped_optional_packages_still_import_for_whoever_needs_them() -> None:
    script = (
        "import sys, django; django.setup(); import agentsite.asgi;"
        "import rest_framework.compat, autobahn.util;"
        "assert rest_framework.compat.requests is None and not autobahn.util._HAS_CLICK;"
        "assert rest_framework.compat.postgres_fields is None;"
        "import requests, click, psycopg; print(requests.__name__, click.__name__, psycopg.__name__)"
    )
    done = _fresh_interpreter(script)
    assert done.stdout.split() == ["requests", "click", "psycopg"]
