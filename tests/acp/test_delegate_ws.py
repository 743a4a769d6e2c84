"""`delegate_external_agent` through the real runtime, the fake model, the socket and a real ACP runner.

The runner is tests/support/mock_acp_runner.py, a real subprocess speaking ACP on stdio; the model is
the fake OpenAI-compatible server. Nothing of ours is mocked. After each scenario no process of the
runner may remain (found from the outside, by the marker in its environment).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from agents.sandbox.site import workspace_dir
from agents.tools import registry
from agentsite.dev.fake_llm import Reply
from tests import factories
from tests.acp.support import (
    TOOL,
    configure_runner,
    delegate,
    group_gone,
    marker_pids,
    of_type,
    run_turn,
    runner_body,
    tool_results,
)
from tests.support.ws import connect, rest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun, pytest.mark.timeout(60)]


@pytest.fixture
async def session(alice):  # type: ignore[no-untyped-def]
    return await sync_to_async(factories.session)(alice)


def _tool_state(session_id: str, runner: str = "mock_runner") -> str:
    tool = registry.get(TOOL)
    assert tool is not None
    return tool.sessions.state(session_id, runner)  # type: ignore[attr-defined]


def _tool_messages(request: dict[str, Any]) -> list[str]:
    return [message["content"] for message in request["messages"] if message["role"] == "tool"]


# -- the seed: configure over REST, list / status / start / close in one chat session -------------------


async def test_seed_list_status_start_and_close_in_one_chat_session(session, alice_key, staff_key, api, llm):
    staff = api(staff_key)
    marker = "seed-" + session.id
    body = runner_body(marker=marker)
    configured = await sync_to_async(staff.put)("/api/v1/agents/default/config/acp/mock_runner", body)
    assert configured.status_code == 200 and configured.json()["env"] == {"ACP_TEST_MARKER": "***"}
    switched = await sync_to_async(staff.put)(f"/api/v1/agents/default/tools/{TOOL}", {"enabled": True})
    assert switched.status_code == 200 and switched.json()["enabled"] is True

    llm.script(
        delegate("list", runner=""),
        delegate("status", runner="mock_runner"),
        delegate("start", runner="mock_runner", message="hello mock", call_id="call_start"),
        Reply(text="The mock answered."),
    )
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "delegate to the mock", approval_mode="ask")
    listed, status, started = tool_results(frames)
    assert json.loads(listed["output"]) == {"runners": [{"runner": "mock_runner", "state": "closed"}]}
    assert json.loads(status["output"]) == {"runner": "mock_runner", "state": "closed"}
    assert started == {
        **started,
        "call_id": "call_start",
        "is_error": False,
        "output": "mock reply: hello mock",
    }
    asked = of_type(frames, "confirmation_request")
    assert [request["data"]["kind"] for request in asked] == ["tool"], "only start is dangerous"
    assert "hello mock" in asked[0]["data"]["command"]

    updates = of_type(frames, "delegate_update")
    assert {(u["call_id"], u["runner"], u["message_id"]) for u in updates} == {
        ("call_start", "mock_runner", started["message_id"])
    }
    kinds = [u["update"]["kind"] for u in updates]
    assert kinds[:4] == ["thought", "plan", "tool_call", "tool_call_update"] and set(kinds[4:]) == {"message"}
    assert updates[2]["update"] == {"kind": "tool_call", "title": "Look around", "status": "pending"}
    assert "".join(u["update"]["text"] for u in updates[4:]) == "mock reply: hello mock"
    assert _tool_messages(llm.chat_requests[3])[-1] == "mock reply: hello mock", "the model reads the reply"

    (pid,) = marker_pids(marker)
    assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid"), "it runs in its sandbox"
    assert _tool_state(session.id) == "open"

    llm.script(
        delegate("status", runner="mock_runner"), delegate("close", runner="mock_runner"), Reply(text="ok")
    )
    frames = await run_turn(ws, "close it")
    status, closed = tool_results(frames)
    assert json.loads(status["output"])["state"] == "open"
    assert closed["is_error"] is False and "Closed runner 'mock_runner'" in closed["output"]
    assert group_gone(pid) and marker_pids(marker) == []

    history = (await sync_to_async(api(alice_key).get)(f"/api/v1/chat/sessions/{session.id}/messages")).json()
    tool_rows = [m for m in history["results"] if m["role"] == "tool"]
    assert "mock reply: hello mock" in [m["content"] for m in tool_rows], "the reply is in the transcript"
    await ws.disconnect()


async def test_a_runner_that_fails_initialize_is_an_error_result_and_the_turn_completes(
    session, alice_key, staff_key, api, llm
):
    marker = "init-" + session.id
    body = runner_body(marker=marker, env={"ACP_MOCK_FAIL_INITIALIZE": "1"})
    await sync_to_async(api(staff_key).put)("/api/v1/agents/default/config/acp/mock_runner", body)
    await sync_to_async(api(staff_key).put)(f"/api/v1/agents/default/tools/{TOOL}", {"enabled": True})
    llm.script(delegate("start", runner="mock_runner", message="x"), Reply(text="It could not start."))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "delegate")
    (result,) = tool_results(frames)
    assert result["is_error"] is True
    assert (
        "failed to initialize" in result["output"] and "mock runner refuses to initialize" in result["output"]
    )
    assert frames[-1]["data"]["status"] == "completed"
    assert _tool_messages(llm.chat_requests[1]) == [result["output"]]
    assert marker_pids(marker) == []
    assert _tool_state(session.id) == "closed"
    await ws.disconnect()


# -- permissions (docs/protocol.md §3.5)
# -------------------------------------------------------------------------


async def test_runner_permission_requests_ask_the_user_who_approves_or_refuses(session, alice_key, llm):
    await sync_to_async(configure_runner)("permission")
    llm.script(
        delegate("start", runner="mock_runner", message="may I?"),
        delegate("message", runner="mock_runner", message="again?"),
        Reply(text="done"),
    )
    ws, _ = await connect(session.id, key=alice_key)
    permission_answers = iter([{"approved": True, "option_id": "allow"}, {"approved": False}])

    def answer(data: dict[str, Any]) -> dict[str, Any]:
        return next(permission_answers) if data["kind"] == "acp_permission" else {"approved": True}

    frames = await run_turn(ws, "ask twice", approval_mode="ask", answer=answer)
    permission_requests = [
        f["data"] for f in of_type(frames, "confirmation_request") if f["data"]["kind"] == "acp_permission"
    ]
    assert len(permission_requests) == 2
    request = permission_requests[0]
    assert request["options"] == [
        {"option_id": "allow", "name": "Allow once", "kind": "allow_once"},
        {"option_id": "reject", "name": "Reject", "kind": "reject_once"},
    ]
    assert request["command"] == "ls -la" and request["arguments"] == {"command": "ls -la"}
    assert "mock_runner" in request["reason"]
    resolved = {f["confirmation_id"]: f for f in of_type(frames, "confirmation_resolved")}
    assert resolved[request["confirmation_id"]] == {
        **resolved[request["confirmation_id"]],
        "approved": True,
        "option_id": "allow",
        "by": "user",
    }
    approved, refused = tool_results(frames)
    assert approved["output"] == "mock reply: may I? (permission: selected allow)"
    assert refused["output"] == "mock reply: again? (permission: selected reject)", (
        "a refusal picks reject_once"
    )
    await ws.disconnect()


@override_settings(AGENTSITE_CONFIRMATION_TIMEOUT=1.5)
async def test_an_unanswered_permission_times_out_cancelled_and_its_wait_is_not_runner_time(
    session, alice_key, llm
):
    marker = await sync_to_async(configure_runner)("permission", timeout_seconds=1)
    llm.script(delegate("start", runner="mock_runner", message="may I?"), Reply(text="no answer"))
    ws, _ = await connect(session.id, key=alice_key)

    def answer(data: dict[str, Any]) -> dict[str, Any] | None:
        return {"approved": True} if data["kind"] == "tool" else None

    frames = await run_turn(ws, "ask", approval_mode="ask", answer=answer)
    request = next(
        f["data"] for f in of_type(frames, "confirmation_request") if f["data"]["kind"] == "acp_permission"
    )
    resolved = [
        f
        for f in of_type(frames, "confirmation_resolved")
        if f["confirmation_id"] == request["confirmation_id"]
    ]
    assert resolved[0]["by"] == "timeout" and resolved[0]["approved"] is False
    (result,) = tool_results(frames)
    assert result["is_error"] is False, "1.5 s waiting for the user do not count against a 1 s runner timeout"
    assert result["output"] == "mock reply: may I? (permission: cancelled)"
    assert len(marker_pids(marker)) == 1
    await ws.disconnect()


async def test_trusted_runner_is_allowed_by_policy_but_forbidden_commands_and_outside_paths_are_refused(
    session, alice_key, llm
):
    await sync_to_async(configure_runner)("permission", trusted=True)
    llm.script(
        delegate("start", runner="mock_runner", message="plain"),
        delegate("message", runner="mock_runner", message=json.dumps({"command": "rm -rf /"})),
        delegate(
            "message", runner="mock_runner", message=json.dumps({"command": "cat", "path": "/etc/passwd"})
        ),
        Reply(text="done"),
    )
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "go", approval_mode="ask")
    assert [f["data"]["kind"] for f in of_type(frames, "confirmation_request")] == ["tool", "tool", "tool"]
    by_policy = [f for f in of_type(frames, "confirmation_resolved") if f["by"] == "policy"]
    assert [(f["approved"], f.get("option_id")) for f in by_policy] == [
        (True, "allow"),
        (False, "reject"),
        (False, "reject"),
    ]
    outputs = [result["output"] for result in tool_results(frames)]
    assert outputs[0].endswith("(permission: selected allow)")
    assert outputs[1].endswith("(permission: selected reject)") and outputs[2].endswith(
        "(permission: selected reject)"
    )
    await ws.disconnect()


async def test_full_access_allows_by_policy_and_read_only_refuses_start_without_asking(
    session, alice_key, llm
):
    marker = await sync_to_async(configure_runner)("permission")
    llm.script(delegate("start", runner="mock_runner", message="hi"), Reply(text="done"))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "go", approval_mode="full_access")
    assert of_type(frames, "confirmation_request") == []
    assert [(f["by"], f["approved"]) for f in of_type(frames, "confirmation_resolved")] == [("policy", True)]
    assert tool_results(frames)[0]["output"].endswith("(permission: selected allow)")

    llm.script(
        delegate("message", runner="mock_runner", message="more"), delegate("status", runner="mock_runner")
    )
    llm.script(Reply(text="read only"))
    frames = await run_turn(ws, "go", approval_mode="read_only")
    refused, status = tool_results(frames)
    assert refused["is_error"] is True and "read-only" in refused["output"]
    assert status["is_error"] is False and json.loads(status["output"])["state"] == "open"
    assert of_type(frames, "confirmation_request") == [] and len(marker_pids(marker)) == 1
    await ws.disconnect()


# -- a runner that misbehaves ----------------------------------------------------------------------------


async def test_cancel_mid_prompt_cancels_the_runner_and_deleting_the_chat_session_ends_its_group(
    session, alice_key, api, llm
):
    env = {"ACP_MOCK_DELAY": "0.05", "ACP_MOCK_CHUNKS": "400"}
    marker = await sync_to_async(configure_runner)("slow", "spawn_child", env=env)
    llm.script(delegate("start", runner="mock_runner", message="work slowly"))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "go", until="delegate_update")
    assert frames[-1]["update"] == {"kind": "message", "text": "chunk 0 "}
    pids = marker_pids(marker)
    assert len(pids) == 2, "the runner and its helper child"
    pgid = os.getpgid(pids[0])
    await ws.send_json_to({"type": "cancel"})
    while (frame := await ws.receive_json_from(timeout=10))["type"] != "result":
        pass
    assert frame["data"]["status"] == "cancelled"
    assert _tool_state(session.id) == "open", "the prompt was cancelled; the runner's session stays open"

    deleted = await rest("DELETE", f"/api/v1/chat/sessions/{session.id}", key=alice_key)
    assert deleted.status_code == 200
    assert group_gone(pgid) and marker_pids(marker) == []
    await ws.disconnect()


async def test_server_shutdown_ends_every_runner(session, alice_key, llm):
    from chat.live import reset_live_sessions

    marker = await sync_to_async(configure_runner)()
    llm.script(delegate("start", runner="mock_runner", message="stay"), Reply(text="open"))
    ws, _ = await connect(session.id, key=alice_key)
    await run_turn(ws, "go")
    (pid,) = marker_pids(marker)
    await ws.disconnect()
    await reset_live_sessions()
    assert group_gone(pid) and marker_pids(marker) == []


async def test_a_runner_crashing_mid_prompt_is_an_error_result_and_leaves_no_process(session, alice_key, llm):
    marker = await sync_to_async(configure_runner)("crash")
    llm.script(
        delegate("start", runner="mock_runner", message="hello"),
        delegate("status", runner="mock_runner"),
        delegate("message", runner="mock_runner", message="again"),
        Reply(text="it crashed"),
    )
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "go")
    crashed, status, again = tool_results(frames)
    assert crashed["is_error"] is True and "crashed" in crashed["output"]
    assert "exited with code 3" in crashed["output"] and "crashing on purpose" in crashed["output"]
    assert json.loads(status["output"])["state"] == "exited"
    assert again["is_error"] is True and "use start" in again["output"]
    assert frames[-1]["data"]["status"] == "completed"
    assert marker_pids(marker) == []
    await ws.disconnect()


async def test_a_hanging_runner_times_out_as_an_error_result_and_leaves_no_process(session, alice_key, llm):
    marker = await sync_to_async(configure_runner)("hang", "spawn_child", timeout_seconds=1)
    llm.script(delegate("start", runner="mock_runner", message="hello"), Reply(text="too slow"))
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "go")
    (result,) = tool_results(frames)
    assert result["is_error"] is True and "timed out" in result["output"]
    assert "did not answer session/prompt within 1 seconds" in result["output"]
    assert frames[-1]["data"]["status"] == "completed"
    assert marker_pids(marker) == []
    await ws.disconnect()


async def test_stderr_flood_does_not_block_and_junk_on_stdout_is_a_protocol_error(session, alice_key, llm):
    await sync_to_async(configure_runner)(
        "stderr_flood", env={"ACP_MOCK_STDERR_BYTES": str(2 * 1024 * 1024)}, tool_parse_mode="update_detail"
    )
    junk_marker = await sync_to_async(configure_runner)("junk", name="junky")
    llm.script(
        delegate("start", runner="mock_runner", message="hello mock"),
        delegate("start", runner="junky", message="hello"),
        Reply(text="done"),
    )
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "go")
    flooded, junk = tool_results(frames)
    assert flooded["is_error"] is False and flooded["output"] == "mock reply: hello mock"
    detail = [
        u["update"] for u in of_type(frames, "delegate_update") if u["update"]["kind"] == "tool_call_update"
    ]
    assert detail == [{"kind": "tool_call_update", "status": "completed", "text": "2 files"}], (
        "update_detail mode"
    )
    assert junk["is_error"] is True and "non-protocol output on stdout" in junk["output"]
    assert marker_pids(junk_marker) == []
    await ws.disconnect()


async def test_runner_file_access_is_confined_to_the_chat_session_workspace(session, alice_key, llm):
    await sync_to_async(configure_runner)("fs")
    llm.script(
        delegate("start", runner="mock_runner", message="write notes/a.txt hello from the runner"),
        delegate("message", runner="mock_runner", message="read notes/a.txt"),
        delegate("message", runner="mock_runner", message="read /etc/passwd"),
        delegate("message", runner="mock_runner", message="write ../escape.txt nope"),
        Reply(text="done"),
    )
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "go")
    wrote, read, outside, escape = (result["output"] for result in tool_results(frames))
    workspace = workspace_dir(user_id=session.user_id, session_id=session.id)
    assert wrote == "wrote notes/a.txt"
    assert (workspace / "notes" / "a.txt").read_text() == "hello from the runner"
    assert read == "read: hello from the runner"
    assert outside.startswith("fs error:") and "outside the workspace" in outside
    assert escape.startswith("fs error:") and not (workspace.parent / "escape.txt").exists()
    await ws.disconnect()


async def test_unknown_disabled_and_misused_runners_are_clear_error_results(session, alice_key, llm):
    await sync_to_async(configure_runner)()
    await sync_to_async(configure_runner)(name="off", enabled=False)
    llm.script(
        delegate("start", runner="ghost", message="hi"),
        delegate("start", runner="off", message="hi"),
        delegate("message", runner="mock_runner", message="hi"),
        delegate("start", runner="mock_runner", message="hi"),
        delegate("start", runner="mock_runner", message="hi again"),
        delegate("start", runner="mock_runner"),
        Reply(text="done"),
    )
    ws, _ = await connect(session.id, key=alice_key)
    frames = await run_turn(ws, "go")
    ghost, off, no_session, started, twice, no_message = tool_results(frames)
    assert ghost["is_error"] and "Unknown runner 'ghost'. Enabled runners: mock_runner." == ghost["output"]
    assert off["is_error"] and "disabled" in off["output"]
    assert no_session["is_error"] and "use start" in no_session["output"]
    assert started["is_error"] is False
    assert twice["is_error"] and "already open" in twice["output"] and "use message" in twice["output"]
    assert no_message["is_error"] and "needs 'message'" in no_message["output"]
    await ws.disconnect()
