"""Workspace confinement: the one place that decides whether a path stays inside a session's folder.

Every file tool (and the ACP client's fs methods) goes through :func:`resolve_in_workspace`,
so there is a single rule to review and test.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from agents.tools.base import ToolError


def resolve_in_workspace(workspace: Path, path: str | os.PathLike[str]) -> Path:
    """Return the real, symlink-free location of ``path`` inside ``workspace``, or raise ToolError.

    Absolute paths are refused outright (the model should think in workspace-relative
    terms), and the resolved path must lie inside the resolved workspace — which catches
    ``..`` escapes as well as symlinks (to files or directories) that point outside.
    ``..`` that stays inside (``a/../b``) is fine. A dangling symlink is resolved to the
    place it points at, so writing through it cannot escape either.
    """
    text = os.fspath(path)
    if "\x00" in text:
        raise ToolError("The path contains a NUL character.")
    if PurePosixPath(text).is_absolute() or text.startswith("~"):
        raise ToolError(
            f"The path '{text}' is outside the workspace: use a path relative to the workspace folder."
        )
    root = Path(os.path.realpath(workspace))
    resolved = Path(os.path.realpath(root / text))
    if resolved != root and not resolved.is_relative_to(root):
        raise ToolError(f"The path '{text}' is outside the workspace.")
    return resolved


def display_path(workspace: Path, resolved: Path) -> str:
    """The workspace-relative form of a resolved path, for messages the model reads."""
    root = Path(os.path.realpath(workspace))
    relative = resolved.relative_to(root).as_posix()
    return relative or "."


def give_to_workspace_owner(workspace: Path, path: Path) -> None:
    """Files and folders the server creates in a workspace belong to the workspace's owner.

    A root server runs its sandboxes as an unprivileged user who owns the workspaces
    (agents/sandbox/site.py); what the server writes there must stay writable for that user.
    """
    if os.geteuid() != 0:
        return
    owner = os.stat(workspace)
    try:
        os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=False)
    except OSError:
        pass


def make_folders(workspace: Path, folder: Path) -> None:
    """Create `folder` and its missing parents inside the workspace, owned like the workspace."""
    missing = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        give_to_workspace_owner(workspace, path)
