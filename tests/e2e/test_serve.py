"""End to end: a real `manage.py serve` process driven with the httpx and websockets clients."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import websockets

from tests.support.server import serve, server_env

pytestmark = pytest.mark.services_rerun


async def _until(ws: Any, kind: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    seen = []
    while True:
        frame = json.loads(await ws.recv())
        if frame["type"] == kind:
            return frame, seen
        seen.append(frame)


async def test_key_from_the_command_session_over_rest_and_a_streamed_turn_over_the_socket(tmp_path):
    with server_env(tmp_path) as env:
        key = env.manage("create_api_key", "--user", "alice", "--create-user", "--name", "e2e").strip()
        assert key.startswith("ask_") and len(key) == 44
        with serve(env) as server:
            async with httpx.AsyncClient(
                base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}
            ) as http:
                assert (await http.get("/api/v1/version")).json()["api"] == "v1"
                created = await http.post("/api/v1/chat/sessions", json={"title": "e2e"})
                assert created.status_code == 200, created.text
                session_id = created.json()["session_id"]
                async with websockets.connect(
                    f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
                ) as ws:
                    connected = json.loads(await ws.recv())
                    assert connected["type"] == "connected"
                    await ws.send(
                        json.dumps({"type": "message", "content": "hello from e2e", "message_id": "e1"})
                    )
                    final, before = await _until(ws, "final_answer")
                    deltas = [f for f in before if f["type"] == "delta"]
                    assert len(deltas) > 3
                    assert "".join(d["content"] for d in deltas) == final["content"]
                    result, _ = await _until(ws, "result")
                    assert result["data"]["status"] == "completed"
                history = (await http.get(f"/api/v1/chat/sessions/{session_id}/messages")).json()["results"]
                assert [m["role"] for m in history] == ["user", "assistant"]


async def test_a_wrong_key_is_refused_by_the_real_server(tmp_path):
    with server_env(tmp_path) as env, serve(env) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            response = await http.get("/api/v1/chat/sessions", headers={"Authorization": "Bearer ask_wrong"})
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "unauthorized"
        async with websockets.connect(f"{server.ws_url}/api/v1/chat/ws/anything?api_key=ask_wrong") as ws:
            error = json.loads(await ws.recv())
            assert error["data"]["code"] == "unauthorized"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd.code == 4401
