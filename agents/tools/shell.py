"""The ``shell`` tool: one ``/bin/sh -c`` command in the session workspace, bounded in every way.

It runs in the site's sandbox (agents/sandbox/, docs/protocol.md §6.1): the workspace is all it sees
of the server, with a timeout (everything it started is killed), CPU, memory, process and file-size
limits, an output cap (head and tail are kept, since errors tend to be at the end), and an environment
built from scratch so the server's secrets (``OPENAI_API_KEY``, ``SECRET_KEY``, ...) never reach it.
While it runs, its workspace is watched against the disk quotas (agents/tools/quota.py): a command that
fills one is killed with everything it started and ends with a tool error saying so.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

from pydantic import BaseModel, Field

from agents.approvals import always_refused
from agents.sandbox import Confinement, SandboxRefused, run_command
from agents.sandbox.process import OUTPUT_CAP_BYTES
from agents.tools.base import Risk, Tool, ToolContext, ToolError, ToolParams
from agents.tools.quota import UsageWatch, quota_of, refused
from audit.actions import COMMAND_RUN

DEFAULT_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 600
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The complete environment of a command (the sandbox adds HOME): never copied from the server's.
SHELL_ENVIRONMENT = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "TERM": "dumb"}


class ShellParams(ToolParams):
    command: str = Field(description="The command line, run by /bin/sh -c in the workspace.", min_length=1)
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT_SECONDS,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description=f"Kill the command after this many seconds (default {DEFAULT_TIMEOUT_SECONDS}).",
    )


class ShellTool(Tool):
    name = "shell"
    description = (
        "Run a shell command (/bin/sh -c) in the workspace folder and return its combined stdout and "
        f"stderr (capped at {OUTPUT_CAP_BYTES // 1024} KiB) and exit code. Processes it starts are killed "
        "when it ends or times out."
    )
    Params = ShellParams
    risk: Risk = "dangerous"

    def describe(self, params: BaseModel) -> str | None:
        assert isinstance(params, ShellParams)
        return params.command

    def refusal_reason(self, params: BaseModel) -> str | None:
        assert isinstance(params, ShellParams)
        return always_refused(params.command)

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(params, ShellParams)
        reason = always_refused(params.command)
        if reason is not None:  # defence in depth: the approval step should have refused already
            raise ToolError(f"Refused: {reason}")
        if ctx.sandbox is None:
            raise ToolError("Commands cannot run here: no sandbox was given to this tool call.")
        confinement = Confinement(
            workspace=ctx.workspace,
            env=SHELL_ENVIRONMENT,
            limits=ctx.sandbox.limits,
            network=ctx.sandbox_network,
            may_run_unsandboxed=ctx.may_run_unsandboxed,
        )
        # Every command is in the audit trail (docs/protocol.md §6.4), however it ends.
        audit = _CommandAudit(ctx, params, sandboxed=ctx.sandbox.mode != "none")
        quota = await quota_of(ctx)
        usage = UsageWatch(quota) if quota is not None and quota.limited else None
        stop = asyncio.Event()
        watching = None
        try:
            if usage is not None:
                await usage.start()
                watching = asyncio.create_task(usage.watch(stop))
            result = await run_command(
                ["/bin/sh", "-c", params.command],
                sandbox=ctx.sandbox,
                confinement=confinement,
                limit_seconds=params.timeout_seconds,
                stop=stop,
            )
        except SandboxRefused as exc:
            await audit.ended("refused", error=str(exc))
            raise ToolError(str(exc)) from None
        except OSError as exc:
            await audit.ended("failed", error=str(exc.strerror))
            raise ToolError(f"Could not start the command in the workspace: {exc.strerror}.") from None
        except asyncio.CancelledError:  # the turn was cancelled: the command was killed
            await asyncio.shield(audit.ended("cancelled"))
            raise
        finally:
            if watching is not None:
                watching.cancel()
        passed = await usage.end() if usage is not None else None
        output = result.output or "(no output)"
        if passed is not None:
            await audit.ended("quota_exceeded", exit_code=result.returncode)
            stopped = stop.is_set()  # by the watch (timed_out says so too), or it ended by itself
            what = "the command stopped" if stopped else "the command ended"
            await refused(ctx, passed, tool=self.name, what=f"{what} over the quota: {params.command[:200]}")
            ending = "It was killed with every process it started" if stopped else "It ended"
            raise ToolError(
                f"{passed} {ending}; delete files to make room (its files are kept). Output:\n{output}"
            )
        limit = "the memory limit of this call" if result.memory_exhausted else None  # docs/protocol.md §6.6
        await audit.ended(
            "timed_out" if result.timed_out else "exited", exit_code=result.returncode, error=limit
        )
        if result.timed_out:
            raise ToolError(
                f"The command timed out after {params.timeout_seconds} s and was killed with every "
                f"process it started. Output before the timeout:\n{output}"
            )
        return f"{output}\n{_exit_note(result.returncode)}"


class _CommandAudit:
    """A command's `command.run` entry: what ran, sandboxed or not, how it ended, how long it took."""

    def __init__(self, ctx: ToolContext, params: ShellParams, *, sandboxed: bool) -> None:
        self.ctx = ctx
        self.details: dict[str, Any] = {
            "tool": ShellTool.name,
            "command": params.command,
            "sandboxed": sandboxed,
            "timeout_seconds": params.timeout_seconds,
        }
        self.started = time.monotonic()

    async def ended(self, status: str, *, exit_code: int | None = None, error: str | None = None) -> None:
        if self.ctx.audit is None:
            return
        details = {**self.details, "status": status, "exit_code": exit_code}
        details["duration_ms"] = round((time.monotonic() - self.started) * 1000)
        if error is not None:
            details["error"] = error
        ending = f"exit code {exit_code}" if status == "exited" else status.replace("_", " ")
        summary = f"shell: {self.details['command'][:200]} ({ending})"
        await self.ctx.audit(COMMAND_RUN, summary=summary, details=details)


def _exit_note(returncode: int) -> str:
    if returncode < 0:
        return f"[killed by signal {signal.Signals(-returncode).name}]"
    return f"[exit code: {returncode}]"
