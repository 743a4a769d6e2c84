"""Where MCP servers run and how they are reached.

stdio (docs/protocol.md §6.1): in the sandbox the server sees its chat session's workspace at /workspace and
nothing of the server — not the data directory, the code, another workspace, nor the server's environment;
without a sandbox only holders of `agents.run_unsandboxed` start one. Streamable HTTP: a real server on
loopback (tests/support/mcp_test_server.py --http), with the configured headers sent, its tool list
refreshed when it says it changed, and URLs that the outbound rule refuses never contacted (§6.3).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from agents.sandbox.site import reset_sandbox, workspace_dir
from agentsite.dev.fake_llm import Reply
from mcpservers.models import McpServer
from mcpservers.services import server_upsert
from tests import factories
from tests.acp.support import tool_results
from tests.mcpservers.support import SERVER, call, configure_server, gone, marker_pids, run_turn, tool
from tests.support.runner_kit import MCP_SERVER_SOURCE
from tests.support.sandboxes import sandbox_of
from tests.support.ws import connect, rest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]


@pytest.fixture(autouse=True)
def fresh_homes() -> None:
    """User ids repeat from test to test; the homes of earlier tests must not count."""
    shutil.rmtree(settings.DATA_DIR / "homes", ignore_errors=True)


async def _turn(user: Any, key: str, *steps: Reply, session: Any = None) -> tuple[Any, list[dict[str, Any]]]:
    session = session or await sync_to_async(factories.session)(user)
    ws, _ = await connect(session.id, key=key)
    try:
        return session, await run_turn(ws, "go", approval_mode="full_access")
    finally:
        await ws.disconnect()


# -- stdio in the sandbox ---------------------------------------------------------------------------------


async def test_a_stdio_server_sees_its_workspace_and_nothing_of_the_server(alice, alice_key, bob, llm):
    sandbox_of("bwrap")  # skips (fails in CI) where bubblewrap does not work
    marker = await sync_to_async(configure_server)(env={"SERVER_SECRET_LOOKALIKE": "given"})
    other = await sync_to_async(factories.session)(bob)
    probes = [
        str(settings.DATA_DIR),
        str(settings.DATA_DIR / "agentsite.sqlite3"),
        str(settings.BASE_DIR / "manage.py"),
        str(settings.BASE_DIR / "agents"),
        str(workspace_dir(user_id=bob.id, session_id=other.id)),
        "/workspace",
        "/home/agent",
    ]
    llm.script(call("look", paths=probes), call("spawn_child"), Reply(text="ok"))
    session, frames = await _turn(alice, alice_key)
    looked, _ = tool_results(frames)
    seen = json.loads(looked["output"])
    assert seen["cwd"] == "/var/empty", "an empty folder of its own (§6.6); the workspace stays at /workspace"
    assert seen["home"] == "/home/agent" and seen["uid"] == 1000
    assert seen["visible"] == {**dict.fromkeys(probes[:5], False), "/workspace": True, "/home/agent": True}
    assert len(seen["pids"]) <= 3, "a PID namespace of its own: bubblewrap's init and the server"
    assert "DJANGO_SETTINGS_MODULE" not in seen["env"] and "SECRET_KEY" not in seen["env"]
    assert "SERVER_SECRET_LOOKALIKE" in seen["env"] and "MCP_TEST_MARKER" in seen["env"], "its own env only"

    (pid, *_) = marker_pids(marker)
    assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    assert len(marker_pids(marker)) == 2, "the server and its helper"
    home = settings.DATA_DIR / "homes" / str(alice.id) / "default" / f"mcp.{SERVER}"
    assert home.is_dir(), "a private HOME per user and server, kept between starts"
    assert (await rest("DELETE", f"/api/v1/chat/sessions/{session.id}", key=alice_key)).status_code == 200
    assert gone(marker), "closing the chat session ends the sandbox and all in it"


async def test_without_a_sandbox_only_holders_of_the_permission_start_a_stdio_server(
    alice, alice_key, llm, settings
):
    settings.AGENTSITE_SANDBOX = "none"
    reset_sandbox()
    try:
        marker = await sync_to_async(configure_server)()
        await sync_to_async(_pretend_listed)()
        llm.script(call("ping"), Reply(text="ok"))
        _, frames = await _turn(alice, alice_key)
        (refused,) = tool_results(frames)
        assert refused["is_error"] is True
        assert (
            "no sandbox for commands" in refused["output"] and "agents.run_unsandboxed" in refused["output"]
        )
        assert marker_pids(marker) == []
        assert (await sync_to_async(_status)())[0] == "ok", "a refusal for one user is not the server's fault"

        boss = await sync_to_async(factories.user)("boss")
        boss.is_superuser = True
        await sync_to_async(boss.save)()
        key = await sync_to_async(factories.api_key)(boss)
        llm.script(call("look", paths=[]), Reply(text="ok"))
        session, frames = await _turn(boss, key)
        seen = json.loads(tool_results(frames)[0]["output"])
        assert seen["cwd"] != str(workspace_dir(user_id=boss.id, session_id=session.id))
        assert os.listdir(seen["cwd"]) == [], "without a sandbox too, it starts in an empty folder (§6.6)"
    finally:
        reset_sandbox()


def _pretend_listed() -> None:
    """As if its tools had been listed (by someone who may start it): ping and look."""
    import mcp_types as types
    from django.utils import timezone

    from mcpservers.tools import cached_tools

    row = McpServer.objects.get(name=SERVER)
    listed = [types.Tool(name=name, input_schema={"type": "object"}) for name in ("ping", "look")]
    tools, _ = cached_tools(SERVER, listed)
    row.tools = [t.model_dump() for t in tools]
    row.tools_listed_at = timezone.now()
    row.status = "ok"
    row.save()


def _status() -> tuple[str, str]:
    row = McpServer.objects.get(name=SERVER)
    return row.status, row.status_message


# -- streamable HTTP --------------------------------------------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[str]:
    """The test server over streamable HTTP on a free loopback port; its URL."""
    process = subprocess.Popen(
        [sys.executable, str(MCP_SERVER_SOURCE), "--http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on "), line
        yield line.split()[-1]
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _configure_http(url: str, **fields: Any) -> None:
    from agents.services import default_agent_ensure

    body = {
        "enabled": True,
        "transport": "http",
        "command": "",
        "args": [],
        "env": {},
        "url": url,
        "headers": {"Authorization": "Bearer http-canary"},
        "trusted_tools": [],
        "trusted": False,
        "timeout_seconds": 20,
        "sandbox_paths": [],
        **fields,
    }
    server_upsert(agent=default_agent_ensure(), name=SERVER, data=body)


async def test_a_streamable_http_server_is_discovered_called_and_sent_its_headers(
    alice, alice_key, staff_key, http_server, llm
):
    await sync_to_async(_configure_http)(http_server)
    llm.script(
        call("echo", text="over http"),
        call("header", name="Authorization"),
        call("picture"),
        call("grow"),
        Reply(text="ok"),
    )
    session, frames = await _turn(alice, alice_key)
    echoed, header, picture, grown = tool_results(frames)
    assert (echoed["output"], echoed["is_error"]) == ("over http", False)
    assert header["output"] == "Bearer http-canary", "the configured headers go with every request"
    assert "image saved in the workspace as mcp-files/" in picture["output"]
    assert grown["output"] == "grown"

    # The server's list_changed is handled beside the turn (listed again, then stored): wait for it.
    for _ in range(50):
        listed = [
            item["name"] for item in (await rest("GET", "/api/v1/agents/default/tools", key=alice_key)).json()
        ]
        if tool("extra") in listed:
            break
        await asyncio.sleep(0.1)
    assert tool("extra") in listed, "a changed tool list is listed again"
    llm.script(call("extra"), Reply(text="ok"))
    _, frames = await _turn(alice, alice_key, session=session)
    assert tool_results(frames)[0]["output"] == "extra"

    tested = (await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)).json()
    assert tested["ok"] is True and {"name": "echo", "description": "Say the text back."} in tested["tools"]


async def test_an_http_server_that_is_not_there_is_an_error_naming_it(alice, alice_key, staff_key, llm):
    await sync_to_async(_configure_http)("http://127.0.0.1:9/mcp")
    tested = (await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)).json()
    assert tested["ok"] is False and tested["error"]["message"].startswith(f"MCP server '{SERVER}'")
    llm.script(call("echo", text="x"), Reply(text="ok"))
    _, frames = await _turn(alice, alice_key)
    assert frames[-1]["data"]["status"] == "completed", "never a failed turn"


async def test_an_http_url_that_resolves_to_a_refused_address_is_never_contacted(
    alice, alice_key, staff_key, http_server, settings
):
    await sync_to_async(_configure_http)(http_server)
    settings.AGENTSITE_PROVIDER_DENY_PRIVATE = True  # now loopback is refused too, at every connection
    tested = (await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)).json()
    assert tested["ok"] is False and tested["error"]["code"] == "refused"
    assert "loopback or private address" in tested["error"]["message"]
    assert (await sync_to_async(_status)())[0] == "unchecked", "the rule's refusal is not the server's fault"
