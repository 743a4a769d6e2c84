"""End to end on a real `manage.py serve`: delegation to a real ACP runner, configured and driven over REST.

The intent of the seed (copaw test_acp_runner): a staff user registers the mock runner and switches the
tool on over REST; the model (the fake LLM in its own process) calls `delegate_external_agent` with list,
status, start ("hello mock") and later close in one chat session; the runner's reply reaches the
transcript and the model. Stopping the server (SIGTERM) leaves no runner process behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any

import httpx
import pytest

from agentsite.dev.fake_llm import Reply, remote_requests, script_remote
from tests.acp.support import TOOL, delegate, group_gone, marker_pids
from tests.support.runner_kit import mock_runner_script, runner_folder, runner_python
from tests.support.server import serve, server_env

pytestmark = [pytest.mark.services_rerun, pytest.mark.timeout(90)]


async def _turn(http: httpx.AsyncClient, session_id: str, content: str) -> list[dict[str, Any]]:
    """Post a message over REST and wait until its turn has finished; the transcript afterwards.

    Approval mode full_access: `start` runs without a confirmation (approvals are covered over the socket).
    """
    body = {"content": content, "approval_mode": "full_access"}
    posted = await http.post(f"/api/v1/chat/sessions/{session_id}/messages", json=body)
    assert posted.status_code == 202, posted.text
    message_id = posted.json()["message_id"]
    async with asyncio.timeout(30):
        while True:
            history = (await http.get(f"/api/v1/chat/sessions/{session_id}/messages")).json()["results"]
            mine = next(m for m in history if m["message_id"] == message_id and m["role"] == "user")
            if mine["status"] not in ("pending", "running"):
                assert mine["status"] == "completed", mine
                return history
            await asyncio.sleep(0.1)


def _tool_outputs(history: list[dict[str, Any]]) -> list[str]:
    return [message["content"] for message in history if message["role"] == "tool"]


async def test_seed_delegation_over_rest_on_a_real_server_and_no_runner_outlives_it(
    tmp_path, fake_llm_process
):
    marker = uuid.uuid4().hex
    llm = fake_llm_process.base_url
    with server_env(tmp_path) as env:
        key = env.manage("create_api_key", "--user", "root", "--create-user", "--staff").strip()
        with serve(env) as server:
            headers = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=10) as http:
                provider = {"id": "fake", "name": "Fake", "base_url": llm, "api_key": "sk-x", "models": ["m"]}
                assert (await http.post("/api/v1/providers", json=provider)).status_code == 201
                active = await http.put(
                    "/api/v1/providers/active", json={"provider_id": "fake", "model": "m"}
                )
                assert active.status_code == 200
                runner = {
                    "enabled": True,
                    "command": runner_python(),
                    "args": ["-P", str(mock_runner_script())],
                    "sandbox_paths": [str(runner_folder())],
                    "env": {"ACP_TEST_MARKER": marker},
                    "trusted": False,
                    "tool_parse_mode": "call_title",
                }
                put = await http.put("/api/v1/agents/default/config/acp/mock_runner", json=runner)
                assert put.status_code == 200, put.text
                switched = await http.put(f"/api/v1/agents/default/tools/{TOOL}", json={"enabled": True})
                assert switched.json()["enabled"] is True
                session_id = (await http.post("/api/v1/chat/sessions", json={})).json()["session_id"]

                script_remote(
                    llm,
                    delegate("list", runner=""),
                    delegate("status", runner="mock_runner"),
                    Reply(text="Listed."),
                )
                listed, status = _tool_outputs(await _turn(http, session_id, "list the runners"))
                assert json.loads(listed) == {"runners": [{"runner": "mock_runner", "state": "closed"}]}
                assert json.loads(status) == {"runner": "mock_runner", "state": "closed"}
                assert marker_pids(marker) == [], "status never spawns"

                script_remote(
                    llm, delegate("start", runner="mock_runner", message="hello mock"), Reply(text="ok")
                )
                history = await _turn(http, session_id, "delegate")
                assert _tool_outputs(history)[-1] == "mock reply: hello mock"
                last_request = remote_requests(llm)[-1]
                assert last_request["messages"][-1] == {
                    **last_request["messages"][-1],
                    "role": "tool",
                    "content": "mock reply: hello mock",
                }
                (pid,) = marker_pids(marker)

                script_remote(llm, delegate("close", runner="mock_runner"), Reply(text="closed"))
                assert "Closed runner" in _tool_outputs(await _turn(http, session_id, "close it"))[-1]
                assert group_gone(pid)

                script_remote(llm, delegate("start", runner="mock_runner", message="stay"), Reply(text="ok"))
                await _turn(http, session_id, "start again and leave it open")
                (pid,) = marker_pids(marker)
                assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid"), "sandboxed"
        assert server.process.returncode is not None
    assert group_gone(pid) and marker_pids(marker) == [], "server shutdown ends every runner"
