"""`GET /chat/sessions/{id}/events` as Server-Sent Events on a real `manage.py serve` process.

The stream carries the same events as the WebSocket, each with `id:` = its seq and `event:` = its type;
`?since=` and `Last-Event-ID` replay what came after that seq, or `resync` when it is no longer retained.
One server (demo model, a small event retention) serves the whole module; each test has its own session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import websockets

from tests.support.server import RunningServer, serve, server_env
from tests.support.sse import SseEvent, read_until, sse_events

pytestmark = pytest.mark.services_rerun

RETENTION = 100  # the smallest the settings allow; one demo turn publishes ~75 events
WITHIN = 15  # seconds any one stream read may take


@dataclass
class Site:
    server: RunningServer
    key: str
    other_key: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with server_env(tmp_path_factory.mktemp("sse"), AGENTSITE_EVENT_RETENTION=str(RETENTION)) as env:
        with ThreadPoolExecutor(2) as pool:  # each command starts Django: run them side by side
            keys = pool.map(
                lambda name: env.manage("create_api_key", "--user", name, "--create-user"), ["a", "b"]
            )
            key, other = (k.strip() for k in keys)
        with serve(env) as server:
            yield Site(server=server, key=key, other_key=other)


@asynccontextmanager
async def rest(site: Site, key: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {key or site.key}"}
    async with httpx.AsyncClient(
        base_url=f"{site.server.base_url}/api/v1", headers=headers, timeout=WITHIN
    ) as client:
        yield client


@asynccontextmanager
async def event_stream(
    http: httpx.AsyncClient,
    session_id: str,
    *,
    since: int | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[AsyncIterator[SseEvent]]:
    params = {"since": str(since)} if since is not None else None
    # As a browser's EventSource asks (it was answered 406 once: a JSON-only API refused the type).
    headers = {"Accept": "text/event-stream", **(headers or {})}
    async with http.stream(
        "GET", f"/chat/sessions/{session_id}/events", params=params, headers=headers
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield sse_events(response)


async def until(events: AsyncIterator[SseEvent], kind: str) -> list[SseEvent]:
    async with asyncio.timeout(WITHIN):
        return await read_until(events, lambda data: data["type"] == kind)


async def new_session(http: httpx.AsyncClient) -> str:
    response = await http.post("/chat/sessions", json={})
    assert response.status_code == 200, response.text
    return str(response.json()["session_id"])


async def first_event(events: AsyncIterator[SseEvent]) -> SseEvent:
    async with asyncio.timeout(WITHIN):
        return await anext(aiter(events))


def assert_ids_are_seqs(events: list[SseEvent]) -> None:
    for event in events:
        assert event.event == event.data["type"]
        if "seq" in event.data:
            assert event.id == str(event.data["seq"])
        else:
            assert event.id is None, event


async def test_the_stream_carries_the_same_events_as_the_websocket_with_id_equal_to_seq(site):
    async with rest(site) as http:
        session_id = await new_session(http)
        ws_url = f"{site.server.ws_url}/api/v1/chat/ws/{session_id}?api_key={site.key}"
        async with event_stream(http, session_id) as events, websockets.connect(ws_url) as ws:
            connected = await first_event(events)
            assert connected.event == "connected" and connected.id is None
            assert connected.data["session_id"] == session_id
            assert (
                connected.data["snapshot"]["pending"] == [] and connected.data["snapshot"]["running"] is False
            )
            assert json.loads(await ws.recv())["type"] == "connected"

            posted = await http.post(
                f"/chat/sessions/{session_id}/messages", json={"content": "hi", "message_id": "m1"}
            )
            assert posted.status_code == 202, posted.text
            streamed = await until(events, "result")
            socket_events: list[dict[str, Any]] = []
            async with asyncio.timeout(WITHIN):
                while not socket_events or socket_events[-1]["type"] != "result":
                    socket_events.append(json.loads(await ws.recv()))

    assert [e.data for e in streamed] == socket_events
    assert_ids_are_seqs(streamed)
    kinds = [e.event for e in streamed]
    assert kinds[0] == "message_status" and kinds[-2:] == ["final_answer", "result"]
    assert "delta" in kinds
    assert all(e.data.get("message_id") == "m1" for e in streamed)
    assert streamed[-1].data["data"]["status"] == "completed"


async def test_since_and_last_event_id_replay_the_events_after_that_seq(site):
    async with rest(site) as http:
        session_id = await new_session(http)
        async with event_stream(http, session_id) as events:
            await first_event(events)
            await http.post(f"/chat/sessions/{session_id}/messages", json={"content": "replay me"})
            live = await until(events, "result")
        middle = live[len(live) // 2]
        missed = [e.data for e in live if e.data["seq"] > middle.data["seq"]]

        async with event_stream(http, session_id, since=middle.data["seq"]) as events:
            connected = await first_event(events)
            assert connected.data["last_seq"] == live[-1].data["seq"]
            replayed = await until(events, "result")
        assert [e.data for e in replayed] == missed
        assert_ids_are_seqs(replayed)

        header = {"Last-Event-ID": middle.id or ""}
        async with event_stream(http, session_id, headers=header) as events:
            await first_event(events)
            assert [e.data for e in await until(events, "result")] == missed


async def test_a_since_older_than_what_is_retained_gets_resync(site):
    async with rest(site) as http:
        session_id = await new_session(http)
        async with event_stream(http, session_id) as events:
            await first_event(events)
            for index in range(3):  # three demo turns publish more than RETENTION events
                await http.post(f"/chat/sessions/{session_id}/messages", json={"content": f"turn {index}"})
            for _ in range(3):
                await until(events, "result")

        async with event_stream(http, session_id, since=1) as events:
            connected = await first_event(events)
            resync = await first_event(events)
        assert resync.event == "resync" and resync.id is None
        assert resync.data["last_seq"] == connected.data["last_seq"]
        assert resync.data["snapshot"]["running"] is False


async def test_bad_since_wrong_key_and_another_users_session_are_refused(site):
    async with rest(site) as http:
        session_id = await new_session(http)
        bad = await http.get(f"/chat/sessions/{session_id}/events", params={"since": "soon"})
        assert bad.status_code == 400
    async with rest(site, key="ask_" + "x" * 40) as stranger:
        assert (await stranger.get(f"/chat/sessions/{session_id}/events")).status_code == 401
    async with rest(site, key=site.other_key) as bob:
        foreign = await bob.get(f"/chat/sessions/{session_id}/events")
        assert foreign.status_code == 404
        assert foreign.json()["error"]["code"] == "not_found"


async def test_deleting_the_session_ends_an_open_stream_and_a_closed_session_is_409(site):
    async with rest(site) as http:
        session_id = await new_session(http)
        async with event_stream(http, session_id) as events:
            await first_event(events)
            assert (await http.delete(f"/chat/sessions/{session_id}")).status_code == 200
            ending = await until(events, "error")
            assert ending[-1].data["data"]["code"] == "closed"
            async with asyncio.timeout(WITHIN):
                assert [e async for e in events] == [], "the stream ends after the error"
        refused = await http.get(f"/chat/sessions/{session_id}/events")
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "session_closed"
