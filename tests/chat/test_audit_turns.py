"""What a chat turn does, in the audit trail (docs/protocol.md §6.4): approval decisions (who, tool,
arguments; by the user, a timeout, a cancel or policy), the commands the `shell` tool runs (command,
exit status, duration, sandboxed or not), ACP runner starts and their permission decisions, and the
starts of stdio MCP servers.

Driven as a user would: real turns over the socket, the fake model calling tools, the real shell in the
site's sandbox, and the mock ACP runner as a real subprocess.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.test import override_settings

from agents.sandbox.site import get_sandbox
from agentsite.dev.fake_llm import Reply
from audit.models import AuditEntry
from tests import factories
from tests.acp.support import configure_runner, delegate, of_type, run_turn
from tests.support.ws import connect, receive_until, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun, pytest.mark.timeout(60)]


def shell(command: str) -> Reply:
    return Reply(tool_calls=[{"name": "shell", "arguments": {"command": command}}])


@pytest.fixture
async def session(alice):  # type: ignore[no-untyped-def]
    def make() -> Any:
        if (
            get_sandbox().mode == "none"
        ):  # no sandbox on this host: commands run for holders of the permission
            alice.user_permissions.add(Permission.objects.get(codename="run_unsandboxed"))
        return factories.session(alice)

    return await sync_to_async(make)()


async def trail(
    action: str, *, count: int = 1, until: Callable[[list[AuditEntry]], bool] | None = None
) -> list[AuditEntry]:
    """The entries of `action`, oldest first, once there are `count` of them (the turn writes as it goes)."""

    def read() -> list[AuditEntry]:
        return list(AuditEntry.objects.filter(action=action).order_by("created_at", "id"))

    for _ in range(100):
        found = await sync_to_async(read)()
        if len(found) >= count and (until is None or until(found)):
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{action}: {[(e.summary, e.details) for e in found]}")


async def test_a_shell_call_approved_over_the_socket_records_the_decision_and_the_command(
    session, alice, alice_key, llm
):
    llm.script(shell("echo audited; exit 3"), Reply(text="done"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "run it"})
    request, _ = await receive_until(ws, "confirmation_request")
    confirmation_id = request["data"]["confirmation_id"]
    await send(ws, {"type": "confirmation_reply", "confirmation_id": confirmation_id, "approved": True})
    result, _ = await receive_until(ws, "tool_result")
    assert "[exit code: 3]" in result["output"]
    await receive_until(ws, "result")
    await ws.disconnect()

    (decision,) = await trail("approval.decide")
    assert (decision.user_id, decision.username) == (alice.pk, "alice")
    assert (decision.object_type, decision.object_id) == ("session", session.id)
    assert (
        decision.details
        | {
            "confirmation_id": confirmation_id,
            "kind": "tool",
            "tool": "shell",
            "arguments": {"command": "echo audited; exit 3"},
            "command": "echo audited; exit 3",
            "approved": True,
            "by": "user",
            "approval_mode": "ask",
        }
        == decision.details
    )
    assert decision.summary == "shell approved by user"

    (command,) = await trail("command.run")
    assert command.user_id == alice.pk and command.object_id == session.id
    details = command.details
    assert details["command"] == "echo audited; exit 3" and details["tool"] == "shell"
    assert details["status"] == "exited" and details["exit_code"] == 3
    assert isinstance(details["duration_ms"], int) and details["duration_ms"] >= 0
    assert details["sandboxed"] is (get_sandbox().mode != "none")
    assert details["session_id"] == session.id
    assert decision.created_at <= command.created_at


async def test_a_refusal_is_recorded_and_nothing_runs(session, alice, alice_key, llm):
    llm.script(shell("touch refused"), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "run it"})
    request, _ = await receive_until(ws, "confirmation_request")
    reply = {"confirmation_id": request["data"]["confirmation_id"], "approved": False}
    await send(ws, {"type": "confirmation_reply", **reply})
    await receive_until(ws, "result")
    await ws.disconnect()
    (decision,) = await trail("approval.decide")
    assert decision.details["approved"] is False and decision.details["by"] == "user"
    assert await sync_to_async(AuditEntry.objects.filter(action="command.run").exists)() is False


@override_settings(AGENTSITE_CONFIRMATION_TIMEOUT=0.3)
async def test_an_unanswered_confirmation_is_recorded_as_decided_by_the_timeout(session, alice_key, llm):
    llm.script(shell("true"), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "run it"})
    await receive_until(ws, "result")
    await ws.disconnect()
    (decision,) = await trail("approval.decide")
    assert (decision.details["by"], decision.details["approved"]) == ("timeout", False)


async def test_policy_decisions_full_access_read_only_and_always_refused(session, alice_key, llm):
    llm.script(shell("echo fine"), Reply(text="1"))
    llm.script(shell("echo blocked"), Reply(text="2"))
    llm.script(shell("rm -rf /"), Reply(text="3"))
    ws, _ = await connect(session.id, key=alice_key)
    for mode in ("full_access", "read_only", "full_access"):
        await send(ws, {"type": "message", "content": "go", "approval_mode": mode})
        await receive_until(ws, "result")
    await ws.disconnect()
    decisions = await trail("approval.decide", count=3)
    shown = [(d.details["approval_mode"], d.details["approved"], d.details["by"]) for d in decisions]
    assert shown == [
        ("full_access", True, "policy"),
        ("read_only", False, "policy"),
        ("full_access", False, "policy"),
    ]
    assert "read-only" in decisions[1].details["reason"]
    assert "every approval mode" in decisions[2].details["reason"]
    (command,) = await trail("command.run")
    assert command.details["command"] == "echo fine", "refused commands never ran"


async def test_a_command_killed_by_cancelling_the_turn_is_recorded_cancelled(session, alice_key, llm):
    llm.script(shell("sleep 30"), Reply(text="never"))
    ws, _ = await connect(session.id, key=alice_key)
    await send(ws, {"type": "message", "content": "wait", "approval_mode": "full_access"})
    await receive_until(ws, "tool_call")
    await asyncio.sleep(0.3)
    await send(ws, {"type": "cancel"})
    await receive_until(ws, "result")
    await ws.disconnect()
    (command,) = await trail("command.run")
    assert command.details["status"] == "cancelled" and command.details["exit_code"] is None


# -- ACP runners --------------------------------------------------------------------------------------------


async def test_runner_starts_and_their_permission_decisions_are_recorded(session, alice, alice_key, llm):
    await sync_to_async(configure_runner)("permission")
    llm.script(
        delegate("start", runner="mock_runner", message="may I?"),
        delegate("message", runner="mock_runner", message="again?"),
        Reply(text="done"),
    )
    ws, _ = await connect(session.id, key=alice_key)

    def answer(data: dict[str, Any]) -> dict[str, Any]:
        return (
            {"approved": True, "option_id": "allow"}
            if data["kind"] == "acp_permission"
            else {"approved": True}
        )

    frames = await run_turn(ws, "ask", approval_mode="ask", answer=answer)
    assert len(of_type(frames, "confirmation_request")) == 4

    (start,) = await trail("runner.start")
    assert start.user_id == alice.pk and start.object_id == session.id
    assert start.details["runner"] == "mock_runner" and start.details["status"] == "started"
    assert start.details["kind"] == "acp"
    assert start.details["agent"] == "default" and start.details["args"][0] == "-P"
    assert start.details["sandboxed"] is (get_sandbox().mode != "none")
    assert "env" not in start.details, "a runner's env values are secrets"

    decisions = await trail("approval.decide", count=4)
    kinds = [
        (d.details["kind"], d.details["tool"], d.details["by"], d.details["approved"]) for d in decisions
    ]
    assert kinds == [
        ("tool", "delegate_external_agent", "user", True),
        ("acp_permission", decisions[1].details["tool"], "user", True),
        ("tool", "delegate_external_agent", "user", True),
        ("acp_permission", decisions[3].details["tool"], "user", True),
    ]
    permission = decisions[1].details
    assert permission["option_id"] == "allow" and permission["arguments"] == {"command": "ls -la"}
    assert "mock_runner" in permission["reason"]

    # Decided by policy (full access): no question, recorded all the same.
    llm.script(delegate("message", runner="mock_runner", message="more"), Reply(text="ok"))
    await run_turn(ws, "more", approval_mode="full_access")
    await ws.disconnect()
    decisions = await trail("approval.decide", count=6)
    assert [(d.details["kind"], d.details["by"]) for d in decisions[4:]] == [
        ("tool", "policy"),
        ("acp_permission", "policy"),
    ]
    assert decisions[5].details["runner"] == "mock_runner" and decisions[5].details["option_id"] == "allow"


async def test_a_runner_that_cannot_start_is_recorded_failed(session, alice_key, llm):
    await sync_to_async(configure_runner)("fail_init_error")
    llm.script(delegate("start", runner="mock_runner", message="hi"), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    await run_turn(ws, "go", approval_mode="full_access")
    await ws.disconnect()
    (start,) = await trail("runner.start")
    assert start.details["status"] == "failed" and start.details["error"]


# -- MCP servers -----------------------------------------------------------------------------------------


async def test_a_stdio_mcp_servers_start_is_recorded_as_a_runners_and_so_is_a_failed_one(
    session, alice, alice_key, llm
):
    """A stdio MCP server is a process started for the chat, like an ACP runner (an HTTP one is not)."""
    from tests.mcpservers.support import SERVER, call, configure_server

    await sync_to_async(configure_server)()
    llm.script(call("ping"), Reply(text="done"))
    ws, _ = await connect(session.id, key=alice_key)
    await run_turn(ws, "ping it", approval_mode="full_access", frame_timeout=30)

    (start,) = await trail("runner.start")
    assert start.user_id == alice.pk and start.object_id == session.id
    details = start.details
    assert (details["kind"], details["runner"], details["status"]) == ("mcp", SERVER, "started")
    assert details["agent"] == "default" and details["command"] and details["trusted"] is False
    assert details["sandboxed"] is (get_sandbox().mode != "none")
    assert "env" not in details, "a server's env values are secrets"

    await sync_to_async(configure_server)(env={"MCP_TEST_MODE": "fail_start"})  # a changed config: restarted
    llm.script(call("ping"), Reply(text="no tools"))
    await run_turn(ws, "again", approval_mode="full_access", frame_timeout=30)
    await ws.disconnect()
    failed = (await trail("runner.start", count=2))[1].details
    assert (failed["kind"], failed["status"]) == ("mcp", "failed") and "exit code 2" in failed["error"]
