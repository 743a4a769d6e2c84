"""An owner process frozen mid-turn past its lease, then woken after another process took the session over,
changes nothing (docs/architecture.md "Processes": every write of the live core goes through the fence).

Two real `manage.py serve` processes on Postgres + Redis (marker `scaled`, run by `make test-services`). A
streams a slow answer (its partial text is already stored), is frozen with SIGSTOP, B takes the session over
(the turn ends `interrupted`), A is woken with SIGCONT while its model keeps streaming to it. Afterwards the
session's rows in the database, its replay stream in Redis and B's sockets are exactly as B left them: no new
message row, no changed status, no partial text, no usage, no event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from typing import Any

import httpx
import psycopg
import pytest
import redis
import websockets

from agentsite.dev.fake_llm import Reply, script_remote
from tests.e2e.test_scale import scaled, until, ws_url  # noqa: F401 (a fixture)
from tests.support.server import RunningServer, serve

pytestmark = [pytest.mark.scaled, pytest.mark.timeout(180)]

WITHIN = 20
# ~16 s of streaming: it goes on well past the freeze, the takeover and the wake-up.
SLOW = Reply(text=" ".join(f"word{n}" for n in range(80)), chunks=80, chunk_delay=0.2)


def _rows(database_url: str, session_id: str) -> dict[str, Any]:
    """Everything stored about the session: its row, its messages (every column), its user's usage."""
    with psycopg.connect(database_url.replace("postgres://", "postgresql://", 1)) as conn:
        session = conn.execute("SELECT * FROM chat_session WHERE id = %s", [session_id]).fetchall()
        messages = conn.execute(
            "SELECT * FROM chat_message WHERE session_id = %s ORDER BY id", [session_id]
        ).fetchall()
        usage = conn.execute("SELECT * FROM chat_usage ORDER BY id").fetchall()
    return {"session": session, "messages": messages, "usage": usage}


def _messages(database_url: str, session_id: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(database_url.replace("postgres://", "postgresql://", 1)) as conn:
        return conn.execute(
            "SELECT role, status, content FROM chat_message WHERE session_id = %s ORDER BY id", [session_id]
        ).fetchall()


def _statuses_with_text(database_url: str, session_id: str) -> list[tuple[str, str]]:
    return [(role, status) for role, status, text in _messages(database_url, session_id) if text]


def _stream(session_id: str) -> list[Any]:
    """The session's replay stream in Redis (its key carries the deployment's prefix)."""
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        keys = list(client.scan_iter(match=f"agentsite:*:events:{session_id}"))
        assert len(keys) == 1, keys
        return list(client.xrange(keys[0]))
    finally:
        client.close()


async def _taken_over(b: RunningServer, session_id: str, key: str) -> None:
    """B owns the session once A's lease expired: a socket on B sees it paused (the turn `interrupted`)."""
    async with asyncio.timeout(WITHIN):
        while True:
            try:
                async with websockets.connect(ws_url(b, session_id, key)) as probe:
                    first = json.loads(await probe.recv())
                    if first.get("type") == "connected" and first["snapshot"]["paused"]:
                        return
            except (OSError, websockets.WebSocketException):
                pass
            await asyncio.sleep(0.3)


async def test_a_frozen_owner_woken_after_a_takeover_writes_and_publishes_nothing(scaled):  # noqa: F811
    env, key, llm = scaled
    database_url = env.env["DATABASE_URL"]
    session_id = f"frozen-{uuid.uuid4().hex[:8]}"
    script_remote(llm, default=Reply(text="warm"))
    with serve(env, kill=True) as a, serve(env, kill=True) as b:
        try:
            async with httpx.AsyncClient(
                base_url=a.base_url, headers={"Authorization": f"Bearer {key}"}
            ) as http:
                for sid in (f"warm-{session_id}", session_id):
                    created = await http.post("/api/v1/chat/sessions", json={"session_id": sid})
                    assert created.status_code in (200, 201), created.text
            # A's first turn loads and connects what turns need (the model client, ...): on a busy machine
            # that can hold its event loop past a lease of 1.5 s, which must not happen in the turn tested.
            # (It may cost A that session's lease: then it is closed 1012, which is all the same here.)
            async with websockets.connect(ws_url(a, f"warm-{session_id}", key)) as warm:
                assert json.loads(await warm.recv())["type"] == "connected"
                await warm.send(json.dumps({"type": "message", "content": "warm up"}))
                with contextlib.suppress(websockets.ConnectionClosed):
                    await until(warm, "result")
            script_remote(llm, SLOW)
            async with websockets.connect(ws_url(a, session_id, key)) as on_a:
                assert json.loads(await on_a.recv())["type"] == "connected"  # A owns the session
                await on_a.send(json.dumps({"type": "message", "message_id": "A", "content": "A"}))
                await until(on_a, "delta")
                async with asyncio.timeout(WITHIN):  # A has stored some of the answer as it streams
                    while ("assistant", "streaming") not in _statuses_with_text(database_url, session_id):
                        await asyncio.sleep(0.2)
                os.killpg(a.process.pid, signal.SIGSTOP)
                try:
                    await _taken_over(b, session_id, key)
                    after_takeover = _rows(database_url, session_id)
                    stored = [(m[0], m[1]) for m in _messages(database_url, session_id)]
                    assert stored == [("user", "interrupted"), ("assistant", "interrupted")], stored
                    stream = _stream(session_id)
                    async with websockets.connect(ws_url(b, session_id, key)) as on_b:
                        assert json.loads(await on_b.recv())["type"] == "connected"
                        os.killpg(a.process.pid, signal.SIGCONT)  # A wakes up; its model's words arrive
                        woken = time.monotonic()
                        leaked = []
                        # A learns within a lease that it lost the session; B's socket hears nothing of A
                        while time.monotonic() - woken < 6:
                            try:
                                leaked.append(json.loads(await asyncio.wait_for(on_b.recv(), 0.5)))
                            except TimeoutError:
                                pass
                finally:
                    os.killpg(a.process.pid, signal.SIGCONT)
            assert leaked == [], "the old owner published after losing the session"
            assert _stream(session_id) == stream, "the old owner added events to the replay stream"
            assert _rows(database_url, session_id) == after_takeover, (
                "the old owner changed the stored session"
            )
            assert a.process.poll() is None, "the old owner must go on serving"
            assert "Traceback" not in a.log(), a.log()[-4000:]
        except BaseException:
            print(f"--- A ({a.port}) ---\n{a.log()[-6000:]}\n--- B ({b.port}) ---\n{b.log()[-6000:]}")
            raise
