"""Workspace confinement: the one place that reaches a session's files (docs/architecture.md).

Every file tool, the workspace REST API (chat/files_api.py), the ACP client's fs methods and the files an
MCP server returns reach the workspace through :class:`WorkspaceDir`: a path is resolved from an open
handle of the workspace folder, one name at a time (`os.open(name, O_NOFOLLOW | O_DIRECTORY, dir_fd=…)`),
and what is finally listed, read, written, replaced or deleted is reached relative to the handle of its
folder. Nothing is checked by its path and then used by its path: a sandboxed command of the same
session may swap any folder for a symlink at any moment, and the kernel is never asked to follow one.

Symlinks inside the workspace are followed by this walk, not by the kernel: a relative target is walked
from the link's folder, an absolute one only when it names the workspace (as the server or the sandbox,
`/workspace`, sees it); `..` past the workspace's root or any other absolute target is refused
(:class:`PathOutside`). Listings show a symlink as a symlink and never look behind it (docs/protocol.md,
"Workspace files").
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agents.tools.base import ToolError

SANDBOX_WORKSPACE = "/workspace"  # where a sandboxed process sees it (agents/sandbox/bwrap.py)
MAX_LINKS = 40  # symlinks followed in one path, as the kernel's own limit
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # never blocks on a FIFO
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class PathOutside(ToolError):
    """Absolute, `..` out of the workspace, or a symlink that leads out (REST 400 `invalid_path`)."""


class PathMissing(ToolError):
    """Nothing at that path (REST 404 `not_found`)."""


class NotAFolder(ToolError):
    """A file (or other non-folder) where a folder is needed (REST 400 `not_a_directory`)."""


class NotAFile(ToolError):
    """A folder or a special file where a regular file is needed (REST 400 `not_a_file`)."""


class IsAFolder(NotAFile):
    """A folder where a file is needed."""


@dataclass(frozen=True)
class Entry:
    """One entry of a listing, as found (a symlink is a symlink: never what it points to)."""

    name: str
    kind: str  # "file" | "directory" | "symlink" | "other"
    size: int | None  # files only
    mtime: float
    info: os.stat_result


def relative_parts(path: str | os.PathLike[str]) -> list[str]:
    """The names of a workspace-relative path, normalised (`a/./b/../c` → `a`, `c`); raises PathOutside
    for absolute paths, `~`, NUL and `..` that leaves the workspace. `[]` is the workspace itself."""
    text = os.fspath(path)
    if "\x00" in text:
        raise PathOutside("The path contains a NUL character.")
    if PurePosixPath(text).is_absolute() or text.startswith("~"):
        raise PathOutside(
            f"The path '{text}' is outside the workspace: use a path relative to the workspace folder."
        )
    normal = posixpath.normpath(text or ".")
    if normal == "." or normal == "":
        return []
    parts = normal.split("/")
    if parts[0] == "..":
        raise PathOutside(f"The path '{text}' is outside the workspace.")
    return parts


class WorkspaceDir:
    """A walk from the workspace's open handle; `fd` is the folder it stands in, `shown` its
    workspace-relative path. Use as a context manager: every descriptor it opened is closed on exit."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.root = os.open(workspace, _DIR & ~os.O_NOFOLLOW)  # the server's own folder, never a user's link
        self.stack: list[tuple[str, int]] = []  # (name, descriptor) of each folder below the root
        self.links = 0
        self.retries = 0

    def __enter__(self) -> WorkspaceDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._to_root()
        os.close(self.root)

    @property
    def fd(self) -> int:
        return self.stack[-1][1] if self.stack else self.root

    def shown(self, name: str | None = None) -> str:
        names = [entry[0] for entry in self.stack] + ([name] if name else [])
        return "/".join(names) or "."

    # -- walking ---------------------------------------------------------------------------------

    def folder(self, path: str | os.PathLike[str], *, create: bool = False) -> WorkspaceDir:
        """Stand in the folder at `path` (made with its parents when `create`)."""
        self._walk(relative_parts(path), create=create)
        return self

    def parent_of(self, path: str | os.PathLike[str], *, create: bool = False) -> str:
        """Stand in the folder of `path`'s last name and return that name, not followed (PUT, DELETE)."""
        parts = relative_parts(path)
        if not parts:
            raise PathOutside("The workspace itself cannot be replaced or deleted.")
        self._walk(parts[:-1], create=create)
        return parts[-1]

    def _walk(self, parts: list[str], *, create: bool) -> None:
        todo = list(reversed(parts))
        while todo:
            name = todo.pop()
            if name in ("", "."):
                continue
            if name == "..":
                self._up()
                continue
            self._down(name, todo, create=create)

    def _up(self) -> None:
        if not self.stack:
            raise PathOutside("The path leads outside the workspace.")
        _, fd = self.stack.pop()
        os.close(fd)

    def _to_root(self) -> None:
        while self.stack:
            os.close(self.stack.pop()[1])

    def _down(self, name: str, todo: list[str], *, create: bool) -> None:
        """Go into the folder `name` (a symlink puts its target's names in front of `todo`)."""
        try:
            child = os.open(name, _DIR, dir_fd=self.fd)
        except FileNotFoundError:
            if not create:
                raise PathMissing(f"There is no folder '{self.shown(name)}' in the workspace.") from None
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=self.fd)
                self.give(name)
            todo.append(name)  # opened on the next round (or found to be a link or a file by then)
            return
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            if not self._follow(name, todo):
                if exc.errno == errno.ENOTDIR or self._changed():
                    raise NotAFolder(f"'{self.shown(name)}' is not a folder.") from None
                todo.append(name)  # a link a moment ago, not now: look again
            return
        self.stack.append((name, child))

    def _changed(self) -> bool:
        """An entry changed between two looks (a link, then not): True once that happened too often."""
        self.retries += 1
        return self.retries > MAX_LINKS

    def _to_last(self, todo: list[str], *, create: bool) -> str:
        """Go through every name of `todo` but the last, which it returns ("." : the folder itself)."""
        while True:
            name = todo.pop()
            if name == "..":
                self._up()
                name = "."
            if not todo:
                return name or "."
            if name not in ("", "."):
                self._down(name, todo, create=create)

    def _follow(self, name: str, todo: list[str]) -> bool:
        """If `name` here is a symlink, put its target's names in front of `todo` (an absolute target
        from the root); False when it is not a symlink. PathOutside when it leads out."""
        try:
            target = os.readlink(name, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # not a symlink
                return False
            if exc.errno == errno.ENOENT:
                raise PathMissing(f"There is no '{self.shown(name)}' in the workspace.") from None
            raise
        self.links += 1
        if self.links > MAX_LINKS:
            raise PathOutside(f"'{self.shown(name)}': too many levels of symbolic links.")
        if target.startswith("/"):
            inside = self._inside_part(target)
            if inside is None:
                raise PathOutside(f"'{self.shown(name)}' is a symlink that leads outside the workspace.")
            self._to_root()
            target = inside
        todo.extend(reversed([part for part in target.split("/") if part] or ["."]))
        return True

    def _inside_part(self, target: str) -> str | None:
        """An absolute link target as a path from the workspace's root, or None when it is not inside."""
        normal = posixpath.normpath(target)
        for root in (os.path.abspath(self.workspace), os.path.realpath(self.workspace), SANDBOX_WORKSPACE):
            root = posixpath.normpath(root)
            if normal == root:
                return "."
            if normal.startswith(root + "/"):
                return normal[len(root) + 1 :]
        return None

    # -- at the end of the walk ------------------------------------------------------------------

    def open_file(self, path: str | os.PathLike[str]) -> tuple[int, str]:
        """A read-only descriptor of the regular file at `path` (symlinks inside followed) and its shown
        path. PathMissing, NotAFile, NotAFolder, PathOutside."""
        todo = list(reversed(relative_parts(path))) or ["."]
        while True:
            name = self._to_last(todo, create=False)
            if name == ".":
                raise IsAFolder(f"'{self.shown()}' is a folder.")
            try:
                fd = os.open(name, _READ, dir_fd=self.fd)
            except FileNotFoundError:
                raise PathMissing(f"There is no file '{self.shown(name)}' in the workspace.") from None
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                if not self._follow(name, todo):
                    if self._changed():
                        raise
                    todo.append(name)  # a link a moment ago, not now: look again
                continue
            return self._regular(fd, name), self.shown(name)

    def _regular(self, fd: int, name: str) -> int:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            return fd
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsAFolder(f"'{self.shown(name)}' is a folder.")
        raise NotAFile(f"'{self.shown(name)}' is not a regular file.")

    def open_for_writing(self, path: str | os.PathLike[str]) -> tuple[int, str, bool]:
        """A write descriptor of the regular file at `path`, created (with its folders) when missing and
        not truncated; a symlink inside is followed, one out refused. (descriptor, shown path, created)."""
        todo = list(reversed(relative_parts(path))) or ["."]
        while True:
            name = self._to_last(todo, create=True)
            if name == ".":
                raise IsAFolder(f"'{self.shown()}' is a folder; give a file path.")
            try:
                fd = os.open(name, _WRITE | os.O_EXCL, 0o644, dir_fd=self.fd)
            except FileExistsError:
                pass
            else:
                self.give(name)
                return fd, self.shown(name), True
            try:
                fd = os.open(name, _WRITE & ~os.O_CREAT, dir_fd=self.fd)
            except FileNotFoundError:  # removed meanwhile: create it
                if self._changed():
                    raise
                todo.append(name)
                continue
            except OSError as exc:
                if exc.errno == errno.EISDIR:
                    raise IsAFolder(f"'{self.shown(name)}' is a folder; give a file path.") from None
                if exc.errno != errno.ELOOP:
                    raise
                if not self._follow(name, todo):
                    if self._changed():
                        raise
                    todo.append(name)  # a link a moment ago, not now: look again
                continue
            return self._regular(fd, name), self.shown(name), False

    def entries(self) -> list[Entry]:
        """The entries of the folder it stands in, each as found (`lstat`), unsorted."""
        found = []
        with os.scandir(self.fd) as listing:
            for item in listing:
                try:
                    info = item.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed meanwhile
                found.append(_entry(item.name, info))
        return found

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry `name` of this folder as it is (None: nothing there)."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def give(self, name: str) -> None:
        """What the server creates in a workspace belongs to the workspace's owner: a root server runs its
        sandboxes as an unprivileged user who owns the workspaces (agents/sandbox/site.py)."""
        if os.geteuid() != 0:
            return
        owner = os.fstat(self.root)
        with contextlib.suppress(OSError):
            os.chown(name, owner.st_uid, owner.st_gid, dir_fd=self.fd, follow_symlinks=False)


def _entry(name: str, info: os.stat_result) -> Entry:
    kind = "other"
    if stat.S_ISLNK(info.st_mode):
        kind = "symlink"
    elif stat.S_ISDIR(info.st_mode):
        kind = "directory"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    return Entry(name, kind, info.st_size if kind == "file" else None, info.st_mtime, info)


# -- the whole operations, for callers that need one step ------------------------------------------


def list_folder(workspace: Path, path: str | os.PathLike[str]) -> tuple[str, list[Entry]]:
    """The shown path of the folder at `path` and its entries (symlinks not followed), unsorted."""
    with WorkspaceDir(workspace) as walk:
        walk.folder(path)
        return walk.shown(), walk.entries()


def open_file(workspace: Path, path: str | os.PathLike[str]) -> tuple[int, str]:
    """A read-only descriptor of the regular file at `path` and its shown path (the caller closes it)."""
    with WorkspaceDir(workspace) as walk:
        return walk.open_file(path)


def write_file(workspace: Path, path: str | os.PathLike[str], data: bytes) -> tuple[str, int]:
    """Create or overwrite the file at `path` with `data` (folders made as needed); its shown path and
    the bytes the old content held on disk (freed)."""
    with WorkspaceDir(workspace) as walk:
        fd, shown, _ = walk.open_for_writing(path)
    with os.fdopen(fd, "wb") as handle:
        freed = os.fstat(fd).st_blocks * 512
        handle.truncate(0)
        handle.write(data)
    return shown, freed


@contextlib.contextmanager
def parent_folder(
    workspace: Path, path: str | os.PathLike[str], *, create: bool = False
) -> Iterator[tuple[WorkspaceDir, str]]:
    """The open folder of `path`'s last name, and that name (not followed): for replacing and deleting
    an entry itself."""
    with WorkspaceDir(workspace) as walk:
        name = walk.parent_of(path, create=create)
        yield walk, name


def resolve_in_workspace(workspace: Path, path: str | os.PathLike[str]) -> Path:
    """Where `path` would be, checked only (ACP permission requests name paths that may not exist yet):
    a Path inside the workspace, or PathOutside. Never used to reach a file — that is the walk above."""
    text = os.fspath(path)
    relative_parts(text)
    root = Path(os.path.realpath(workspace))
    resolved = Path(os.path.realpath(root / text))
    if resolved != root and not resolved.is_relative_to(root):
        raise PathOutside(f"The path '{text}' is outside the workspace.")
    return resolved
