"""The ACP client against a real ACP runner subprocess (tests/support/mock_acp_runner.py).

Each test spawns the mock with this interpreter; only the outside world (the external agent) is
faked, over its real interface (JSON-RPC on stdio). After every test, no process of the runner's
process group may remain.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from acp.client import AcpConnection, AcpError, AcpRunnerSpec
from acp.policy import PermissionDecision, PermissionRequest, decide_permission
from acp.sessions import AcpSessionRegistry
from acp.updates import RenderedUpdate, render_update
from agents.sandbox.base import NoSandbox
from agents.sandbox.children import STDERR_TAIL_BYTES
from tests.support.acp_sdk import acp_sdk

plan_entry, start_tool_call, text_block = acp_sdk.plan_entry, acp_sdk.start_tool_call, acp_sdk.text_block
tool_content, update_plan, update_tool_call = (
    acp_sdk.tool_content,
    acp_sdk.update_plan,
    acp_sdk.update_tool_call,
)
MOCK_RUNNER = Path(__file__).resolve().parents[1] / "support" / "mock_acp_runner.py"
# The client's own behaviour, without a sandbox (tests/acp/test_sandboxed_runner.py runs it in one).
UNSANDBOXED = NoSandbox()

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


def runner_spec(
    workspace: Path, *modes: str, env: dict[str, str] | None = None, **kwargs: Any
) -> AcpRunnerSpec:
    # -P: the script's folder is not put on sys.path, so `import acp` there is the SDK, never this project.
    args = ["-P", str(MOCK_RUNNER), *(["--mode", ",".join(modes)] if modes else [])]
    options: dict[str, Any] = {"timeout_seconds": 20, **kwargs}
    return AcpRunnerSpec(
        command=sys.executable,
        args=args,
        env=env or {},
        cwd=workspace,
        name="mock_runner",
        sandbox=UNSANDBOXED,
        may_run_unsandboxed=True,
        **options,
    )


def assert_group_gone(pgid: int | None) -> None:
    assert pgid is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def same_folder(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


async def wait_for(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.01)


def answering(*answers: str | None) -> tuple[Callable[[PermissionRequest], Awaitable[str | None]], list[Any]]:
    """An on_permission callback that gives `answers` in turn, and the requests it saw."""
    seen: list[PermissionRequest] = []
    queue = list(answers)

    async def on_permission(request: PermissionRequest) -> str | None:
        seen.append(request)
        return queue.pop(0)

    return on_permission, seen


# -- happy path ---------------------------------------------------------------------------------------


async def test_prompt_returns_streamed_reply_and_updates_arrive_in_order(workspace: Path) -> None:
    updates: list[RenderedUpdate] = []
    async with AcpConnection(runner_spec(workspace), on_update=updates.append) as conn:
        assert conn.state == "open"
        reply = await conn.prompt("hello mock")
        assert conn.state == "open"
        assert conn.stop_reason == "end_turn"
        pgid = conn.pid
    assert reply == "mock reply: hello mock"
    kinds = [update["kind"] for update in updates]
    assert kinds[:4] == ["thought", "plan", "tool_call", "tool_call_update"]
    assert kinds[4:] == ["message"] * (len(kinds) - 4) and len(kinds) - 4 >= 3
    assert "".join(update.get("text", "") for update in updates[4:]) == reply
    assert updates[2] == {"kind": "tool_call", "title": "Look around", "status": "pending"}
    assert conn.state == "closed"
    assert_group_gone(pgid)
    with pytest.raises(AcpError) as after_close:
        await conn.prompt("hello again")
    assert after_close.value.code == "closed"


async def test_cancel_stops_a_running_prompt_and_the_session_stays_usable(workspace: Path) -> None:
    messages: list[str] = []
    spec = runner_spec(workspace, "slow", env={"ACP_MOCK_DELAY": "0.05", "ACP_MOCK_CHUNKS": "400"})
    async with AcpConnection(spec, on_update=lambda u: messages.append(u.get("text", ""))) as conn:
        running = asyncio.create_task(conn.prompt("go slowly"))
        await wait_for(lambda: len(messages) >= 2)
        assert conn.state == "running"
        with pytest.raises(AcpError) as busy:
            await conn.prompt("me too")
        assert busy.value.code == "busy"
        await conn.cancel()
        reply = await running
        assert conn.stop_reason == "cancelled"
        assert reply.startswith("chunk 0 chunk 1 ")
        assert "chunk 399" not in reply
        assert conn.state == "open"

        # The caller giving up (its task cancelled) cancels the runner's prompt too.
        messages.clear()
        running = asyncio.create_task(conn.prompt("go slowly again"))
        await wait_for(lambda: len(messages) >= 1)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert conn.state == "open"
        count = len(messages)
        await asyncio.sleep(0.2)
        assert len(messages) <= count + 1  # the runner stopped streaming once told
        pgid = conn.pid
    assert_group_gone(pgid)


# -- permissions ----------------------------------------------------------------------------------------


async def test_user_answers_to_permission_requests_reach_the_runner(workspace: Path) -> None:
    answer, seen = answering("allow", "reject", None, "not-an-offered-option")
    states: list[str] = []

    async def on_permission(request: PermissionRequest) -> str | None:
        states.append(conn.state)
        return await answer(request)

    conn = AcpConnection(runner_spec(workspace, "permission"), on_permission=on_permission)
    async with conn:
        assert (await conn.prompt("approve")).endswith("(permission: selected allow)")
        assert (await conn.prompt("refuse")).endswith("(permission: selected reject)")
        assert (await conn.prompt("no answer")).endswith("(permission: cancelled)")
        assert (await conn.prompt("bad answer")).endswith("(permission: cancelled)")
    assert states == ["waiting_for_permission"] * 4
    request = seen[0]
    assert request.title == "Run a command"
    assert request.kind == "execute"
    assert request.command == "ls -la"
    assert request.options == [
        {"option_id": "allow", "name": "Allow once", "kind": "allow_once"},
        {"option_id": "reject", "name": "Reject", "kind": "reject_once"},
    ]


async def test_trusted_runner_is_allowed_once_by_policy_but_refused_commands_and_paths_are_rejected(
    workspace: Path,
) -> None:
    on_permission, seen = answering()
    decisions: list[PermissionDecision] = []
    spec = runner_spec(workspace, "permission", trusted=True)
    conn = AcpConnection(
        spec, on_permission=on_permission, on_policy_decision=lambda _request, d: decisions.append(d)
    )
    async with conn:
        allowed = await conn.prompt(json.dumps({"command": "ls"}))
        refused = await conn.prompt(json.dumps({"command": "rm -rf /"}))
        outside = await conn.prompt(json.dumps({"command": "cat notes", "path": "/etc/passwd"}))
    assert allowed.endswith("(permission: selected allow)")
    assert refused.endswith("(permission: selected reject)")
    assert outside.endswith("(permission: selected reject)")
    assert seen == []  # nobody was asked
    assert [d.approved for d in decisions] == [True, False, False]
    assert "outside the workspace" in decisions[2].reason


async def test_cancel_answers_a_pending_permission_request_cancelled(workspace: Path) -> None:
    asked = asyncio.Event()
    user_task_cancelled = asyncio.Event()

    async def never_answers(request: PermissionRequest) -> str | None:
        asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            user_task_cancelled.set()
            raise
        return None

    async with AcpConnection(runner_spec(workspace, "permission"), on_permission=never_answers) as conn:
        running = asyncio.create_task(conn.prompt("please"))
        await asyncio.wait_for(asked.wait(), 10)
        assert conn.state == "waiting_for_permission"
        await conn.cancel()
        reply = await asyncio.wait_for(running, 10)
    assert reply.endswith("(permission: cancelled)")
    assert user_task_cancelled.is_set()


def test_policy_rejects_paths_outside_the_workspace_and_follows_the_approval_mode(workspace: Path) -> None:
    def request(path: str | None = None, *kinds: str) -> PermissionRequest:
        kinds = kinds or ("allow_once", "reject_once")
        return PermissionRequest(
            tool_call_id="c1",
            title="Edit",
            kind="edit",
            raw_input={"path": path} if path else {},
            options=[{"option_id": f"id-{kind}", "name": kind, "kind": kind} for kind in kinds],
        )

    def decide(req: PermissionRequest, mode: str = "ask", trusted: bool = False) -> PermissionDecision | None:
        return decide_permission(req, workspace=workspace, trusted=trusted, approval_mode=mode)

    assert decide(request("notes.txt")) is None
    assert decide(request(str(workspace / "notes.txt"))) is None
    for escape in ("/etc/passwd", "../outside.txt", str(workspace / ".." / "x")):
        decision = decide(request(escape), trusted=True)
        assert decision is not None and decision.option_id == "id-reject_once" and not decision.approved
    assert decide(request("a.txt"), "full_access") == PermissionDecision(
        option_id="id-allow_once", approved=True, reason="Allowed by policy: approval mode full_access."
    )
    read_only = decide(request("a.txt"), "read_only")
    assert read_only is not None and read_only.option_id == "id-reject_once"
    no_reject_option = decide(request("/etc/passwd", "allow_once"))
    assert no_reject_option is not None and no_reject_option.option_id is None  # → outcome cancelled


# -- files -----------------------------------------------------------------------------------------------


async def test_fs_is_served_inside_the_workspace_and_refused_outside_with_a_json_rpc_error(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "notes.txt").write_text("line 1\nline 2\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (workspace / "link").symlink_to(secret)
    async with AcpConnection(runner_spec(workspace, "fs")) as conn:
        relative = await conn.prompt("read notes.txt")
        absolute = await conn.prompt(f"read {workspace / 'notes.txt'}")
        written = await conn.prompt(f"write {workspace / 'sub' / 'out.txt'} hello from the runner")
        refused = [
            await conn.prompt(f"read {secret}"),
            await conn.prompt("read ../secret.txt"),
            await conn.prompt("read link"),
            await conn.prompt(f"write {tmp_path / 'planted.txt'} gotcha"),
        ]
        missing = await conn.prompt("read missing.txt")
        assert conn.state == "open"
    assert relative == "read: line 1\nline 2\n"
    assert absolute == relative
    assert written == f"wrote {workspace / 'sub' / 'out.txt'}"
    assert (workspace / "sub" / "out.txt").read_text() == "hello from the runner"
    for reply in refused:
        assert reply.startswith("fs error:") and "outside the workspace" in reply
        assert "top secret" not in reply
    assert not (tmp_path / "planted.txt").exists()
    assert missing.startswith("fs error:") and "does not exist" in missing


# -- process environment ---------------------------------------------------------------------------------


async def test_runner_gets_a_minimal_environment_with_its_own_env_and_the_workspace_as_cwd(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "server-secret")
    async with AcpConnection(runner_spec(workspace, "env", env={"RUNNER_TOKEN": "for-the-runner"})) as conn:
        seen = json.loads(await conn.prompt("env"))
    env: dict[str, str] = seen["env"]
    assert env["RUNNER_TOKEN"] == "for-the-runner"
    assert "sk-server-secret" not in json.dumps(env) and "server-secret" not in json.dumps(env)
    # Python may add LC_CTYPE itself (PEP 538); nothing else comes from the server, not even its PATH.
    names = {
        "PATH",
        "HOME",
        "LANG",
        "TERM",
        "RUNNER_TOKEN",
        "ACP_MOCK_MODE",
        "PYTHONSAFEPATH",
        "PYTHONNOUSERSITE",
    }
    assert set(env) - {"LC_CTYPE"} <= names
    assert env["PYTHONSAFEPATH"] == "1", "no module planted in the workspace is imported (§6.6)"
    assert env["PATH"].endswith("/usr/local/bin:/usr/bin:/bin") and env["PATH"] != os.environ["PATH"]
    assert same_folder(Path(seen["cwd"]), workspace)


# -- failures ----------------------------------------------------------------------------------------------


def test_runner_spec_refuses_a_config_that_cannot_work(workspace: Path) -> None:
    with pytest.raises(ValueError, match="command"):
        AcpRunnerSpec(command="", cwd=workspace)
    with pytest.raises(ValueError, match="tool_parse_mode"):
        AcpRunnerSpec(command="agent", cwd=workspace, tool_parse_mode="everything")
    with pytest.raises(ValueError, match="timeout_seconds"):
        AcpRunnerSpec(command="agent", cwd=workspace, timeout_seconds=0)


async def test_missing_command_is_a_clear_error(workspace: Path) -> None:
    spec = AcpRunnerSpec(
        command="no-such-acp-runner-xyz",
        cwd=workspace,
        name="ghost",
        sandbox=UNSANDBOXED,
        may_run_unsandboxed=True,
    )
    conn = AcpConnection(spec)
    with pytest.raises(AcpError) as error:
        await conn.start()
    assert error.value.code == "spawn_failed"
    assert "'no-such-acp-runner-xyz' was not found" in error.value.message
    assert conn.state == "exited"


async def test_runner_crashing_mid_prompt_is_a_clear_error_and_leaves_no_process(workspace: Path) -> None:
    async with AcpConnection(runner_spec(workspace, "crash")) as conn:
        pgid = conn.pid
        with pytest.raises(AcpError) as error:
            await conn.prompt("hello")
        assert conn.state == "exited"
        assert_group_gone(pgid)
    assert error.value.code == "crashed"
    assert "exited with code 3 during session/prompt" in error.value.message
    assert "crashing on purpose" in error.value.message


async def test_hanging_runner_times_out_and_leaves_no_process(workspace: Path) -> None:
    spec = runner_spec(workspace, "hang", timeout_seconds=0.5)
    async with AcpConnection(spec, shutdown_grace=0.2) as conn:
        pgid = conn.pid
        started = asyncio.get_running_loop().time()
        with pytest.raises(AcpError) as error:
            await conn.prompt("hello")
        assert asyncio.get_running_loop().time() - started < 5
        assert conn.state == "exited"
        assert_group_gone(pgid)
    assert error.value.code == "timeout"
    assert error.value.message == "Runner 'mock_runner' did not answer session/prompt within 0.5 seconds."


async def test_close_kills_the_whole_group_even_when_it_ignores_sigterm(workspace: Path) -> None:
    spec = runner_spec(workspace, "hang", "spawn_child", "ignore_sigterm")
    conn = AcpConnection(spec, shutdown_grace=0.2, term_grace=0.3)
    await conn.start()
    running = asyncio.create_task(conn.prompt("hello"))
    await wait_for(lambda: conn.state == "running")
    await conn.close()
    with pytest.raises(AcpError) as error:
        await running
    assert error.value.code == "closed"
    assert conn.state == "closed"
    assert_group_gone(conn.pid)


async def test_stderr_flood_does_not_block_the_runner(workspace: Path) -> None:
    spec = runner_spec(workspace, "stderr_flood", env={"ACP_MOCK_STDERR_BYTES": str(2 * 1024 * 1024)})
    async with AcpConnection(spec) as conn:
        reply = await conn.prompt("hello mock")  # the flood is written before the reply: it was drained
        tail = conn.stderr_tail
    assert reply == "mock reply: hello mock"
    assert "very chatty" in tail and len(tail) <= STDERR_TAIL_BYTES


async def test_junk_on_stdout_is_a_clear_protocol_error(workspace: Path) -> None:
    conn = AcpConnection(runner_spec(workspace, "junk"))
    with pytest.raises(AcpError) as error:
        await conn.start()
    assert error.value.code == "protocol_error"
    assert "non-protocol output on stdout: 'Welcome to mock runner" in error.value.message
    assert conn.state == "exited"
    assert_group_gone(conn.pid)


async def test_initialize_answered_with_an_error_is_a_clear_error(workspace: Path) -> None:
    conn = AcpConnection(runner_spec(workspace, env={"ACP_MOCK_FAIL_INITIALIZE": "1"}))
    with pytest.raises(AcpError) as error:
        await conn.start()
    assert error.value.code == "initialize_failed"
    assert "refused initialize" in error.value.message
    assert "mock runner refuses to initialize" in error.value.message
    assert_group_gone(conn.pid)


async def test_runner_exiting_during_initialize_is_a_clear_error(workspace: Path) -> None:
    conn = AcpConnection(runner_spec(workspace, "fail_init_exit"))
    with pytest.raises(AcpError) as error:
        await conn.start()
    assert error.value.code == "initialize_failed"
    assert "exited with code 2 during initialize" in error.value.message
    assert "fatal error during initialize" in error.value.message
    assert_group_gone(conn.pid)


# -- sessions per (chat session, runner) -------------------------------------------------------------------


async def test_registry_keys_runners_by_chat_session_and_closing_leaves_no_process(workspace: Path) -> None:
    registry = AcpSessionRegistry()
    assert registry.state("chat-1", "mock_runner") == "closed"  # status never spawns
    first, other = await asyncio.gather(
        registry.start("chat-1", runner_spec(workspace)), registry.start("chat-2", runner_spec(workspace))
    )
    with pytest.raises(AcpError) as already:
        await registry.start("chat-1", runner_spec(workspace))
    assert "already open; use message" in already.value.message
    assert registry.get("chat-1", "mock_runner") is first
    assert registry.state("chat-2", "mock_runner") == "open"

    updates: list[RenderedUpdate] = []
    assert await first.prompt("hi", on_update=updates.append) == "mock reply: hi"
    assert [u["kind"] for u in updates][:2] == ["thought", "plan"]

    assert await registry.close_chat_session("chat-1") == 1
    assert registry.state("chat-1", "mock_runner") == "closed"
    assert_group_gone(first.pid)
    assert other.state == "open"
    await registry.close_all()
    assert other.state == "closed"
    assert_group_gone(other.pid)


# -- rendering -----------------------------------------------------------------------------------------------


def test_render_update_shows_tool_detail_according_to_tool_parse_mode() -> None:
    call = start_tool_call("c1", "Read file", status="pending", raw_input={"path": "a.txt"})
    progress = update_tool_call("c1", status="completed", content=[tool_content(text_block("file body"))])
    rendered = {
        mode: (render_update(call, mode), render_update(progress, mode))
        for mode in ("call_title", "update_detail", "call_detail")
    }
    assert rendered["call_title"] == (
        {"kind": "tool_call", "title": "Read file", "status": "pending"},
        {"kind": "tool_call_update", "status": "completed"},
    )
    assert rendered["update_detail"] == (
        {"kind": "tool_call", "title": "Read file", "status": "pending"},
        {"kind": "tool_call_update", "status": "completed", "text": "file body"},
    )
    assert rendered["call_detail"] == (
        {"kind": "tool_call", "title": "Read file", "status": "pending", "text": '{"path": "a.txt"}'},
        {"kind": "tool_call_update", "status": "completed", "text": "file body"},
    )
    plan = update_plan([plan_entry("step one", status="completed"), plan_entry("step two")])
    assert render_update(plan) == {"kind": "plan", "text": "[completed] step one\n[pending] step two"}
    wire = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}
    assert render_update(wire) == {"kind": "thought", "text": "hmm"}
    assert render_update({"sessionUpdate": "current_mode_update", "currentModeId": "code"}) is None
    with pytest.raises(ValueError):
        render_update(call, "everything")
