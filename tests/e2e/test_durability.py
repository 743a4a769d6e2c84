"""Durability (docs/protocol.md §3.4): SIGKILL a real server mid-turn with messages queued, start it again.

The model is a fake OpenAI-compatible server in its own process, scripted to hold the first turn
running. After the restart, on the same database and data dir:
- every queued message is still pending, in order, with its content;
- the turn that was running ended `result interrupted`: it is the first event the new process
  publishes, its user message is stored with status `interrupted`, and a socket that reconnects with
  a `since` from before the crash gets `resync` (the events the dead process sent cannot be replayed
  from memory; with a shared replay store the replay ends with the interrupted result);
- the queue is paused: a new message is queued, nothing starts until a steer ("send now"), which runs
  that message and un-pauses the queue, so the rest follow in order.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from typing import Any

import httpx
import pytest
import websockets

from agentsite.dev.fake_llm import Reply, remote_requests, script_remote
from tests.support.chat_queue import wait_until
from tests.support.fake_llm_fixtures import FakeLLMProcess
from tests.support.server import RunningServer, serve, server_env

pytestmark = pytest.mark.services_rerun

WITHIN = 15  # seconds any one wait may take
# Unique per run: with Redis, a session's events outlive the test database in the replay store.
SID = f"durable-{uuid.uuid4().hex[:8]}"


async def frames_until(ws: Any, kind: str, status: str | None = None) -> list[dict[str, Any]]:
    """Frames up to and including the first of `kind` (with `status` in it or in its data)."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(WITHIN):
        while True:
            frame = json.loads(await ws.recv())
            seen.append(frame)
            got = frame.get("status") or frame.get("data", {}).get("status")
            if frame["type"] == kind and (status is None or got == status):
                return seen


def socket_url(server: RunningServer, session_id: str, key: str, since: int | None = None) -> str:
    url = f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
    return url if since is None else f"{url}&since={since}"


def kill(server: RunningServer) -> None:
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)


async def recovered_snapshot(http: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    """The session's snapshot once a live process owns it (at once, or when a dead owner's lease expired)."""
    async with asyncio.timeout(WITHIN):
        while True:
            response = await http.get(f"/chat/sessions/{session_id}")
            if response.status_code == 200 and not response.json()["snapshot"]["running"]:
                return dict(response.json()["snapshot"])
            await asyncio.sleep(0.2)


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]


async def test_a_killed_server_keeps_its_queue_and_reports_the_interrupted_turn(
    tmp_path, fake_llm_process: FakeLLMProcess
):
    llm = fake_llm_process.base_url
    script_remote(llm, Reply(text="never delivered", delay=120))  # A's turn stays running
    model_env = {"OPENAI_BASE_URL": llm, "OPENAI_API_KEY": "sk-fake", "AGENTSITE_DEFAULT_MODEL": "fake-model"}
    # With Redis (the services rerun) a dead owner's session is taken over once its lease expires.
    with server_env(tmp_path, AGENTSITE_SESSION_LEASE_SECONDS="1", **model_env) as env:
        key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
        headers = {"Authorization": f"Bearer {key}"}

        with serve(env, kill=True) as first:
            async with httpx.AsyncClient(base_url=f"{first.base_url}/api/v1", headers=headers) as http:
                created = await http.post("/chat/sessions", json={"session_id": SID})
                assert created.status_code == 200, created.text
            async with websockets.connect(socket_url(first, SID, key)) as ws:
                assert json.loads(await ws.recv())["type"] == "connected"
                for message_id in ("A", "B", "C"):
                    await ws.send(
                        json.dumps({"type": "message", "message_id": message_id, "content": message_id})
                    )
                frames = await frames_until(ws, "message_status", "queued")
                frames += await frames_until(ws, "message_status", "queued")
                assert [(f["message_id"], f["status"], f.get("position")) for f in frames] == [
                    ("A", "started", None),
                    ("B", "queued", 0),
                    ("C", "queued", 1),
                ]
                last_seen = frames[-1]["seq"]
                # A's model call is in flight when the server dies
                await wait_until(lambda: remote_requests(llm), within=WITHIN, what="A's model call")
                kill(first)

        with serve(env) as second:
            async with httpx.AsyncClient(
                base_url=f"{second.base_url}/api/v1", headers=headers, timeout=WITHIN
            ) as http:
                snapshot = await recovered_snapshot(http, SID)
                assert snapshot["running"] is False
                assert snapshot["paused"] is True
                assert snapshot["active_message_id"] is None
                assert snapshot["pending"] == [
                    {"message_id": "B", "content": "B", "position": 0, "steer_requested": False},
                    {"message_id": "C", "content": "C", "position": 1, "steer_requested": False},
                ]
                history = (await http.get(f"/chat/sessions/{SID}/messages")).json()["results"]
                assert [(m["message_id"], m["status"]) for m in history] == [("A", "interrupted")]

                async with websockets.connect(socket_url(second, SID, key, since=last_seen)) as ws:
                    connected = json.loads(await ws.recv())
                    assert connected["type"] == "connected"
                    newest = connected["last_seq"]
                    assert newest > last_seen, "seqs go on above those of the killed process"
                    after_crash = json.loads(await ws.recv())
                    if after_crash["type"] == "resync":  # this process cannot replay the dead one's events
                        assert after_crash["snapshot"]["paused"] is True
                        assert [p["message_id"] for p in after_crash["snapshot"]["pending"]] == ["B", "C"]
                    else:  # a shared replay store (Redis) kept them: the replay ends with the interrupt
                        assert after_crash["seq"] > last_seen
                        replayed = [after_crash]
                        if after_crash["type"] != "result":
                            replayed += await frames_until(ws, "result", "interrupted")
                        assert replayed[-1]["data"] == {"status": "interrupted"}
                        assert replayed[-1]["message_id"] == "A"

                async with websockets.connect(socket_url(second, SID, key, since=newest - 1)) as ws:
                    assert json.loads(await ws.recv())["type"] == "connected"
                    interrupted = json.loads(await ws.recv())
                    assert interrupted == {
                        "type": "result",
                        "message_id": "A",
                        "data": {"status": "interrupted"},
                        "seq": newest,
                    }
                    await ws.send(json.dumps({"type": "message", "message_id": "D", "content": "D"}))
                    queued = (await frames_until(ws, "message_status", "queued"))[-1]
                    assert (queued["message_id"], queued["position"]) == ("D", 2), (
                        "paused: queued, not started"
                    )
                    await ws.send(json.dumps({"type": "steer", "message_id": "B"}))  # "send now"
                    frames = await frames_until(ws, "result")
                    frames += await frames_until(ws, "result")
                    frames += await frames_until(ws, "result")
                    story = [
                        (f["message_id"], f.get("status") or f["data"]["status"])
                        for f in frames
                        if f["type"] in {"message_status", "result"}
                    ]
                    assert story == [
                        ("B", "started"),
                        ("B", "completed"),
                        ("C", "started"),
                        ("C", "completed"),
                        ("D", "started"),
                        ("D", "completed"),
                    ]
                finals = [f["content"] for f in frames if f["type"] == "final_answer"]
                assert finals == ["You said: B", "You said: C", "You said: D"]
                after = (await http.get(f"/chat/sessions/{SID}")).json()["snapshot"]
                assert after["paused"] is False and after["pending"] == []

    bodies = [b for b in remote_requests(llm) if isinstance(b, dict) and "messages" in b]
    assert [user_texts(b)[-1] for b in bodies] == ["A", "B", "C", "D"]
    assert user_texts(bodies[1]) == ["A", "B"], "the interrupted message stays in the conversation"
