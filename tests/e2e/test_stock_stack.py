"""End to end on the stock stack (AGENTSITE_STOCK_STACK=1): a real `manage.py serve` with daphne, Django's
ASGI handler and Channels' consumer as they are serves REST, a socket and a streamed turn."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import websockets

from tests.support.server import serve, server_env

pytestmark = pytest.mark.services_rerun


async def _until(ws: Any, kind: str) -> list[dict[str, Any]]:
    seen = []
    while True:
        frame = json.loads(await ws.recv())
        seen.append(frame)
        if frame["type"] == kind:
            return seen


async def test_the_stock_stack_serves_a_session_a_socket_and_a_streamed_turn(tmp_path):
    with server_env(tmp_path, AGENTSITE_STOCK_STACK="1") as env:
        key = env.manage("create_api_key", "--user", "alice", "--create-user", "--name", "stock").strip()
        with serve(env) as server:
            async with httpx.AsyncClient(
                base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}
            ) as http:
                created = await http.post("/api/v1/chat/sessions", json={"title": "stock"})
                assert created.status_code == 200, created.text
                session_id = created.json()["session_id"]
                url = f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
                async with websockets.connect(url) as ws:
                    assert json.loads(await ws.recv())["type"] == "connected"
                    await ws.send(json.dumps({"type": "message", "content": "hello", "message_id": "s1"}))
                    frames = await _until(ws, "result")
                    deltas = "".join(f["content"] for f in frames if f["type"] == "delta")
                    final = next(f for f in frames if f["type"] == "final_answer")
                    assert deltas == final["content"] and frames[-1]["data"]["status"] == "completed"
                history = (await http.get(f"/api/v1/chat/sessions/{session_id}/messages")).json()["results"]
                assert [m["role"] for m in history] == ["user", "assistant"]
            async with websockets.connect(
                f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key=ask_no"
            ) as ws:
                assert json.loads(await ws.recv())["data"]["code"] == "unauthorized"
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await ws.recv()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
        assert "Traceback" not in server.log(), server.log()
