"""The `shell` tool in both sandboxes (docs/protocol.md §6.1): bubblewrap, and none (for holders of
`agents.run_unsandboxed`). Each test runs a real command; what it starts is looked for from the host."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from agents.sandbox import Limits
from agents.sandbox.process import OUTPUT_CAP_BYTES
from agents.tools import ToolContext, ToolError, registry
from tests.support.processes import appears, gone, marker
from tests.support.sandboxes import sandbox_of, sandbox_workspace

ALLOWED_VARIABLES = {
    "PATH",
    "HOME",
    "LANG",
    "TERM",
    "PWD",
    "SHLVL",
    "_",
    "OLDPWD",
    "USER",
    "LOGNAME",
    "TMPDIR",
}


@pytest.fixture
def workspace() -> Iterator[Path]:
    with sandbox_workspace() as folder:
        yield folder


@pytest.fixture(params=["bwrap", "none"])
def ctx(request: pytest.FixtureRequest, workspace: Path) -> ToolContext:
    return ToolContext(
        workspace=workspace,
        session_id="session-1",
        sandbox=sandbox_of(request.param),
        may_run_unsandboxed=request.param == "none",
    )


@pytest.fixture
def bwrap_ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace, session_id="session-1", sandbox=sandbox_of("bwrap"))


async def shell(ctx: ToolContext, command: str, **arguments: Any) -> str:
    """What the turn loop does with a model's `shell` call: parse, validate, run."""
    tool, params = registry.parse("shell", {"command": command, **arguments})
    return await tool.run(params, ctx)


def connect_probe(port: int) -> str:
    """A command that prints REACHED when a TCP connection to the host's loopback `port` succeeds."""
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('REACHED')"
    return f'python3 -c "{code}"'


def inside(ctx: ToolContext) -> str:
    assert ctx.sandbox is not None
    return ctx.sandbox.workspace_inside(ctx.workspace)


# --- in either sandbox ------------------------------------------------------------------------------


async def test_runs_in_the_workspace_and_reports_the_exit_code(ctx: ToolContext) -> None:
    output = await shell(ctx, "pwd; echo oops >&2; exit 3")
    assert output == f"{inside(ctx)}\noops\n\n[exit code: 3]"


async def test_success_with_no_output(ctx: ToolContext) -> None:
    assert await shell(ctx, "true") == "(no output)\n[exit code: 0]"


async def test_the_environment_holds_nothing_of_the_servers(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    monkeypatch.setenv("SECRET_KEY", "django-leak")
    output = await shell(ctx, "env")
    assert "leak" not in output
    variables = dict(line.split("=", 1) for line in output.splitlines()[:-1] if "=" in line)
    assert set(variables) <= ALLOWED_VARIABLES
    assert variables["HOME"] == inside(ctx) and variables["TERM"] == "dumb"


async def test_output_is_capped_keeping_head_and_tail(ctx: ToolContext) -> None:
    output = await shell(ctx, "seq 1 100000")
    total = len("\n".join(str(n) for n in range(1, 100001)).encode()) + 1
    assert output.startswith("1\n2\n3\n")
    assert output.endswith("99999\n100000\n\n[exit code: 0]")
    assert "bytes omitted; showing the first 49152 and the last 16384 bytes]" in output
    assert f"of {total} bytes omitted" in output
    assert len(output.encode()) < OUTPUT_CAP_BYTES + 500


async def test_output_that_is_not_utf8_is_replaced_not_fatal(ctx: ToolContext) -> None:
    assert await shell(ctx, r"printf 'a\377b'") == "a\ufffdb\n[exit code: 0]"


async def test_a_timeout_kills_every_process_the_command_started(ctx: ToolContext) -> None:
    tag = marker()
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"timed out after 1 s.*\nstarted") as caught:
        await shell(ctx, f"sleep {tag} & echo started; sleep {tag}", timeout_seconds=1)
    assert time.monotonic() - started < 5
    assert "killed with every process it started" in str(caught.value)
    assert gone(tag)


async def test_background_jobs_do_not_outlive_the_command(ctx: ToolContext) -> None:
    tag = marker()
    started = time.monotonic()
    assert await shell(ctx, f"sleep {tag} & echo done") == "done\n\n[exit code: 0]"
    assert time.monotonic() - started < 5
    assert gone(tag)


async def test_cancelling_a_running_call_kills_its_processes(ctx: ToolContext) -> None:
    tag = marker()
    task = asyncio.create_task(shell(ctx, f"sleep {tag} & wait"))
    await appears(tag)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(tag)


