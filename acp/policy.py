"""Permission requests from ACP runners and the policy that answers some of them without asking.

docs/protocol.md §3.5: a runner's `session/request_permission` reaches the user, except when policy decides:
always-refused commands and paths outside the workspace are refused in every mode (even for trusted
runners); a trusted runner, or approval mode `full_access`, gets its `allow_once` option; `read_only`
gets `reject_once` (or `cancelled`). The workspace rule is the same one the file tools use.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from acp.schema import PermissionOption, ToolCallUpdate
from agents.approvals import always_refused
from agents.tools.base import ToolError
from agents.tools.workspace import resolve_in_workspace

_PATH_KEYS = ("path", "file_path", "filePath", "abs_path", "absPath", "cwd", "target", "destination")
_PATH_LIST_KEYS = ("paths", "files")
_COMMAND_KEYS = ("command", "cmd")


class PermissionOptionInfo(TypedDict):
    """One choice a runner offers, as shown to the user (`confirmation_request.options`)."""

    option_id: str
    name: str
    kind: str


@dataclass(frozen=True)
class PermissionRequest:
    """A runner asks to run a tool call; what the user (or policy) is asked to decide."""

    tool_call_id: str
    title: str | None
    kind: str | None
    raw_input: Any
    options: list[PermissionOptionInfo]
    locations: list[str] = field(default_factory=list)

    @classmethod
    def from_acp(cls, tool_call: ToolCallUpdate, options: Sequence[PermissionOption]) -> PermissionRequest:
        """Build from the parameters of a runner's `session/request_permission`."""
        return cls(
            tool_call_id=tool_call.tool_call_id,
            title=tool_call.title,
            kind=tool_call.kind,
            raw_input=tool_call.raw_input,
            options=[{"option_id": o.option_id, "name": o.name, "kind": o.kind} for o in options],
            locations=[location.path for location in tool_call.locations or []],
        )

    @property
    def command(self) -> str | None:
        """The shell command the tool call would run, when its input names one."""
        raw = self.raw_input
        if isinstance(raw, dict):
            for key in _COMMAND_KEYS:
                value = raw.get(key)
                if isinstance(value, str) and value.strip():
                    return value
                if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
                    return shlex.join(value)
        return None

    @property
    def paths(self) -> list[str]:
        """Every file path the tool call mentions (its locations and path-like input fields)."""
        found = list(self.locations)
        raw = self.raw_input
        if isinstance(raw, dict):
            found += [raw[key] for key in _PATH_KEYS if isinstance(raw.get(key), str)]
            for key in _PATH_LIST_KEYS:
                value = raw.get(key)
                if isinstance(value, list):
                    found += [item for item in value if isinstance(item, str)]
        return found

    def option_of_kind(self, *kinds: str) -> str | None:
        """The id of the first offered option whose kind is one of `kinds`, in the order given."""
        for kind in kinds:
            for option in self.options:
                if option["kind"] == kind:
                    return option["option_id"]
        return None

    def has_option(self, option_id: str | None) -> bool:
        return option_id is not None and any(o["option_id"] == option_id for o in self.options)


@dataclass(frozen=True)
class PermissionDecision:
    """What policy answered: the selected option, or None for the `cancelled` outcome."""

    option_id: str | None
    approved: bool
    reason: str


def decide_permission(
    request: PermissionRequest,
    *,
    workspace: Path,
    trusted: bool,
    approval_mode: str = "ask",
    visible: str | None = None,
) -> PermissionDecision | None:
    """Policy's answer to a runner's permission request, or None when the user must be asked.
    `visible`: where the runner sees its workspace (`/workspace` in the sandbox)."""
    refusal = refusal_reason(request, workspace=workspace, visible=visible)
    if refusal is not None:
        return _reject(request, refusal)
    if trusted or approval_mode == "full_access":
        allow = request.option_of_kind("allow_once", "allow_always")
        if allow is not None:
            why = "trusted runner" if trusted else "approval mode full_access"
            return PermissionDecision(option_id=allow, approved=True, reason=f"Allowed by policy: {why}.")
    if approval_mode == "read_only":
        return _reject(request, "Refused by policy: approval mode read_only.")
    return None


def refusal_reason(request: PermissionRequest, *, workspace: Path, visible: str | None = None) -> str | None:
    """Why this request is refused in every mode (forbidden command, path outside), or None."""
    command = request.command
    if command is not None:
        reason = always_refused(command)
        if reason is not None:
            return f"Refused by policy: {reason}"
    for path in request.paths:
        try:
            confine_path(workspace, path, visible=visible)
        except ToolError as exc:
            return f"Refused by policy: {exc}"
    return None


def _reject(request: PermissionRequest, reason: str) -> PermissionDecision:
    return PermissionDecision(option_id=request.option_of_kind("reject_once"), approved=False, reason=reason)


def confine_path(workspace: Path, path: str, *, visible: str | None = None) -> Path:
    """Resolve a runner's path inside the workspace, or raise ToolError.

    ACP runners speak in absolute paths (their cwd is the workspace, which they may see at another
    place, `visible`: `/workspace` in the sandbox), while the file tools' rule refuses absolute paths;
    an absolute path is therefore first made workspace-relative, which fails for anything not under
    the workspace, and then checked by the shared rule (symlinks, ..).
    """
    if os.path.isabs(path):
        path = _workspace_relative(workspace, path, visible)
    return resolve_in_workspace(workspace, path)


def _workspace_relative(workspace: Path, path: str, visible: str | None) -> str:
    normalized = os.path.normpath(path)
    roots = [*_root_spellings(workspace), *([os.path.normpath(visible)] if visible else [])]
    for root in roots:
        if normalized == root:
            return "."
        if normalized.startswith(root.rstrip(os.sep) + os.sep):
            return normalized[len(root.rstrip(os.sep)) + 1 :]
    raise ToolError(f"The path '{path}' is outside the workspace.")


def _root_spellings(workspace: Path) -> Iterable[str]:
    """The workspace as given and with symlinks resolved: runners may see either."""
    yield os.path.normpath(os.path.abspath(workspace))
    yield os.path.realpath(workspace)
