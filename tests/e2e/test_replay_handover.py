"""No gap and no duplicate when a client moves between processes mid-turn (docs/protocol.md §3.1, §3.3).

Two real server processes on Postgres + Redis. A turn streams 30 deltas, 0.1 s apart, on the process
that owns the session (A). For every seq of that run, one client reads on A up to that seq, leaves, and
comes back on the other process (B) — a socket with `?since=` or an SSE stream with `Last-Event-ID` —
while the turn goes on: each must get every later event exactly once, in order, up to the `result`.
Several of them attach on B at the same moment, so one client's attach must not cost another an event.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
import websockets

from agentsite.dev.fake_llm import Reply, script_remote
from tests.e2e.test_scale import scaled, two_servers, ws_url  # noqa: F401 - the fixture
from tests.support.server import RunningServer

pytestmark = pytest.mark.scaled

WITHIN = 30


async def read_until(ws: Any, stop: Any) -> list[dict[str, Any]]:
    frames = []
    async with asyncio.timeout(WITHIN):
        while True:
            frame = json.loads(await ws.recv())
            frames.append(frame)
            if stop(frame):
                return frames


def is_result(frame: dict[str, Any]) -> bool:
    return frame["type"] == "result"


async def over_socket(b: RunningServer, session_id: str, key: str, since: int) -> list[int]:
    async with websockets.connect(ws_url(b, session_id, key, since)) as ws:
        frames = await read_until(ws, is_result)
    return [f["seq"] for f in frames if "seq" in f]


async def over_sse(b: RunningServer, session_id: str, key: str, since: int) -> list[int]:
    seqs: list[int] = []
    headers = {"Authorization": f"Bearer {key}", "Last-Event-ID": str(since)}
    async with (
        httpx.AsyncClient(base_url=b.base_url, headers=headers, timeout=WITHIN) as http,
        http.stream("GET", f"/api/v1/chat/sessions/{session_id}/events") as response,
    ):
        async with asyncio.timeout(WITHIN):
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    if "seq" in event:
                        seqs.append(event["seq"])
                    if event["type"] == "result":
                        return seqs
    return seqs


async def mover(
    a: RunningServer, b: RunningServer, session_id: str, key: str, cut: int, sse: bool
) -> tuple[int, list[int]]:
    """Read on A up to seq `cut`, leave, come back on B with since=`cut`; the seqs B delivered."""
    async with websockets.connect(ws_url(a, session_id, key)) as ws:
        await read_until(ws, lambda f: f.get("seq", 0) >= cut)
    return cut, await (over_sse if sse else over_socket)(b, session_id, key, cut)


async def test_every_cut_point_of_a_run_resumes_on_the_other_process_without_gap_or_duplicate(scaled):  # noqa: F811
    env, key, llm = scaled
    session_id = f"handover-{uuid.uuid4().hex[:8]}"
    with two_servers(env) as (a, b):
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=a.base_url, headers=headers, timeout=10) as http:
            assert (
                await http.post("/api/v1/chat/sessions", json={"session_id": session_id})
            ).status_code == 200
            script_remote(llm, Reply(text=" ".join(f"d{n}" for n in range(30)), chunks=30, chunk_delay=0.1))
            async with websockets.connect(ws_url(a, session_id, key)) as watcher:
                first = json.loads(await watcher.recv())
                start = first["last_seq"]
                await watcher.send(json.dumps({"type": "message", "content": "stream", "message_id": "m1"}))
                started = await read_until(watcher, lambda f: f.get("status") == "started")
                begin = started[-1]["seq"]
                # 30 deltas + started + final_answer + result: cut at every seq of the run but the last
                cuts = range(begin, begin + 31)
                movers = [mover(a, b, session_id, key, cut, sse=cut % 3 == 0) for cut in cuts]
                results = await asyncio.gather(*movers)
                seen_live = [f["seq"] for f in await read_until(watcher, is_result) if "seq" in f]
        end = seen_live[-1]
        assert start < begin
        for cut, seqs in results:
            assert seqs == list(range(cut + 1, end + 1)), f"resumed at {cut}: got {seqs}"
