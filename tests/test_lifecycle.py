"""Starting a server process under any ASGI server (agentsite/lifecycle.py): the lifespan protocol, and a
loud warning where a server never sends it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agentsite import lifecycle
from agentsite.asgi import application
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


async def lifespan(messages: list[str]) -> list[dict[str, Any]]:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for kind in messages:
        inbox.put_nowait({"type": f"lifespan.{kind}"})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await application({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)
    return sent


async def test_lifespan_startup_ends_interrupted_turns_before_serving_and_shutdown_stops(
    settings: Any,
) -> None:
    from asgiref.sync import sync_to_async

    from chat.models import Message

    settings.AGENTSITE_EMBEDDED_SCHEDULER = False
    alice = await sync_to_async(factories.user)("alice")
    session = await sync_to_async(factories.session)(alice)
    await sync_to_async(Message.objects.create)(
        session=session, message_id="m1", role="user", content="hi", status="running"
    )
    sent = await lifespan(["startup", "shutdown"])
    assert [message["type"] for message in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    status = await sync_to_async(lambda: Message.objects.get(message_id="m1").status)()
    assert status == "interrupted"
    assert lifecycle.server_process.started is False


async def test_a_failing_start_is_reported_to_the_server(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise RuntimeError("no sandbox here")

    monkeypatch.setattr(lifecycle.server_process, "prepare", broken)
    sent = await lifespan(["startup"])
    assert sent == [{"type": "lifespan.startup.failed", "message": "no sandbox here"}]


async def get(path: str) -> int:
    """One request straight through the ASGI application, as a server would send it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 5000),
        "server": ("localhost", 80),
    }
    sent: list[dict[str, Any]] = []
    messages = iter([{"type": "http.request", "body": b"", "more_body": False}])
    disconnected = asyncio.Event()

    async def receive() -> dict[str, Any]:
        message = next(messages, None)
        if message is None:  # after the body: the client waits, then goes
            await disconnected.wait()
            return {"type": "http.disconnect"}
        return message

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await application(scope, receive, send)
    disconnected.set()
    return int(next(m["status"] for m in sent if m["type"] == "http.response.start"))


async def test_without_lifespan_the_first_request_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(application, lifecycle.Lifecycle)
    monkeypatch.setattr(application, "_warned", False)
    monkeypatch.setattr(lifecycle.server_process, "started", False)
    with caplog.at_level(logging.WARNING, logger="agentsite.serve"):
        assert await get("/api/v1/version") == 200
        assert await get("/api/v1/version") == 200
    warnings = [r.getMessage() for r in caplog.records if "without lifespan support" in r.getMessage()]
    assert len(warnings) == 1 and "manage.py runscheduler" in warnings[0]


async def test_a_started_process_does_not_warn(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(application, "_warned", False)
    monkeypatch.setattr(lifecycle.server_process, "started", True)
    with caplog.at_level(logging.WARNING, logger="agentsite.serve"):
        assert await get("/api/v1/version") == 200
    assert not [r for r in caplog.records if "without lifespan support" in r.getMessage()]
