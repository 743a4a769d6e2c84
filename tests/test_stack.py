"""One switch for the speed layer (agentsite/stack.py): AGENTSITE_STOCK_STACK=1 runs the libraries' plain
path, with agentsite/internals.py not even imported; without it every trick is on, as before. Checked in
fresh interpreters, as a server starts (the choice is made once, at import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings

from agentsite.stack import STOCK_STACK
from agentsite.websocket import CloseCodesDaphneSends
from tests.support.stack import daphne_socket

STARTED = (
    "import sys, json, asyncio, django; django.setup();"
    "import agentsite.asgi, agentsite.urls, agentsite.management.commands.serve, agentsite.db;"
    "import chat.consumers, agents.llm, rest_framework.compat;"
    "from django.conf import settings;"
    "from agentsite.eventqueue import EventQueue;"
    "import channels.db;"
    "client = agents.llm.OpenAIModelClient(base_url='http://127.0.0.1:9/v1', api_key='k', provider_name='p');"
    "print(json.dumps({"
    "'internals': 'agentsite.internals' in sys.modules,"
    "'setting': settings.AGENTSITE_STOCK_STACK,"
    "'http': type(agentsite.asgi.django_asgi_app).__name__,"
    "'socket': [c.__name__ for c in chat.consumers.ChatConsumer.__mro__[1:3]],"
    "'channels_db': agentsite.db.database_sync_to_async is channels.db.database_sync_to_async,"
    "'queue': EventQueue is asyncio.Queue,"
    "'sdk_path': client._stream_request is False,"
    "'requests_skipped': rest_framework.compat.requests is None,"
    "}))"
)


def _start(stock: str | None, script: str = STARTED) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "AGENTSITE_STOCK_STACK")
    }
    env.update(DJANGO_SETTINGS_MODULE="agentsite.settings", AGENTSITE_DATA_DIR=str(settings.DATA_DIR))
    if stock is not None:
        env["AGENTSITE_STOCK_STACK"] = stock
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )


def _started(stock: str | None) -> dict[str, Any]:
    done = _start(stock)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_by_default_every_trick_is_on() -> None:
    assert _started(None) == {
        "internals": True,
        "setting": False,
        "http": "OneHopASGIHandler",
        "socket": ["LeanWebsocketConsumer", "AsyncWebsocketConsumer"],
        "channels_db": False,
        "queue": False,
        "sdk_path": False,
        "requests_skipped": True,
    }


def test_the_stock_stack_runs_the_libraries_plain_path_without_importing_the_tricks() -> None:
    assert _started("1") == {
        "internals": False,
        "setting": True,
        "http": "ASGIHandler",
        "socket": ["StockWebsocketConsumer", "AsyncWebsocketConsumer"],
        "channels_db": True,
        "queue": True,
        "sdk_path": True,
        "requests_skipped": False,
    }
    assert _started("false")["internals"] is True


def test_a_value_that_is_not_a_boolean_stops_the_start() -> None:
    done = _start("maybe", "import agentsite")
    assert done.returncode != 0
    assert "AGENTSITE_STOCK_STACK='maybe' is not a boolean" in done.stderr


def test_this_run_reads_the_setting_it_started_with() -> None:
    assert settings.AGENTSITE_STOCK_STACK is STOCK_STACK


# -- the stock stack's `serve`: close codes daphne as it is can send ----------------------------------------


async def _closed_with(code: int, scope_type: str = "websocket") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "websocket.send", "text": "{}"})
        await send({"type": "websocket.close", "code": code})

    async def record(message: dict[str, Any]) -> None:
        sent.append(message)

    await CloseCodesDaphneSends(application)({"type": scope_type}, None, record)
    return sent


@pytest.mark.parametrize("code", [1009, 1011, 1012, 1013])
async def test_a_close_code_autobahn_refuses_from_an_application_goes_to_daphne_as_1000(code: int) -> None:
    sent = await _closed_with(code)
    assert sent == [{"type": "websocket.send", "text": "{}"}, {"type": "websocket.close", "code": 1000}]
    # and daphne's own socket sends it (the unwrapped code it refuses: the socket would stay open)
    protocol = daphne_socket()
    protocol.handle_reply(sent[1])
    assert protocol.transport.value() == b"\x88\x02\x03\xe8"  # a close frame, code 1000
    with pytest.raises(Exception, match="invalid close code"):
        daphne_socket().handle_reply({"type": "websocket.close", "code": code})


@pytest.mark.parametrize("code", [1000, 3000, 4401, 4999])
async def test_the_codes_autobahn_allows_go_to_daphne_as_they_are(code: int) -> None:
    assert (await _closed_with(code))[1] == {"type": "websocket.close", "code": code}


async def test_other_connections_pass_through_unchanged() -> None:
    assert (await _closed_with(1012, scope_type="http"))[1]["code"] == 1012


# -- the patched packages are pinned ----------------------------------------------------------------------


def test_every_package_a_trick_reaches_into_is_pinned_below_its_next_minor() -> None:
    """An upgrade of asgiref, Channels, daphne, autobahn, Django or openai is a decision (pyproject.toml): the
    installed version is allowed, and the next minor release is not until the tricks are checked again."""
    import tomllib
    from importlib.metadata import version
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    from agentsite.private_names import PRIVATE_NAMES

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    pins = {canonicalize_name(r.name): r for r in map(Requirement, pyproject["project"]["dependencies"])}
    problems = []
    for package in sorted({entry.package for entry in PRIVATE_NAMES}):
        pin = pins.get(canonicalize_name(package))
        installed = Version(version(package))
        next_minor = Version(f"{installed.major}.{installed.minor + 1}")
        if pin is None:
            problems.append(f"{package} is not in pyproject.toml's dependencies")
        elif installed not in pin.specifier:
            problems.append(f"{package} {installed} is installed, but pyproject.toml asks for {pin}")
        elif pin.specifier.contains(next_minor, prereleases=True) or not any(
            spec.operator == "<" for spec in pin.specifier
        ):
            problems.append(f"{pin} lets {package} {next_minor} in: give it an upper bound (<{next_minor})")
    assert problems == []
