"""A user's open sockets and SSE streams on real servers (docs/protocol.md §6.6; issue 24, finding 4).

What was found: one key opened 20,000 sockets, the server hit its open-file limit, and `/healthz` and
`/login/` timed out for everyone. Now sockets and SSE streams together count against
AGENTSITE_USER_MAX_SOCKETS (3 here; 50 by default: tests/chat/test_user_limits.py opens 51): the next socket
gets `error too_many_sockets` and close 4429, the next stream 429. The `scaled` test counts them across two
processes on one Postgres and one Redis, and a killed process's sockets stop counting once they expire.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest
import websockets

from chat.live.cluster.slots import SLOT_SECONDS
from tests.support.server import RunningServer, ServerEnv, serve, server_env

pytestmark = pytest.mark.services_rerun

LIMIT = "3"
WITHIN = 10


def new_session(server: RunningServer, key: str) -> str:
    response = httpx.post(
        f"{server.base_url}/api/v1/chat/sessions", json={}, headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 200, response.text
    return str(response.json()["session_id"])


@asynccontextmanager
async def socket(server: RunningServer, session_id: str, key: str) -> AsyncIterator[Any]:
    """An open socket that said `connected`."""
    url = f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
    async with websockets.connect(url, open_timeout=WITHIN) as ws:
        first = json.loads(await asyncio.wait_for(ws.recv(), WITHIN))
        assert first["type"] == "connected", first
        yield ws


async def refused(server: RunningServer, session_id: str, key: str) -> tuple[dict[str, Any], int | None]:
    url = f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
    async with websockets.connect(url, open_timeout=WITHIN) as ws:
        frame = json.loads(await asyncio.wait_for(ws.recv(), WITHIN))
        try:
            await asyncio.wait_for(ws.recv(), WITHIN)
        except websockets.ConnectionClosed as closed:
            return frame, closed.rcvd.code if closed.rcvd else None
    return frame, None


async def assert_too_many(server: RunningServer, session_id: str, key: str) -> None:
    frame, code = await refused(server, session_id, key)
    assert frame["type"] == "error" and frame["data"]["code"] == "too_many_sockets", frame
    assert "AGENTSITE_USER_MAX_SOCKETS" in frame["data"]["message"] and code == 4429


async def opens_within(server: RunningServer, session_id: str, key: str, seconds: float) -> None:
    """A socket opens once a slot is back (given back in the background, or expired)."""
    deadline = time.monotonic() + seconds
    while True:
        url = f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
        async with websockets.connect(url, open_timeout=WITHIN) as ws:
            if json.loads(await asyncio.wait_for(ws.recv(), WITHIN))["type"] == "connected":
                return
        assert time.monotonic() < deadline, "no slot came back"
        await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, str, str]]:
    with server_env(tmp_path_factory.mktemp("limits"), AGENTSITE_USER_MAX_SOCKETS=LIMIT) as env:
        keys = [env.manage("create_api_key", "--user", name, "--create-user").strip() for name in ("a", "b")]
        with serve(env) as server:
            yield server, keys[0], keys[1]


async def test_sockets_and_sse_streams_count_together_and_a_closed_one_gives_its_place_back(site) -> None:
    server, key, other = site
    session_id = new_session(server, key)
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    events = f"{server.base_url}/api/v1/chat/sessions/{session_id}/events"
    async with httpx.AsyncClient(timeout=WITHIN) as http, AsyncExitStack() as open_ones:
        await open_ones.enter_async_context(socket(server, session_id, key))
        await open_ones.enter_async_context(socket(server, session_id, key))
        async with http.stream("GET", events, headers=headers) as stream:
            assert stream.status_code == 200
            await assert_too_many(server, session_id, key)
            too_many = await http.get(events, headers=headers)
            assert too_many.status_code == 429, too_many.text
            assert too_many.json()["error"]["code"] == "too_many_sockets"
            async with socket(server, new_session(server, other), other):
                pass  # another user's are not hers
        await opens_within(server, session_id, key, 5)  # the stream closed: its place is free again
        await open_ones.enter_async_context(socket(server, session_id, key))
        await assert_too_many(server, session_id, key)
    assert httpx.get(f"{server.base_url}/healthz").status_code == 200


# --- two processes sharing Postgres and Redis -------------------------------------------------------------


@pytest.fixture
def two_servers(tmp_path) -> Iterator[tuple[ServerEnv, list[RunningServer]]]:
    if not os.environ.get("DATABASE_URL", "").startswith(
        ("postgres://", "postgresql://")
    ) or not os.environ.get("REDIS_URL"):
        pytest.fail(
            "the scaled tests need DATABASE_URL=postgres://… and REDIS_URL (make test-services sets them)"
        )
    with server_env(tmp_path, AGENTSITE_USER_MAX_SOCKETS=LIMIT) as env, ExitStack() as stack:
        yield env, [stack.enter_context(serve(env)) for _ in range(2)]


@pytest.mark.scaled
async def test_a_users_sockets_are_counted_across_processes_and_a_killed_ones_expire(two_servers) -> None:
    env, (a, b) = two_servers
    key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
    session_id = new_session(a, key)
    async with AsyncExitStack() as on_a, AsyncExitStack() as on_b:
        await on_a.enter_async_context(socket(a, session_id, key))
        await on_a.enter_async_context(socket(a, session_id, key))
        await on_b.enter_async_context(socket(b, session_id, key))
        await assert_too_many(a, session_id, key)
        await assert_too_many(b, session_id, key)
        await on_b.aclose()
        await opens_within(a, session_id, key, 5)  # b's gave its place back, for any process
        await on_a.enter_async_context(socket(a, session_id, key))

        os.killpg(a.process.pid, signal.SIGKILL)  # its three sockets are never given back...
        a.process.wait(timeout=10)
        bs_own = new_session(b, key)  # (the first session waits for its dead owner's lease meanwhile)
        await assert_too_many(b, bs_own, key)
        started = time.monotonic()
        await opens_within(b, bs_own, key, SLOT_SECONDS + 15)  # ...and expire
        assert time.monotonic() - started > 5
