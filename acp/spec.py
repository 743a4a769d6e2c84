"""What a runner is (`AcpRunnerSpec`: its config, its workspace, where it runs) and how it fails (`AcpError`).

Plain Python, no Django: the delegate tool builds specs from stored runner configs and the site's sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from acp.updates import TOOL_PARSE_MODES
from agents.sandbox import Confinement
from agents.toolservers.launch import SandboxedLaunch

ErrorCode = Literal[
    "spawn_failed",
    "initialize_failed",
    "protocol_error",
    "crashed",
    "timeout",
    "runner_error",
    "closed",
    "busy",
]


class AcpError(Exception):
    """A runner failed; `message` is a sentence for the user, `code` a stable machine-readable kind."""

    def __init__(self, message: str, *, code: ErrorCode = "runner_error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True, kw_only=True)
class AcpRunnerSpec(SandboxedLaunch):
    """How to start one runner: the stored runner config plus the chat session's workspace (`cwd`, the
    host folder its `fs/*` requests are served from) and where it runs (`SandboxedLaunch`'s fields,
    agents/toolservers/launch.py).
    """

    command: str
    cwd: Path
    timeout_seconds: float = 300
    trusted: bool = False
    name: str = "runner"
    tool_parse_mode: str = "call_title"

    @property
    def visible_cwd(self) -> str:
        """The workspace as the runner sees it (what `session/new` tells it; `/workspace` in bubblewrap)."""
        return self.sandbox.workspace_inside(self.cwd) if self.sandbox is not None else str(self.cwd)

    def confinement(self) -> Confinement:
        """What the runner's process may see and do (agents/sandbox/children.py)."""
        return self.confined_in(self.cwd)

    def __post_init__(self) -> None:
        """Fail at construction, not halfway through a session, on a config that cannot work."""
        if not self.command:
            raise ValueError("A runner needs a command.")
        if self.timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive.")
        if self.tool_parse_mode not in TOOL_PARSE_MODES:
            raise ValueError(f"Unknown tool_parse_mode {self.tool_parse_mode!r}.")
