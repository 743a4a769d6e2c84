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
