"""Disk quotas: what a workspace, and all of one user's workspaces together, may hold (docs/protocol.md
§6.6, `AGENTSITE_WORKSPACE_QUOTA_MB`, `AGENTSITE_USER_DISK_QUOTA_MB`).

Usage is what the files take on disk (`st_blocks`, so a sparse file counts what it really holds), walked
from the workspace's open handle with `os.scandir` on descriptors (a folder swapped for a symlink meanwhile
is never followed) and kept per workspace for a few seconds: the server's own writes adjust the kept
figure, a shell command's end measures it again, so a request does not walk the tree each time.

Django-free: the caller (chat/quota.py) says whose workspaces count together and the limits.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import os
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agents.tools.base import ToolContext, ToolError
from audit.actions import QUOTA_EXCEEDED

MB = 1024 * 1024
CACHE_SECONDS = 10.0  # a measure is kept this long (other processes' writes show up after it at most)
CACHE_KEPT = 10_000  # workspaces whose measure is kept
WATCH_SECONDS = 0.5  # a command's workspace is measured this often (less often when a measure takes long)
_HELD = 64  # folders held open on the way down; deeper ones are left and found again through ".."
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Scope = Literal["workspace", "user"]


class QuotaExceeded(ToolError):
    """A write that would pass a quota (REST 413 `quota_exceeded`; a tool result with is_error)."""

    def __init__(self, message: str, *, scope: Scope, used: int, limit: int) -> None:
        super().__init__(message)
        self.scope = scope
        self.used = used
        self.limit = limit

    def details(self) -> dict[str, object]:
        return {"scope": self.scope, "used_bytes": self.used, "limit_bytes": self.limit}


def tree_bytes(root: Path) -> int:
    """The bytes the folder `root` and everything in it take on disk (a hard-linked file once; 0 when it
    does not exist). Never follows a symlink, also when a folder is swapped for one during the walk."""
    try:
        fd = os.open(root, _DIR)
    except FileNotFoundError:
        return 0
    seen: set[tuple[int, int]] = set()
    info = os.fstat(fd)
    total = info.st_blocks * 512
    # One frame per folder on the way down: (descriptor or -1 when let go, (dev, inode), subfolders left)
    frames: list[tuple[int, tuple[int, int], list[str]]] = []
    size, subfolders = _scan(fd, seen)
    total += size
    frames.append((fd, (info.st_dev, info.st_ino), subfolders))
    while frames:
        fd, ident, todo = frames[-1]
        if not todo:
            frames.pop()
            _climb(fd, frames)
            continue
        name = todo.pop()
        try:
            child = os.open(name, _DIR, dir_fd=fd)
        except OSError:
            continue  # removed, or swapped for a link or a file meanwhile
        if len(frames) >= _HELD:  # hold at most _HELD descriptors: this one is found again through ".."
            os.close(fd)
            frames[-1] = (-1, ident, todo)
        size, subfolders = _scan(child, seen)
        total += size
        child_info = os.fstat(child)
        frames.append((child, (child_info.st_dev, child_info.st_ino), subfolders))
    return total


def _climb(fd: int, frames: list[tuple[int, tuple[int, int], list[str]]]) -> None:
    """Leave the folder `fd`; when its parent was let go, open it again through ".." — if it is still
    the same folder (a folder moved meanwhile ends that part of the walk: what it held is counted
    at the next measure)."""
    if frames and frames[-1][0] == -1:
        _, ident, todo = frames[-1]
        try:
            parent = os.open("..", _DIR, dir_fd=fd)
        except OSError:
            parent = -1
        if parent != -1:
            info = os.fstat(parent)
            if (info.st_dev, info.st_ino) == ident:
                frames[-1] = (parent, ident, todo)
            else:
                os.close(parent)
                parent = -1
        if parent == -1:
            while frames and frames[-1][0] == -1:
                frames.pop()
    os.close(fd)


def _scan(fd: int, seen: set[tuple[int, int]]) -> tuple[int, list[str]]:
    """The bytes of the entries of folder `fd` (a subfolder's own blocks included) and its subfolders."""
    total, subfolders = 0, []
    try:
        listing = os.scandir(fd)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EACCES):
            return 0, []
        raise
    with listing:
        for entry in listing:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                subfolders.append(entry.name)
            elif info.st_nlink > 1:
                key = (info.st_dev, info.st_ino)
                if key in seen:
                    continue
                seen.add(key)
            total += info.st_blocks * 512
    return total, subfolders


class UsageCache:
    """The measured usage of each workspace, kept `seconds` (at most `kept` workspaces, oldest first out)."""

    def __init__(self, *, seconds: float = CACHE_SECONDS, kept: int = CACHE_KEPT) -> None:
        self.seconds = seconds
        self.kept = kept
        self._measures: collections.OrderedDict[Path, tuple[int, float]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, workspace: Path) -> int:
        with self._lock:
            kept = self._measures.get(workspace)
        if kept is not None and time.monotonic() - kept[1] < self.seconds:
            return kept[0]
        return self.measure(workspace)

    def measure(self, workspace: Path) -> int:
        used = tree_bytes(workspace)
        with self._lock:
            self._measures[workspace] = (used, time.monotonic())
            self._measures.move_to_end(workspace)
            while len(self._measures) > self.kept:
                self._measures.popitem(last=False)
        return used

    def adjust(self, workspace: Path, delta: int) -> None:
        """The server wrote (or freed) `delta` bytes there: the kept figure follows, without a walk."""
        with self._lock:
            kept = self._measures.get(workspace)
            if kept is not None:
                self._measures[workspace] = (max(0, kept[0] + delta), kept[1])

    def forget(self, workspace: Path) -> None:
        with self._lock:
            self._measures.pop(workspace, None)

    def reset(self) -> None:
        with self._lock:
            self._measures.clear()


