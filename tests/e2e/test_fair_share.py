"""Fair share, budgets, allowed models and limits on real servers (docs/protocol.md §6.4).

What was found: one user queued 32 long turns and another user's first token then took 22.8 s; no limit on
sessions, jobs, tokens or spend; any user could pick any model name on the site's key.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
import websockets

from agentsite.dev.fake_llm import Reply, remote_requests, script_remote
from tests.support.fake_llm_fixtures import FakeLLMProcess
from tests.support.server import RunningServer, ServerEnv, serve, server_env

WITHIN = 20
SLOW = Reply(text=" ".join(f"w{n}" for n in range(30)), chunk_delay=0.1)  # ~3 s of streaming


def model_env(llm: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": llm, "OPENAI_API_KEY": "sk-fake", "AGENTSITE_DEFAULT_MODEL": "fake-model"}


def ws_url(server: RunningServer, session_id: str, key: str) -> str:
    return f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"


def client(server: RunningServer, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=20)


async def new_session(server: RunningServer, key: str) -> str:
    async with client(server, key) as http:
        response = await http.post("/api/v1/chat/sessions", json={})
        assert response.status_code == 200, response.text
        return str(response.json()["session_id"])


async def next_frame(ws: Any, kind: str, **fields: Any) -> dict[str, Any]:
    async with asyncio.timeout(WITHIN):
        while True:
            frame = json.loads(await ws.recv())
            data = frame.get("data") or {}
            if frame["type"] == kind and all(frame.get(k, data.get(k)) == v for k, v in fields.items()):
                return frame


async def send(ws: Any, content: str, **extra: Any) -> str:
    message_id = uuid.uuid4().hex
    await ws.send(json.dumps({"type": "message", "content": content, "message_id": message_id, **extra}))
    return message_id


@pytest.fixture
def users(tmp_path, fake_llm_process: FakeLLMProcess) -> Iterator[tuple[ServerEnv, dict[str, str], str]]:
    llm = fake_llm_process.base_url
    with server_env(
        tmp_path,
        AGENTSITE_USER_MAX_CONCURRENT_TURNS="1",
        AGENTSITE_USER_MAX_SESSIONS="3",
        AGENTSITE_USER_MAX_CRON_JOBS="1",
        **model_env(llm),
    ) as env:
        keys = {
            name: env.manage("create_api_key", "--user", name, "--create-user", *extra).strip()
            for name, extra in (("alice", ()), ("bob", ()), ("staff", ("--staff",)))
        }
        yield env, keys, llm


async def test_a_users_second_turn_waits_queued_while_another_users_first_token_comes_at_once(users):
    env, keys, llm = users
    script_remote(llm, default=SLOW)
    with serve(env) as server:
        first, second = await new_session(server, keys["alice"]), await new_session(server, keys["alice"])
        bobs = await new_session(server, keys["bob"])
        async with (
            websockets.connect(ws_url(server, first, keys["alice"])) as one,
            websockets.connect(ws_url(server, second, keys["alice"])) as two,
            websockets.connect(ws_url(server, bobs, keys["bob"])) as bob,
        ):
            for ws in (one, two, bob):
                await next_frame(ws, "connected")
            running = await send(one, "a long answer, please")
            await next_frame(one, "message_status", message_id=running, status="started")
            waiting = await send(two, "and another one")
            queued = await next_frame(two, "message_status", message_id=waiting)
            assert queued["status"] == "queued" and queued["position"] == 0  # her one slot is taken
            assert queued["waiting_for"]["reason"] == "fair_share"  # and she is told so, and what frees it
            assert queued["waiting_for"]["limit"] == 1 and "starts when one of them ends" in str(queued)

            sent = time.monotonic()
            bobs_message = await send(bob, "me too")
            await next_frame(bob, "message_status", message_id=bobs_message, status="started")
            await next_frame(bob, "delta", message_id=bobs_message)
            assert time.monotonic() - sent < 2, "bob's first words did not wait for alice's turns"
            async with client(server, keys["alice"]) as http:
                snapshot = (await http.get(f"/api/v1/chat/sessions/{second}")).json()["snapshot"]
            assert snapshot["running"] is False and snapshot["paused"] is False
            assert [item["message_id"] for item in snapshot["pending"]] == [waiting]
            assert snapshot["waiting_for"]["reason"] == "fair_share"

            await next_frame(one, "result", message_id=running)
            await next_frame(two, "message_status", message_id=waiting, status="started")  # her slot is free
            assert (await next_frame(two, "result", message_id=waiting))["data"]["status"] == "completed"


async def test_models_an_agent_may_use_are_listed_by_staff(users):
    env, keys, llm = users
    script_remote(llm, default=Reply(text="fine"))
    with serve(env) as server:
        session_id = await new_session(server, keys["alice"])
        async with client(server, keys["alice"]) as http:
            refused = await http.post(
                f"/api/v1/chat/sessions/{session_id}/messages", json={"content": "hi", "model": "gpt-costly"}
            )
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["code"] == "model_not_allowed"
            assert "gpt-costly" in refused.json()["error"]["message"]
            forbidden = await http.patch("/api/v1/agents/default", json={"allowed_models": ["gpt-costly"]})
            assert forbidden.status_code == 403  # only staff configure agents
        async with client(server, keys["staff"]) as http:
            changed = await http.patch("/api/v1/agents/default", json={"allowed_models": ["gpt-cheap"]})
            assert changed.status_code == 200, changed.text
            assert changed.json()["allowed_models"] == ["gpt-cheap"]
            bad = await http.patch("/api/v1/agents/default", json={"allowed_models": "gpt-cheap"})
            assert bad.status_code == 400 and "allowed_models" in bad.json()["error"]["fields"]
        await asyncio.sleep(2.5)  # the agent's configuration is cached for up to 2 s in other processes
        async with websockets.connect(ws_url(server, session_id, keys["alice"])) as ws:
            await next_frame(ws, "connected")
            refused_id = await send(ws, "hi", model="gpt-costly")
            error = await next_frame(ws, "error")
            assert error["data"]["code"] == "model_not_allowed" and error["data"]["message_id"] == refused_id
            allowed_id = await send(ws, "hi", model="gpt-cheap")
            assert (await next_frame(ws, "result", message_id=allowed_id))["data"]["status"] == "completed"
            default_id = await send(ws, "and the agent's own model")
            assert (await next_frame(ws, "result", message_id=default_id))["data"]["status"] == "completed"
        models = [request["model"] for request in remote_requests(llm)]
        assert models[-2:] == ["gpt-cheap", "fake-model"] and "gpt-costly" not in models


async def test_open_chats_and_cron_jobs_per_user_are_limited_with_the_setting_named(users):
    env, keys, _ = users
    with serve(env) as server:
        async with client(server, keys["bob"]) as http:
            for _ in range(3):
                assert (await http.post("/api/v1/chat/sessions", json={})).status_code == 200
            refused = await http.post("/api/v1/chat/sessions", json={})
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert error["code"] == "limit_reached" and "AGENTSITE_USER_MAX_SESSIONS" in error["message"]
            sessions = (await http.get("/api/v1/chat/sessions")).json()["results"]
            assert (
                await http.delete(f"/api/v1/chat/sessions/{sessions[0]['session_id']}")
            ).status_code == 200
            assert (await http.post("/api/v1/chat/sessions", json={})).status_code == 200  # one was closed

            job = {
                "name": "daily",
                "schedule": {"type": "cron", "cron": "0 9 * * *", "timezone": "UTC"},
                "task_type": "text",
                "text": "good morning",
                "dispatch": {
                    "type": "channel",
                    "channel": "console",
                    "target": {"session_id": "bobs-mornings"},
                },
            }
            created = await http.post("/api/v1/cron/jobs", json=job)
            assert created.status_code in (200, 201), created.text
            second = await http.post("/api/v1/cron/jobs", json={**job, "name": "twice"})
            assert second.status_code == 400
            assert "AGENTSITE_USER_MAX_CRON_JOBS" in second.json()["error"]["message"]


async def test_a_turn_past_the_daily_budget_ends_budget_exceeded_and_usage_is_reported(
    tmp_path, fake_llm_process: FakeLLMProcess
):
    llm = fake_llm_process.base_url
    usage = {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60}
    script_remote(llm, default=Reply(text="counted", usage=usage))
    with server_env(tmp_path, AGENTSITE_USER_DAILY_TOKENS="100", **model_env(llm)) as env:
        alice = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
        bob = env.manage("create_api_key", "--user", "bob", "--create-user").strip()
        with serve(env) as server:
            session_id = await new_session(server, alice)
            async with websockets.connect(ws_url(server, session_id, alice)) as ws:
                await next_frame(ws, "connected")
                for _ in range(2):  # 0 and 60 tokens used before they start: under the budget
                    done = await next_frame(ws, "result", message_id=await send(ws, "count me"))
                    assert done["data"]["status"] == "completed"
                refused = await send(ws, "one more")
                result = await next_frame(ws, "result", message_id=refused)
                assert result["data"]["status"] == "error"
                assert result["data"]["error"]["code"] == "budget_exceeded"
                assert (
                    "120" in result["data"]["error"]["message"]
                    and "100" in result["data"]["error"]["message"]
                )
            async with client(server, alice) as http:
                snapshot = (await http.get(f"/api/v1/chat/sessions/{session_id}")).json()["snapshot"]
                assert snapshot["paused"] is True  # as for any error
                report = (await http.get("/api/v1/usage?days=7")).json()
                assert report["today_tokens"] == 120 and report["daily_budget"] == 100
                assert report["results"][0]["model"] == "fake-model"
                assert report["results"][0]["requests"] == 2
                assert (await http.get("/api/v1/usage?days=0")).status_code == 400
                assert (await http.get("/api/v1/usage?user=bob")).status_code == 403
            bobs = await new_session(server, bob)  # another user's budget is their own
            async with websockets.connect(ws_url(server, bobs, bob)) as ws:
                await next_frame(ws, "connected")
                done = await next_frame(ws, "result", message_id=await send(ws, "my turn"))
                assert done["data"]["status"] == "completed"


@pytest.mark.scaled
async def test_a_users_turns_are_counted_across_processes(tmp_path, fake_llm_process: FakeLLMProcess):
    if not os.environ.get("REDIS_URL") or not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.fail("the scaled tests need DATABASE_URL=postgres://… and REDIS_URL (make test-services)")
    llm = fake_llm_process.base_url
    script_remote(llm, default=SLOW)
    with (
        server_env(
            tmp_path,
            AGENTSITE_USER_MAX_CONCURRENT_TURNS="1",
            AGENTSITE_SESSION_LEASE_SECONDS="10",  # no takeover here: a long lease, not the tests' usual 1.5
            **model_env(llm),
        ) as env,
        ExitStack() as stack,
    ):
        alice = env.manage(
            "create_api_key", "--user", f"alice-{uuid.uuid4().hex[:6]}", "--create-user"
        ).strip()
        bob = env.manage("create_api_key", "--user", f"bob-{uuid.uuid4().hex[:6]}", "--create-user").strip()
        a, b = stack.enter_context(serve(env, kill=True)), stack.enter_context(serve(env, kill=True))
        on_a, on_b = await new_session(a, alice), await new_session(b, alice)
        bobs = await new_session(b, bob)
        async with (
            websockets.connect(ws_url(a, on_a, alice)) as one,
            websockets.connect(ws_url(b, on_b, alice)) as two,
            websockets.connect(ws_url(b, bobs, bob)) as three,
        ):
            for ws in (one, two, three):
                await next_frame(ws, "connected")
            running = await send(one, "long")
            await next_frame(one, "message_status", message_id=running, status="started")
            waiting = await send(two, "waits on the other process")
            assert (await next_frame(two, "message_status", message_id=waiting))["status"] == "queued"
            bobs_message = await send(three, "not held up")
            await next_frame(three, "message_status", message_id=bobs_message, status="started")
            await next_frame(one, "result", message_id=running)
            started = time.monotonic()
            await next_frame(two, "message_status", message_id=waiting, status="started")
            assert time.monotonic() - started < 3  # the other process looks again every half second
