"""Where every process a tool starts runs (docs/protocol.md §6.1): the one sandbox launcher.

The `shell` tool's commands, ACP runners and stdio MCP servers (and, through `launch`, any program a
tool wraps) start here and nowhere else. Two implementations share one interface, chosen once at start-up from
`AGENTSITE_SANDBOX`: :class:`~agents.sandbox.bwrap.BwrapSandbox` (bubblewrap: namespaces, read-only
system, the workspace as the only writable place) and :class:`~agents.sandbox.base.NoSandbox` (only
for users who hold `agents.run_unsandboxed`).

- :mod:`agents.sandbox.base`: what a process may see and do (:class:`Confinement`, :class:`Limits`),
  the interface, and the refusal.
- :mod:`agents.sandbox.bwrap`: bubblewrap's command line, built from a confinement (pure, unit-tested).
- :mod:`agents.sandbox.programs`: which host paths a runner's program needs visible.
- :mod:`agents.sandbox.process`: starting and ending the processes (commands to completion, runners
  with pipes), so that nothing outlives its call.
- :mod:`agents.sandbox.children`: a long-lived runner (ACP agent, stdio MCP server) as one owned child:
  its process group, its stderr, its end, and the record that ends it after a server was killed.
- :mod:`agents.sandbox.startup`: one start in steps: bubblewrap's options on a descriptor, and what is done
  between its report and its command (the memory cgroup, the network).
- :mod:`agents.sandbox.memory`: the memory ceiling of one call (a cgroup, or per-process shares).
- :mod:`agents.sandbox.network`: `sandbox_network` through a user-mode stack that never reaches the host.
- :mod:`agents.sandbox.site`: the Django side: settings, the start-up probe, the status shown in
  `/healthz` and the admin, workspace and runner-home folders, the program a runner starts.
"""

from __future__ import annotations

from agents.sandbox.base import Confinement, Launch, Limits, Sandbox, SandboxRefused
from agents.sandbox.process import CommandResult, run_command, start_process

__all__ = [
    "CommandResult",
    "Confinement",
    "Launch",
    "Limits",
    "Sandbox",
    "SandboxRefused",
    "run_command",
    "start_process",
]
