"""Workspace confinement: the one place that decides whether a path stays inside a session's folder.

Every file tool (and the ACP client's fs methods) goes through :func:`resolve_in_workspace`,
so there is a single rule to review and test.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
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
    with open_folder(workspace, folder, create=True):
        pass


@contextlib.contextmanager
def open_folder(workspace: Path, folder: Path, *, create: bool = False) -> Iterator[int]:
    """A descriptor of `folder` (a resolved path inside the workspace), reached one name at a time from
    the workspace's root without following a symlink; missing folders are made when `create`.

    Between a path's check and its use, a command of the same session may swap a folder on the way for
    a symlink that leads outside. Whatever is then opened, renamed or removed relative to this
    descriptor (`dir_fd=`) stays where the check said: a swapped folder is refused, never followed.
    """
    root = Path(os.path.realpath(workspace))
    if folder != root and not folder.is_relative_to(root):
        raise ToolError(f"The folder '{folder}' is outside the workspace.")
    owner = os.stat(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in folder.relative_to(root).parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                    _give(owner, name, fd)
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                raise  # nothing there (a missing folder without `create`): the caller says so
            except OSError:  # ELOOP or ENOTDIR: a symlink or a file where a folder was
                raise ToolError(
                    f"'{display_path(root, folder)}' is not a folder inside the workspace."
                ) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _give(owner: os.stat_result, name: str, folder_fd: int) -> None:
    """give_to_workspace_owner for a name in an open folder."""
    if os.geteuid() == 0:
        with contextlib.suppress(OSError):
            os.chown(name, owner.st_uid, owner.st_gid, dir_fd=folder_fd, follow_symlinks=False)


def write_inside(workspace: Path, target: Path, data: bytes) -> None:
    """Create or overwrite the file `target` (resolved, inside the workspace) with `data`, its folders
    made as needed; never through a symlink, owned like the workspace."""
    with open_folder(workspace, target.parent, create=True) as folder:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        fd = os.open(target.name, flags, 0o644, dir_fd=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        _give(os.stat(workspace), target.name, folder)


def open_inside(workspace: Path, target: Path) -> int:
    """A read-only descriptor of the file `target` (resolved, inside the workspace), opened without
    following a symlink swapped in since the check (and never blocking on a FIFO). OSError when it
    cannot be opened, ToolError when it is not a regular file inside."""
    with open_folder(workspace, target.parent) as folder:
        fd = os.open(target.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(f"'{display_path(workspace, target)}' is not a regular file.")
    return fd