async def test_a_call_cancelled_while_its_sandbox_starts_leaves_nothing_running(
    bwrap_ctx: ToolContext,
) -> None:
    """Cancelled a moment after it was started, before the sandboxed command asked to die with its
    parent: the whole tree still goes (tests/support/processes.py looks from the host)."""
    tags = []
    for attempt in range(24):
        tag = marker()
        tags.append(tag)
        task = asyncio.create_task(shell(bwrap_ctx, f"sleep {tag} & wait"))
        await asyncio.sleep((attempt % 8) * 0.0005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert [tag for tag in tags if not gone(tag)] == []


async def test_always_refused_commands_are_refused_by_the_tool_itself(ctx: ToolContext) -> None:
    # Harmless even if the check failed: neither program nor path exists.
    for command in ["rm -rf --no-preserve-root /agentsite-nonexistent", "mkfs.agentsite-test x"]:
        tool, params = registry.parse("shell", {"command": command})
        assert tool.refusal_reason(params) is not None
        with pytest.raises(ToolError, match=r"^Refused: "):
            await tool.run(params, ctx)


async def test_a_call_without_a_sandbox_is_refused(workspace: Path) -> None:
    with pytest.raises(ToolError, match="no sandbox was given"):
        await shell(ToolContext(workspace=workspace, session_id="s"), "true")


# --- without a sandbox: only for holders of agents.run_unsandboxed ----------------------------------


async def test_without_a_sandbox_a_user_without_the_permission_runs_nothing(workspace: Path) -> None:
    ctx = ToolContext(
        workspace=workspace, session_id="s", sandbox=sandbox_of("none"), may_run_unsandboxed=False
    )
    with pytest.raises(ToolError, match=r"no sandbox for commands.*agents\.run_unsandboxed"):
        await shell(ctx, "touch ran")
    assert not (workspace / "ran").exists()


# --- inside bubblewrap --------------------------------------------------------------------------------


async def test_no_server_process_and_no_server_environment_is_visible(
    bwrap_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSITE_CANARY", "canary-8c1f")
    output = await shell(bwrap_ctx, "ls /proc | grep -c '^[0-9]'; cat /proc/*/environ | tr '\\0' '\\n'; env")
    assert "canary-8c1f" not in output
    # Only the sandbox's init, the shell and what it runs: no process of the host.
    assert int(output.splitlines()[0]) <= 5


async def test_the_data_directory_code_and_other_workspaces_are_not_there(bwrap_ctx: ToolContext) -> None:
    with sandbox_workspace() as other:
        (other / "secret.txt").write_text("other user's file")
        probes = [settings.DATA_DIR, settings.BASE_DIR, other, Path(settings.DATA_DIR) / "agentsite.sqlite3"]
        command = "; ".join(f"ls -d {path} 2>/dev/null && echo VISIBLE" for path in probes)
        output = await shell(bwrap_ctx, command + f"; cat {other}/secret.txt 2>&1; true")
    assert "VISIBLE" not in output and "other user's file" not in output


async def test_it_runs_as_an_unprivileged_user_without_capabilities(bwrap_ctx: ToolContext) -> None:
    output = await shell(bwrap_ctx, "id -u; id -un; grep CapEff /proc/self/status; touch /usr/x 2>&1; true")
    uid, name, caps, touch = output.splitlines()[:4]
    assert (uid, name) == ("1000", "agent")
    assert caps.split()[-1] == "0000000000000000"
    assert "Read-only file system" in touch


async def test_the_workspace_is_writable_and_tmp_is_private(bwrap_ctx: ToolContext, workspace: Path) -> None:
    await shell(bwrap_ctx, "echo kept > out.txt; echo gone > /tmp/scratch")
    assert (workspace / "out.txt").read_text() == "kept\n"
    assert "No such file" in await shell(bwrap_ctx, "cat /tmp/scratch 2>&1; true")


async def test_setsid_and_double_forks_die_with_the_call(bwrap_ctx: ToolContext) -> None:
    first, second, third = marker(), marker(), marker()
    command = (
        f"setsid sleep {first} & (sh -c 'sleep {second} &' &); nohup sleep {third} >/dev/null 2>&1 & echo ok"
    )
    assert (await shell(bwrap_ctx, command)).startswith("ok")
    assert gone(first) and gone(second) and gone(third)


async def test_no_network_without_sandbox_network(bwrap_ctx: ToolContext) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        probe = connect_probe(port)
        output = await shell(bwrap_ctx, f"{probe} 2>&1; true")
    assert "REACHED" not in output and ("refused" in output.lower() or "unreachable" in output.lower())


async def test_a_fork_loop_hits_the_process_limit_and_leaves_nothing(workspace: Path) -> None:
    limits = Limits(processes=32, cpu_seconds=30)
    ctx = ToolContext(workspace=workspace, session_id="s", sandbox=sandbox_of("bwrap", limits))
    tag = marker()
    output = await shell(ctx, f"i=0; while [ $i -lt 200 ]; do sleep {tag} & i=$((i+1)); done; echo spawned")
    assert "fork" in output.lower() or "resource" in output.lower()
    assert gone(tag)


async def test_file_size_and_memory_limits_hold(workspace: Path) -> None:
    limits = Limits(file_size_bytes=4 * 1024 * 1024, memory_bytes=256 * 1024 * 1024)
    ctx = ToolContext(workspace=workspace, session_id="s", sandbox=sandbox_of("bwrap", limits))
    await shell(ctx, "dd if=/dev/zero of=big bs=1M count=64 2>/dev/null; true")
    assert (workspace / "big").stat().st_size <= 4 * 1024 * 1024
    output = await shell(ctx, "python3 -c 'x = bytearray(512 * 1024 * 1024)' 2>&1; true")
    assert "MemoryError" in output or "memory limit" in output  # per process, or a cgroup for the call
