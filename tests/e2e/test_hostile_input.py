"""Hostile input on a real server (docs/protocol.md §3.2, §6.5): frames over the limit close with 1009,
JSON nested too deeply is invalid input on REST (400 invalid_json) and an ignored frame on a socket, and
nothing of it takes the server down."""

from __future__ import annotations

import json

import httpx
import pytest
import websockets

from tests.support.server import serve, server_env

pytestmark = [pytest.mark.timeout(90)]


async def test_oversized_and_deeply_nested_input_get_the_contracts_answers(tmp_path) -> None:
    limit = 64 * 1024
    with server_env(tmp_path, AGENTSITE_WS_MAX_FRAME_BYTES=str(limit)) as env:
        key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
        with serve(env) as server:
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=10) as http:
                session_id = (await http.post("/api/v1/chat/sessions", json={})).json()["session_id"]
                messages = f"/api/v1/chat/sessions/{session_id}/messages"
                for body in ["[" * 100_000, "[" * 65 + "]" * 65, '{"content": ' + "[" * 70 + "]" * 70 + "}"]:
                    answer = await http.post(messages, content=body)
                    assert answer.status_code == 400, answer.text
                    assert answer.json()["error"]["code"] == "invalid_json"
                nested_ok = await http.post(
                    messages, content='{"content": "hi", "config": {"generation": 5}}'
                )
                assert nested_ok.status_code == 400  # valid JSON: a validation error, not invalid_json
                assert nested_ok.json()["error"]["code"] != "invalid_json"

            url = f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
            async with websockets.connect(url, max_size=None) as ws:
                assert json.loads(await ws.recv())["type"] == "connected"
                await ws.send("[" * 50_000)  # not valid input: ignored like any non-JSON frame
                await ws.send(json.dumps({"type": "ping"}))
                assert json.loads(await ws.recv()) == {"type": "pong"}
                await ws.send(json.dumps({"type": "message", "content": "x" * (2 * limit)}))
                with pytest.raises(websockets.ConnectionClosed):
                    while True:
                        await ws.recv()
                assert ws.close_code == 1009
            async with websockets.connect(url) as ws:  # the server is fine
                assert json.loads(await ws.recv())["type"] == "connected"
            assert server.process.poll() is None
        assert "Traceback" not in server.log() and "RecursionError" not in server.log()
