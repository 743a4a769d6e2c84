"""MCP servers that fail — will not start, hang, crash, write garbage, time out — end that tool call with an
error naming the server, never the turn; their status says so; and no process of theirs is left behind.

Through the real turn loop with the fake model and the real test server (tests/support/mcp_test_server.py)
in the sandbox; processes are checked from /proc by the marker in the server's environment.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from agentsite.dev.fake_llm import Reply
from mcpservers.models import McpServer
from tests import factories
from tests.acp.support import tool_results
from tests.mcpservers.support import SERVER, call, configure_server, ends, gone, marker_pids, run_turn
from tests.support.ws import connect, rest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]


@pytest.fixture
async def session(alice):  # type: ignore[no-untyped-def]
    return await sync_to_async(factories.session)(alice)


def _status() -> tuple[str, str]:
    row = McpServer.objects.get(agent_id="default", name=SERVER)
    return row.status, row.status_message


async def _turn(session: Any, key: str) -> list[dict[str, Any]]:
    ws, _ = await connect(session.id, key=key)
    try:
        return await run_turn(ws, "go", approval_mode="full_access")
    finally:
        await ws.disconnect()


async def test_a_call_that_takes_too_long_times_out_and_the_next_call_starts_the_server_again(
    session, alice_key, llm
):
    marker = await sync_to_async(configure_server)(timeout_seconds=2)
    llm.script(call("ping"), call("slow", seconds=30), Reply(text="went on"))
    frames = await _turn(session, alice_key)
    pinged, timed_out = tool_results(frames)
    assert timed_out["is_error"] is True
    assert timed_out["output"] == (
        f"MCP server '{SERVER}' did not answer the call of 'slow' within 2 s; it was stopped and starts "
        "again on the next call."
    )
    assert frames[-1]["data"] == {**frames[-1]["data"], "status": "completed", "final_content": "went on"}
    status, message = await sync_to_async(_status)()
    assert status == "error" and message == timed_out["output"], "the settings page shows it"
    assert gone(marker), "the stopped server is gone"

    llm.script(call("ping"), Reply(text="ok"))
    frames = await _turn(session, alice_key)
    assert tool_results(frames)[0]["output"] == "pong", "a new process answers"
    assert len(marker_pids(marker)) == 1
    assert (await sync_to_async(_status)())[0] == "ok"


async def test_a_hung_server_is_stopped_with_everything_it_started(session, alice_key, llm):
    marker = await sync_to_async(configure_server)(timeout_seconds=2)
    llm.script(call("spawn_child"), call("freeze", seconds=600), Reply(text="ok"))
    frames = await _turn(session, alice_key)
    spawned, frozen = tool_results(frames)
    assert spawned["is_error"] is False
    assert frozen["is_error"] is True and "did not answer the call of 'freeze' within 2 s" in frozen["output"]
    assert gone(marker), "the frozen server and its helper are gone"


async def test_a_server_that_crashes_mid_call_is_an_error_result_and_leaves_no_process(
    session, alice_key, llm
):
    marker = await sync_to_async(configure_server)()
    llm.script(call("spawn_child"), call("crash"), Reply(text="it crashed"))
    frames = await _turn(session, alice_key)
    _, crashed = tool_results(frames)
    assert crashed["is_error"] is True
    assert crashed["output"].startswith(
        f"MCP server '{SERVER}' stopped during the call of 'crash': its process ended (exit code 3)"
    )
    assert "crashing on purpose" in crashed["output"], "its last words on stderr"
    assert frames[-1]["data"]["status"] == "completed"
    assert gone(marker)
    status, message = await sync_to_async(_status)()
    assert status == "error" and "exit code 3" in message


async def test_garbage_on_stdout_is_a_protocol_error_that_stops_the_server(session, alice_key, llm):
    marker = await sync_to_async(configure_server)()
    llm.script(call("garbage"), Reply(text="ok"))
    frames = await _turn(session, alice_key)
    (result,) = tool_results(frames)
    assert result["is_error"] is True
    assert result["output"].startswith(
        f"MCP server '{SERVER}' stopped during the call of 'garbage': it wrote something that is not MCP on "
        "its stdout: 'this is not JSON-RPC'"
    )
    assert frames[-1]["data"]["status"] == "completed"
    assert gone(marker)


async def test_garbage_before_the_handshake_is_a_start_failure(session, alice_key, staff_key, llm):
    marker = await sync_to_async(configure_server)(env={"MCP_TEST_MODE": "junk_start"})
    tested = (await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)).json()
    assert tested["ok"] is False and tested["error"]["code"] == "protocol_error"
    assert tested["error"]["message"].startswith(
        f"MCP server '{SERVER}' stopped while it started: it wrote something that is not MCP on its stdout: "
        "'Welcome to the test server!'"
    )
    assert gone(marker)


async def test_a_server_that_does_not_start_is_an_error_result_and_its_status_says_why(
    session, alice_key, staff_key, llm
):
    await sync_to_async(configure_server)(env={"MCP_TEST_MODE": "fail_start"})
    llm.script(call("ping"), Reply(text="no tools"))
    frames = await _turn(session, alice_key)
    assert tool_results(frames)[0]["is_error"] is True, "discovery failed: the tool is not there"
    assert frames[-1]["data"]["status"] == "completed"
    status, message = await sync_to_async(_status)()
    assert status == "error"
    assert message.startswith(
        f"MCP server '{SERVER}' stopped while it started: its process ended (exit code 2)"
    )
    assert "refusing to start" in message

    tested = await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)
    body = tested.json()
    assert tested.status_code == 200 and body["ok"] is False and body["tools"] == []
    assert body["error"]["code"] == "crashed" and "exit code 2" in body["error"]["message"]
    shown = (await rest("GET", f"/api/v1/agents/default/config/mcp/{SERVER}", key=alice_key)).json()
    assert shown["status"]["state"] == "error" and "exit code 2" in shown["status"]["message"]


async def test_a_command_that_is_not_there_is_named_in_the_error_and_the_status(
    session, alice_key, staff_key, llm
):
    await sync_to_async(configure_server)(command="/nonexistent/mcp-server")
    tested = (await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)).json()
    assert tested["ok"] is False and tested["error"] == {
        "code": "spawn_failed",
        "message": f"MCP server '{SERVER}' could not be started: the command '/nonexistent/mcp-server' was "
        "not found.",
    }
    status, message = await sync_to_async(_status)()
    assert (status, message) == ("error", tested["error"]["message"])


@override_settings(AGENTSITE_MCP_START_SECONDS=5.0)
async def test_a_server_that_hangs_at_start_times_out(session, alice_key, staff_key, llm):
    marker = await sync_to_async(configure_server)(env={"MCP_TEST_MODE": "hang_start"}, timeout_seconds=2)
    tested = await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)
    assert tested.json()["ok"] is False
    assert tested.json()["error"] == {
        "code": "timeout",
        "message": f"MCP server '{SERVER}' did not start within 5 s.",
    }
    assert gone(marker)


async def test_a_tool_that_the_cached_list_offers_but_the_server_lost_is_an_error_from_the_server(
    session, alice_key, llm
):
    await sync_to_async(configure_server)()
    await sync_to_async(_forge_tool)("vanished")
    llm.script(call("vanished"), Reply(text="ok"))
    frames = await _turn(session, alice_key)
    (result,) = tool_results(frames)
    assert result["is_error"] is True and result["output"].startswith(f"MCP server '{SERVER}'")
    assert "vanished" in result["output"]


def _forge_tool(name: str) -> None:
    from django.utils import timezone

    row = McpServer.objects.get(agent_id="default", name=SERVER)
    row.tools = [{"name": name, "description": "gone", "input_schema": {"type": "object"}}]
    row.tools_listed_at = timezone.now()
    row.status = "ok"
    row.save()


# -- lifetime: closed with the chat session, at shutdown, after idle -----------------------------------


async def test_deleting_the_chat_session_ends_its_server_and_everything_it_started(session, alice_key, llm):
    marker = await sync_to_async(configure_server)()
    llm.script(call("spawn_child"), Reply(text="ok"))
    await _turn(session, alice_key)
    assert len(marker_pids(marker)) == 2, "the server and its helper"
    deleted = await rest("DELETE", f"/api/v1/chat/sessions/{session.id}", key=alice_key)
    assert deleted.status_code == 200
    assert gone(marker)


async def test_server_shutdown_ends_every_server(session, alice, alice_key, llm):
    from chat.live import reset_live_sessions

    marker = await sync_to_async(configure_server)()
    other = await sync_to_async(factories.session)(alice)
    llm.script(call("ping"), Reply(text="ok"), call("ping"), Reply(text="ok"))
    await _turn(session, alice_key)
    await _turn(other, alice_key)
    assert len(marker_pids(marker)) == 2, "one process per chat session"
    await reset_live_sessions()
    assert gone(marker)


@override_settings(AGENTSITE_MCP_IDLE_SECONDS=1.0)
async def test_an_idle_server_is_closed_and_starts_again_when_used(session, alice_key, llm):
    marker = await sync_to_async(configure_server)()
    llm.script(call("ping"), Reply(text="ok"))
    await _turn(session, alice_key)
    assert len(marker_pids(marker)) == 1
    assert await ends(marker, within=15), "closed after a second without a call"
    llm.script(call("ping"), Reply(text="ok"))
    frames = await _turn(session, alice_key)
    assert tool_results(frames)[0]["output"] == "pong"
