"""MCP servers' tools through the real turn loop: the fake model calls them, the socket shows the calls.

The server is tests/support/mcp_test_server.py, a real MCP server built on the SDK's server side, running
as a subprocess on stdio in the site's sandbox; the model is the fake OpenAI-compatible server. Nothing of
ours is mocked. Processes are checked from the outside (/proc), by the marker in the server's environment.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.sandbox.site import workspace_dir
from agentsite.dev.fake_llm import Reply
from audit.models import AuditEntry
from mcpservers.models import McpServer
from tests import factories
from tests.acp.support import of_type, tool_results
from tests.mcpservers.support import SERVER, call, configure_server, marker_pids, run_turn, tool
from tests.support.ws import connect, rest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun, pytest.mark.timeout(90)]


@pytest.fixture
async def session(alice):  # type: ignore[no-untyped-def]
    return await sync_to_async(factories.session)(alice)


def _offered(request: dict[str, Any]) -> list[str]:
    return [spec["function"]["name"] for spec in request.get("tools") or []]


def _tool_messages(request: dict[str, Any]) -> list[str]:
    return [message["content"] for message in request["messages"] if message["role"] == "tool"]


def _row() -> McpServer:
    return McpServer.objects.get(agent_id="default", name=SERVER)


# -- discovery ------------------------------------------------------------------------------------------


async def test_the_first_turn_discovers_the_tools_which_the_model_is_offered_and_calls(
    session, alice_key, llm
):
    marker = await sync_to_async(configure_server)()
    llm.script(call("ping"), call("echo", text="hi there"), Reply(text="done"))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "use the tools", approval_mode="full_access")
    pinged, echoed = tool_results(frames)
    assert (pinged["name"], pinged["output"], pinged["is_error"]) == (tool("ping"), "pong", False)
    assert (echoed["name"], echoed["output"], echoed["is_error"]) == (tool("echo"), "hi there", False)
    assert frames[-1]["data"]["status"] == "completed"

    offered = _offered(llm.chat_requests[0])
    expected = {tool(name) for name in ("ping", "echo", "add", "slow", "freeze", "fail", "picture", "crash")}
    assert expected <= set(offered), "the first turn already offers what it discovered"
    echo = next(
        spec["function"] for spec in llm.chat_requests[0]["tools"] if spec["function"]["name"] == tool("echo")
    )
    assert echo["description"] == "Say the text back."
    assert echo["parameters"]["properties"]["text"]["type"] == "string"
    assert echo["parameters"]["required"] == ["text"]
    assert _tool_messages(llm.chat_requests[2]) == ["pong", "hi there"]

    row = await sync_to_async(_row)()
    assert row.status == "ok" and row.tools_listed_at is not None
    assert {cached["name"] for cached in row.tools} >= {"ping", "echo", "add"}
    assert len(marker_pids(marker)) == 1, "one server process for the chat session, kept for later calls"

    llm.script(call("ping"), Reply(text="again"))
    frames = await run_turn(ws, "once more", approval_mode="full_access")
    assert tool_results(frames)[0]["output"] == "pong"
    assert len(marker_pids(marker)) == 1, "the next turn uses the same process"
    await ws.disconnect()


async def test_agent_tools_lists_the_servers_tools_with_schema_description_and_risk(
    session, alice_key, staff_key, llm
):
    await sync_to_async(configure_server)(trusted_tools=["ping"])
    tested = await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)
    assert tested.status_code == 200 and tested.json()["ok"] is True, tested.text
    assert {"name": "echo", "description": "Say the text back."} in tested.json()["tools"]

    listed = await rest("GET", "/api/v1/agents/default/tools", key=alice_key)
    items = {item["name"]: item for item in listed.json()}
    assert "shell" in items and items["shell"]["risk"] == "dangerous", "built-ins stay"
    echo = items[tool("echo")]
    assert echo["enabled"] is True and echo["risk"] == "dangerous"
    assert echo["description"] == "Say the text back."
    assert echo["parameters"]["properties"]["text"]["type"] == "string"
    assert items[tool("ping")]["risk"] == "safe", "listed in trusted_tools"
    assert items[tool("add")]["risk"] == "dangerous", "annotated read-only, but the server is not trusted"

    await rest(
        "PUT",
        f"/api/v1/agents/default/config/mcp/{SERVER}",
        key=staff_key,
        json_body={
            **(await rest("GET", f"/api/v1/agents/default/config/mcp/{SERVER}", key=staff_key)).json(),
            "trusted": True,
        },
    )
    items = {
        item["name"]: item
        for item in (await rest("GET", "/api/v1/agents/default/tools", key=alice_key)).json()
    }
    assert items[tool("add")]["risk"] == "safe", "read-only and trusted"
    assert items[tool("echo")]["risk"] == "dangerous"


# -- switches and approvals ---------------------------------------------------------------------------


async def test_a_switched_off_tool_is_not_offered_and_a_call_of_it_is_refused(
    session, alice_key, staff_key, llm
):
    await sync_to_async(configure_server)()
    await rest("POST", f"/api/v1/agents/default/config/mcp/{SERVER}/test", key=staff_key)
    switched = await rest(
        "PUT", f"/api/v1/agents/default/tools/{tool('echo')}", key=staff_key, json_body={"enabled": False}
    )
    assert switched.status_code == 200 and switched.json()["enabled"] is False
    toggled = await rest("PATCH", f"/api/v1/agents/default/tools/{tool('ping')}/toggle", key=staff_key)
    assert toggled.json()["enabled"] is False
    llm.script(call("echo", text="x"), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "try", approval_mode="full_access")
    (refused,) = tool_results(frames)
    assert refused["is_error"] is True and "disabled" in refused["output"]
    offered = _offered(llm.chat_requests[0])
    assert tool("echo") not in offered and tool("ping") not in offered and tool("add") in offered
    await ws.disconnect()


async def test_approval_modes_ask_full_access_and_read_only(session, alice_key, llm):
    await sync_to_async(configure_server)(trusted_tools=["ping"])
    ws, _ = await connect(session.id, key=alice_key)

    answers = iter([{"approved": True}, {"approved": False}])
    llm.script(call("echo", text="asked"), call("echo", text="refused"), call("ping"), Reply(text="ok"))
    frames = await run_turn(ws, "ask", approval_mode="ask", answer=lambda data: next(answers))
    asked = [frame["data"] for frame in of_type(frames, "confirmation_request")]
    assert [data["tool"] for data in asked] == [tool("echo"), tool("echo")], "the trusted ping asks nothing"
    assert asked[0]["arguments"] == {"text": "asked"} and asked[0]["kind"] == "tool"
    assert "echo" in asked[0]["command"] and SERVER in asked[0]["command"]
    approved, refused, pinged = tool_results(frames)
    assert (approved["output"], approved["is_error"]) == ("asked", False)
    assert refused["is_error"] is True and refused["output"] == "Refused by the user."
    assert (pinged["output"], pinged["is_error"]) == ("pong", False)

    llm.script(call("echo", text="free"), Reply(text="ok"))
    frames = await run_turn(ws, "full", approval_mode="full_access")
    assert of_type(frames, "confirmation_request") == []
    assert tool_results(frames)[0]["output"] == "free"

    llm.script(call("echo", text="no"), call("ping"), Reply(text="ok"))
    frames = await run_turn(ws, "read only", approval_mode="read_only")
    assert of_type(frames, "confirmation_request") == []
    blocked, allowed = tool_results(frames)
    assert blocked["is_error"] is True and "read-only mode" in blocked["output"]
    assert (allowed["output"], allowed["is_error"]) == ("pong", False)
    await ws.disconnect()


# -- results --------------------------------------------------------------------------------------------


async def test_an_image_becomes_a_workspace_file_and_an_error_result_is_an_error_the_model_reads(
    session, alice, alice_key, llm
):
    await sync_to_async(configure_server)()
    llm.script(
        call("picture"), call("fail", message="the disk is on fire"), call("add", a=2, b=3), Reply(text="ok")
    )
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "results", approval_mode="full_access")
    picture, failed, added = tool_results(frames)
    assert (
        picture["is_error"] is False
        and "image saved in the workspace as mcp-files/testsrv/" in picture["output"]
    )
    path = picture["output"].split(" as ", 1)[1].split(" ", 1)[0]
    assert path.endswith(".png") and "(image/png," in picture["output"]
    workspace = workspace_dir(user_id=alice.id, session_id=session.id)
    assert (workspace / path).read_bytes().startswith(b"\x89PNG")
    files = await rest("GET", f"/api/v1/chat/sessions/{session.id}/files/{path}", key=alice_key)
    assert files.status_code == 200 and files.headers["content-type"] == "image/png", "the portal can show it"

    assert failed["is_error"] is True
    assert failed["output"] == (
        f"MCP server '{SERVER}' reported an error from its tool 'fail': "
        "Error executing tool fail: the disk is on fire"
    )
    assert added["output"] == "5"
    assert _tool_messages(llm.chat_requests[3])[1] == failed["output"], "the model reads the error"
    assert frames[-1]["data"]["status"] == "completed"
    await ws.disconnect()


async def test_invalid_arguments_are_refused_before_the_server_is_asked(session, alice_key, llm):
    await sync_to_async(configure_server)()
    llm.script(call("add", a="two", b=3), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "bad", approval_mode="full_access")
    (result,) = tool_results(frames)
    assert result["is_error"] is True
    assert result["output"].startswith(
        f"Invalid arguments for tool '{tool('add')}': a: 'two' is not of type 'integer'"
    )
    await ws.disconnect()


async def test_a_long_output_is_capped_like_a_commands_head_and_tail_kept(session, alice_key, llm):
    await sync_to_async(configure_server)()
    llm.script(call("big", size=200_000), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "big", approval_mode="full_access")
    (result,) = tool_results(frames)
    output = result["output"]
    assert result["is_error"] is False and len(output) < 70_000
    assert output.startswith("line 0000000\n") and output.endswith("line 0015383\nline 001"), "the tail too"
    assert "[output truncated: " in output and "bytes omitted" in output
    await ws.disconnect()


async def test_cancelling_the_turn_mid_call_keeps_the_server_for_the_next_turn(session, alice_key, llm):
    marker = await sync_to_async(configure_server)()
    llm.script(call("slow", seconds=60))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "wait", approval_mode="full_access", until="tool_call")
    assert frames[-1]["name"] == tool("slow")
    await ws.send_json_to({"type": "cancel"})
    while (frame := await ws.receive_json_from(timeout=30))["type"] != "result":
        pass
    assert frame["data"]["status"] == "cancelled"
    (pid,) = marker_pids(marker)
    llm.script(call("ping"), Reply(text="ok"))
    # The queue is paused after a cancel: "send now" (steer) starts the next message.
    await ws.send_json_to(
        {"type": "message", "content": "again", "approval_mode": "full_access", "steer": True}
    )
    frames = []
    while (frame := await ws.receive_json_from(timeout=30))["type"] != "result":
        frames.append(frame)
    assert frame["data"]["status"] == "completed"
    assert tool_results(frames)[0]["output"] == "pong"
    assert marker_pids(marker) == [pid], "the same process answers"
    await ws.disconnect()


async def test_an_image_past_the_disk_quota_is_left_out_and_the_model_reads_why(
    session, alice, alice_key, llm, settings
):
    settings.AGENTSITE_WORKSPACE_QUOTA_MB = 1
    workspace = workspace_dir(user_id=alice.id, session_id=session.id)
    (workspace / "full.bin").write_bytes(b"x" * 1024 * 1024)
    await sync_to_async(configure_server)()
    llm.script(call("picture"), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "a picture", approval_mode="full_access")
    (picture,) = tool_results(frames)
    assert (
        picture["output"].startswith("[image of ")
        and "left out: The disk quota is used up" in picture["output"]
    )
    assert not (workspace / "mcp-files").exists()
    entry = await AuditEntry.objects.filter(action="quota.exceeded").aget()
    assert entry.details["tool"] == f"{SERVER}/picture" and entry.details["scope"] == "workspace"
    await ws.disconnect()
