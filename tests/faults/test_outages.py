"""Redis and Postgres going away under two running server processes, and coming back (issue 14, item 4).

Each test owns the service it breaks (tests/faults/instances.py: own port, own data dir). What must hold:
every request answers (stored, 503, or a clear error) — never a 500 page or a hang; every streaming socket
is told (`error unavailable` + close 1012) within a few seconds; nothing acknowledged is lost; service
resumes without restarting the servers; a server started without Redis says so in one sentence.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
import websockets

from agentsite.dev.fake_llm import Reply, script_remote
from tests.faults.instances import postgres_instance, redis_instance
from tests.support.server import ROOT, RunningServer, ServerEnv, free_port, serve, server_env

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

TOLD_WITHIN = 10  # seconds a streaming socket may take to learn that its session cannot go on
SLOW = Reply(text=" ".join(f"w{n}" for n in range(60)), chunks=60, chunk_delay=0.15)  # ~9 s of streaming


def shared_postgres() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.fail("the fault tests run in `make test-services`, with DATABASE_URL=postgres://…")
    return url


def model_env(llm: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": llm, "OPENAI_API_KEY": "sk-fake", "AGENTSITE_DEFAULT_MODEL": "fake-model"}


def socket_url(server: RunningServer, session_id: str, key: str, since: int | None = None) -> str:
    url = f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
    return url if since is None else f"{url}&since={since}"


async def frames_until(ws: Any, stop: Any, within: float = 20) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    async with asyncio.timeout(within):
        while True:
            frame = json.loads(await ws.recv())
            frames.append(frame)
            if stop(frame):
                return frames


async def told_unavailable(ws: Any) -> tuple[dict[str, Any] | None, int | None]:
    """Read until the socket closes; the last error frame and the close code."""
    error = None
    started = time.monotonic()
    seen = []
    try:
        async with asyncio.timeout(TOLD_WITHIN):
            while True:
                frame = json.loads(await ws.recv())
                seen.append(frame)
                if frame["type"] == "error":
                    error = frame
    except websockets.ConnectionClosed:
        pass
    except TimeoutError:
        raise AssertionError(f"not told within {TOLD_WITHIN} s; the last frames: {seen[-3:]}") from None
    assert time.monotonic() - started < TOLD_WITHIN
    return error, ws.close_code


async def answers(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """A request during an outage: answered within seconds, with the API's shape (never an HTML 500)."""
    started = time.monotonic()
    response = await http.request(method, path, **kwargs)
    assert time.monotonic() - started < 12, f"{method} {path} took {time.monotonic() - started:.1f} s"
    assert response.status_code < 500 or response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text[:200]
    return response


async def until_ok(http: httpx.AsyncClient, path: str, within: float = 30) -> httpx.Response:
    deadline = time.monotonic() + within
    while True:
        try:
            response = await http.get(path)
            if response.status_code == 200:
                return response
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{path} did not come back"
        await asyncio.sleep(0.3)


async def status_of(
    http: httpx.AsyncClient, session_id: str, message_id: str, *, until_not: str, within: float = 15
) -> str:
    """A message's stored status once it is no longer `until_not` (or the last one seen, at the deadline)."""
    deadline = time.monotonic() + within
    while True:
        history = (await http.get(f"/api/v1/chat/sessions/{session_id}/messages")).json()["results"]
        status = next(m for m in history if m["message_id"] == message_id)["status"]
        if status != until_not or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.2)


async def open_session(server: RunningServer, key: str) -> str:
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        return str((await http.post("/api/v1/chat/sessions", json={})).json()["session_id"])


async def stream_on_both(a: RunningServer, b: RunningServer, session_id: str, key: str) -> tuple[Any, Any]:
    """A turn streaming on A (the owner), watched by a socket on A and one on B."""
    on_a = await websockets.connect(socket_url(a, session_id, key))
    assert json.loads(await on_a.recv())["type"] == "connected"  # A takes the session: it is nobody's yet
    on_b = await websockets.connect(socket_url(b, session_id, key))
    first = json.loads(await on_b.recv())
    assert first["type"] == "connected", first
    await on_a.send(json.dumps({"type": "message", "content": "stream", "message_id": "first"}))
    for ws in (on_a, on_b):
        await frames_until(ws, lambda f: f["type"] == "delta" and f["seq"] >= 5)
    return on_a, on_b


def two_servers(stack: ExitStack, env: ServerEnv) -> tuple[RunningServer, RunningServer]:
    return stack.enter_context(serve(env, kill=True)), stack.enter_context(serve(env, kill=True))


