"""How a tool server's program starts: in the site's sandbox, as a runner (agents/sandbox/children.py).

`SandboxedLaunch` is what every started server's spec holds (ACP's `AcpRunnerSpec`, MCP's stdio
`McpServerSpec`): its program and arguments, its secret env, where it runs. `launch_fields` makes those
from a stored config and the tool call's context: the program found on the server's PATH and shown
read-only with the config's `sandbox_paths`, a persistent HOME per user, agent and server, the agent's
network setting (docs/protocol.md §6.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.sandbox import Confinement, Sandbox
from agents.sandbox.children import runner_confinement
from agents.sandbox.site import program_for, runner_home
from agents.tools.base import ToolContext
from agents.toolservers.models import ToolServerConfig


@dataclass(frozen=True, kw_only=True)
class SandboxedLaunch:
    """`sandbox` starts it (None: it cannot start); `home` is its persistent HOME, `network` whether it may
    use the network, `read_only` the host paths its program needs, `may_run_unsandboxed` whether the user
    holds `agents.run_unsandboxed` (matters only without a sandbox)."""

    command: str = ""
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    sandbox: Sandbox | None = None
    home: Path | None = None
    network: bool = False
    read_only: tuple[Path, ...] = ()
    may_run_unsandboxed: bool = False

    def confined_in(self, workspace: Path, *, empty_cwd: bool = False) -> Confinement:
        """What the program may see and do beside the chat session's `workspace` (`empty_cwd`: it does
        not start in the workspace, docs/protocol.md §6.6)."""
        return runner_confinement(
            self.sandbox,
            workspace=workspace,
            env=self.env,
            network=self.network,
            home=self.home,
            read_only=self.read_only,
            may_run_unsandboxed=self.may_run_unsandboxed,
            empty_cwd=empty_cwd,
        )


def launch_fields(
    config: ToolServerConfig, ctx: ToolContext, *, home_name: str, home: Path | None = None
) -> dict[str, Any]:
    """`SandboxedLaunch`'s fields for this call (`home_name`: the server's folder among the user's
    homes). SandboxRefused when its program cannot be shown."""
    command, read_only = program_for(config.command, config.sandbox_paths)
    if home is None and ctx.user_id is not None:
        home = runner_home(user_id=ctx.user_id, agent_name=ctx.agent_name or "default", runner=home_name)
    return {
        "command": command,
        "args": tuple(config.args),
        "env": dict(config.env),
        "sandbox": ctx.sandbox,
        "home": home,
        "network": ctx.sandbox_network,
        "read_only": read_only,
        "may_run_unsandboxed": ctx.may_run_unsandboxed,
    }