usage = UsageCache()


@dataclass(frozen=True)
class DiskQuota:
    """The limits on one workspace (bytes; None: no limit) and the other workspaces of its owner that count
    with it. Its methods walk the disk: call them in a worker thread from async code."""

    workspace: Path
    workspace_limit: int | None
    user_limit: int | None
    others: tuple[Path, ...] = ()

    @property
    def limited(self) -> bool:
        return self.workspace_limit is not None or self.user_limit is not None

    def used(self, *, fresh: bool = False) -> tuple[int, int]:
        """(this workspace, all the owner's workspaces) in bytes; `fresh`: this one measured now."""
        mine = usage.measure(self.workspace) if fresh else usage.get(self.workspace)
        if self.user_limit is None:
            return mine, mine
        return mine, mine + sum(usage.get(other) for other in self.others)

    def check(self, adding: int, *, freeing: int = 0) -> None:
        """QuotaExceeded when writing `adding` bytes (in place of `freeing`) would pass a quota, or a quota
        is passed already and the write adds anything."""
        if self.workspace_limit is None and self.user_limit is None:
            return
        mine, everything = self.used()
        growth = adding - freeing
        for scope, used, limit in (
            ("workspace", mine, self.workspace_limit),
            ("user", everything, self.user_limit),
        ):
            if limit is not None and (used + growth > limit or (used >= limit and adding > 0)):
                raise exceeded(scope, used, limit, adding=growth)  # type: ignore[arg-type]

    def room(self) -> int | None:
        """How many bytes may still be written (None: no limit)."""
        if self.workspace_limit is None and self.user_limit is None:
            return None
        mine, everything = self.used()
        pairs = ((mine, self.workspace_limit), (everything, self.user_limit))
        return max(0, min(limit - used for used, limit in pairs if limit is not None))

    def passed(self, mine: int, everything: int, *, before: tuple[int, int] = (0, 0)) -> QuotaExceeded | None:
        """The quota that usage (`mine`, `everything`) passed and grew beyond since `before`, or None: a
        command may go on while it only frees space in a workspace over its quota."""
        for scope, used, was, limit in (
            ("workspace", mine, before[0], self.workspace_limit),
            ("user", everything, before[1], self.user_limit),
        ):
            if limit is not None and used > max(limit, was):
                return exceeded(scope, used, limit)  # type: ignore[arg-type]
        return None

    def wrote(self, delta: int) -> None:
        usage.adjust(self.workspace, delta)

    def changed(self) -> None:
        usage.forget(self.workspace)


def exceeded(scope: Scope, used: int, limit: int, *, adding: int = 0) -> QuotaExceeded:
    """The refusal, in words for the user and the model: which quota, how full, what to do."""
    whose = "the workspace's" if scope == "workspace" else "your"
    holding = (
        f"the workspace holds {_mb(used)} of its {_mb(limit)} quota"
        if scope == "workspace"
        else f"your workspaces together hold {_mb(used)} of your {_mb(limit)} quota"
    )
    if adding > 0 and used < limit:
        message = f"Writing {adding} more bytes would pass {whose} disk quota: {holding}."
    else:
        message = (
            f"The disk quota is used up: {holding}. Nothing more can be written until files are deleted."
        )
    return QuotaExceeded(message, scope=scope, used=used, limit=limit)


def _mb(count: int) -> str:
    if count < MB:
        return f"{-(-count // 1024)} KB"
    return f"{count / MB:.1f} MB" if count % MB else f"{count // MB} MB"


class UsageWatch:
    """Watches the workspace while a command runs (agents/tools/shell.py): `stop` is set as soon as the
    usage passes a quota and grew beyond what it was when the command started (so a command that only
    deletes files may run in a workspace over its quota)."""

    def __init__(self, quota: DiskQuota) -> None:
        self.quota = quota
        self.before = (0, 0)
        self.passed: QuotaExceeded | None = None

    async def start(self) -> None:
        self.before = await asyncio.to_thread(self.quota.used)

    async def watch(self, stop: asyncio.Event) -> None:
        pause = WATCH_SECONDS
        while self.passed is None:
            await asyncio.sleep(pause)
            started = time.monotonic()
            await self._look()
            pause = max(WATCH_SECONDS, 4 * (time.monotonic() - started))
        stop.set()

    async def end(self) -> QuotaExceeded | None:
        """Measured once more when the command ended: what passed a quota, or None."""
        if self.passed is None:
            await self._look()
        return self.passed

    async def _look(self) -> None:
        mine, everything = await asyncio.to_thread(self.quota.used, fresh=True)
        self.passed = self.quota.passed(mine, everything, before=self.before)


async def quota_of(ctx: ToolContext) -> DiskQuota | None:
    """The call's disk quota (None: its caller set none)."""
    return await ctx.disk_quota() if ctx.disk_quota is not None else None


async def refused(ctx: ToolContext, error: QuotaExceeded, *, tool: str, what: str) -> QuotaExceeded:
    """Record a refusal in the audit trail (`quota.exceeded`, docs/protocol.md §6.4) and return it."""
    if ctx.audit is not None:
        details = {**error.details(), "tool": tool, "what": what, "session_id": ctx.session_id}
        await ctx.audit(QUOTA_EXCEEDED, summary=f"{tool}: {what} refused: {error}", details=details)
    return error