async def test_redis_going_away_mid_stream_loses_nothing_acknowledged(tmp_path, fake_llm_process) -> None:
    llm = fake_llm_process.base_url
    with redis_instance() as redis, ExitStack() as stack:
        env = stack.enter_context(
            server_env(
                tmp_path,
                database_url=shared_postgres(),
                REDIS_URL=redis.url,
                AGENTSITE_SESSION_LEASE_SECONDS="1.5",
                **model_env(llm),
            )
        )
        key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
        a, b = two_servers(stack, env)
        session_id = await open_session(a, key)
        script_remote(llm, SLOW)
        on_a, on_b = await stream_on_both(a, b, session_id, key)

        redis.kill()
        for ws in (on_a, on_b):
            error, code = await told_unavailable(ws)
            assert code == 1012 and error is not None and error["data"]["code"] == "unavailable"

        acknowledged = []
        headers = {"Authorization": f"Bearer {key}"}
        for server in (a, b):
            async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=15) as http:
                assert (await http.get("/healthz")).status_code == 503
                for n in range(2):
                    message_id = f"during-{server.port}-{n}"
                    body = {"content": f"sent while Redis is away ({n})", "message_id": message_id}
                    posted = await answers(
                        http, "POST", f"/api/v1/chat/sessions/{session_id}/messages", json=body
                    )
                    if posted.status_code == 202:
                        acknowledged.append(message_id)
                    else:
                        assert posted.json()["error"]["code"] in {"owner_unavailable", "unavailable"}
                await answers(http, "GET", f"/api/v1/chat/sessions/{session_id}")

        redis.start()
        async with httpx.AsyncClient(base_url=b.base_url, headers=headers, timeout=15) as http:
            await until_ok(http, "/healthz")
            snapshot: dict[str, Any] = {}
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # the session gets an owner again (watchdog or this request)
                response = await http.get(f"/api/v1/chat/sessions/{session_id}")
                if response.status_code == 200:
                    snapshot = response.json()["snapshot"]
                    if not snapshot["running"]:
                        break
                await asyncio.sleep(0.3)
            pending = [item["message_id"] for item in snapshot["pending"]]
            assert set(acknowledged) <= set(pending), (acknowledged, snapshot)
            assert snapshot["paused"] is True  # the interrupted turn paused the queue, as a restart does
            history = (await http.get(f"/api/v1/chat/sessions/{session_id}/messages")).json()["results"]
            first = next(m for m in history if m["message_id"] == "first")
            assert first["status"] == "interrupted"
        async with websockets.connect(socket_url(b, session_id, key)) as ws:
            assert json.loads(await ws.recv())["type"] == "connected"
            if acknowledged:
                script_remote(llm, Reply(text="back"))
                await ws.send(json.dumps({"type": "steer", "message_id": pending[0]}))  # "send now"
                result = (await frames_until(ws, lambda f: f["type"] == "result"))[-1]
                assert result["data"]["status"] == "completed" and result["message_id"] == pending[0]
        for server in (a, b):
            assert server.process.poll() is None, "no server needed a restart"


def test_a_server_started_without_redis_says_so_in_one_sentence(tmp_path) -> None:
    with server_env(
        tmp_path, database_url=shared_postgres(), REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"
    ) as env:
        done = subprocess.run(
            [sys.executable, "manage.py", "serve", "--port", str(free_port())],
            cwd=ROOT,
            env=env.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "REDIS_URL" in output and "Traceback" not in output, output


async def test_postgres_going_away_answers_503_tells_sockets_and_comes_back(
    tmp_path, fake_llm_process
) -> None:
    llm = fake_llm_process.base_url
    redis_url = os.environ.get("REDIS_URL") or pytest.fail("the fault tests need REDIS_URL")
    with postgres_instance() as postgres, ExitStack() as stack:
        env = stack.enter_context(
            server_env(
                tmp_path,
                database_url=postgres.url,
                REDIS_URL=redis_url,
                AGENTSITE_SESSION_LEASE_SECONDS="1.5",
                **model_env(llm),
            )
        )
        key = env.manage("create_api_key", "--user", f"alice-{uuid.uuid4().hex[:6]}", "--create-user").strip()
        a, b = two_servers(stack, env)
        session_id = await open_session(a, key)
        script_remote(llm, SLOW)
        on_a, on_b = await stream_on_both(a, b, session_id, key)

        postgres.stop()
        for ws in (on_a, on_b):
            error, code = await told_unavailable(ws)
            assert code == 1012 and error is not None and error["data"]["code"] == "unavailable"
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=b.base_url, headers=headers, timeout=20) as http:
            assert (await http.get("/healthz")).status_code == 503
            listed = await answers(http, "GET", "/api/v1/chat/sessions")
            assert listed.status_code == 503 and listed.json()["error"]["code"] == "unavailable"
            posted = await answers(
                http, "POST", f"/api/v1/chat/sessions/{session_id}/messages", json={"content": "x"}
            )
            assert posted.status_code == 503
        async with websockets.connect(socket_url(b, session_id, key)) as ws:  # a new handshake is answered
            error, code = await told_unavailable(ws)
            assert code == 1012 and error is not None and error["data"]["code"] == "unavailable"

        postgres.start()
        async with httpx.AsyncClient(base_url=a.base_url, headers=headers, timeout=20) as http:
            await until_ok(http, "/healthz")
            await until_ok(http, "/api/v1/chat/sessions")
            # The turn's live state went with the failed write; a watchdog takes the ownerless session
            # over once the database answers (every half lease) and ends the turn `interrupted`.
            assert await status_of(http, session_id, "first", until_not="running") in {"interrupted", "error"}
        fresh = await open_session(b, key)
        async with websockets.connect(socket_url(b, fresh, key)) as ws:
            first = json.loads(await ws.recv())
            assert first["type"] == "connected", first
            script_remote(llm, Reply(text="back again"))
            await ws.send(json.dumps({"type": "message", "content": "are you there?"}))
            result = (await frames_until(ws, lambda f: f["type"] == "result"))[-1]
            assert result["data"]["status"] == "completed"
        for server in (a, b):
            assert server.process.poll() is None, "no server needed a restart"
