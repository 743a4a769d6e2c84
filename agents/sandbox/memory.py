"""The memory ceiling of one tool call (docs/protocol.md §6.6, docs/deployment.md "Memory").

The processes of one call — a `shell` command, an ACP runner, a stdio MCP server, with everything they
start — together use at most `AGENTSITE_SANDBOX_MEMORY_MB`. Where the host offers a memory cgroup that
this server may manage, each call gets a cgroup of its own with that limit (the kernel then ends a
process of the call when they reach it, and only theirs); the private `/tmp` is memory too and counts in
it. Where it does not, each process gets a data limit (RLIMIT_DATA) and the process count is lowered, so
that their sum stays under the ceiling (:func:`fallback_limits`).

Which cgroup: the server's own (from /proc/self/cgroup), or its parent (systemd's `DelegateSubgroup=`
puts the server in a leaf of the cgroup it delegates). cgroup v2: the one where `memory` can be switched on
for children (`cgroup.subtree_control`); the calls live in `<it>/agentsite/call-<pid>-<n>`. cgroup v1 (a
`memory` hierarchy of its own): `<the server's memory cgroup>/agentsite/call-<pid>-<n>`. A process joins
its call's cgroup before it runs anything: bubblewrap waits on `--block-fd` while the server moves its
first child there (agents/sandbox/process.py).

Plain Python, no Django.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from agents.sandbox.base import Limits

# Without a cgroup: at most this many processes per call, each with an equal share of the ceiling.
FALLBACK_PROCESSES = 16
GROUP_NAME = "agentsite"
_counter = itertools.count(1)


def fallback_limits(limits: Limits) -> Limits:
    """Per-process limits whose sum stays under the call's ceiling, for hosts without a memory cgroup."""
    if not limits.memory_bytes:
        return limits
    processes = min(limits.processes or FALLBACK_PROCESSES, FALLBACK_PROCESSES)
    return replace(limits, processes=processes, data_bytes=limits.memory_bytes // processes)


@dataclass(frozen=True)
class CallCgroup:
    """One call's cgroup: the processes of the call are moved here before they run anything."""

    path: Path
    version: Literal[1, 2]

    def join(self, pid: int) -> None:
        """Move `pid` (and the processes it starts from now on) into this cgroup."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def memory_exhausted(self) -> bool:
        """Whether the system ended a process of the call at the ceiling (reaching it alone only reclaims
        caches)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            return _fields((self.path / name).read_text()).get("oom_kill", 0) > 0
        except OSError:
            return False

    def remove(self) -> bool:
        """Remove the cgroup once its processes are gone; whether it is gone."""
        try:
            self.path.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True


def _fields(text: str) -> dict[str, int]:
    pairs = (line.split() for line in text.splitlines())
    return {pair[0]: int(pair[1]) for pair in pairs if len(pair) == 2 and pair[1].isdigit()}


@dataclass(frozen=True)
class MemoryCeiling:
    """Makes a cgroup with a call's ceiling for each call, under `base` (this server's `agentsite` cgroup)."""

    base: Path
    version: Literal[1, 2]

    @property
    def detail(self) -> str:
        return f"memory: a cgroup v{self.version} per call"  # shown in /healthz: no host path

    def create(self, limit_bytes: int) -> CallCgroup:
        """A new cgroup for one call whose processes use at most `limit_bytes` (OSError when refused)."""
        path = self.base / f"call-{os.getpid()}-{next(_counter)}"
        path.mkdir()
        try:
            if self.version == 2:
                (path / "memory.max").write_text(str(limit_bytes))
                with contextlib.suppress(OSError):  # no swap accounting on this host: nothing to limit
                    (path / "memory.swap.max").write_text("0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                with contextlib.suppress(OSError):
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        except OSError:
            path.rmdir()
            raise
        return CallCgroup(path, self.version)

    def sweep(self) -> int:
        """Remove the cgroups of calls whose server is gone (killed before it could); how many."""
        removed = 0
        for path in self.base.glob("call-*"):
            pid = path.name.split("-")[1]
            if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
                removed += CallCgroup(path, self.version).remove()
        return removed

    @classmethod
    def find(cls) -> MemoryCeiling | None:
        """The ceiling this host offers, or None (then :func:`fallback_limits`). Tries each place and
        creates (and removes) one call's cgroup to be sure."""
        try:
            own = Path("/proc/self/cgroup").read_text()
            mounts = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
        for version, base in candidates(own, mounts):
            try:
                ceiling = cls(base, version)
                base.mkdir(exist_ok=True)
                if version == 2:
                    _enable_memory(base)
                ceiling.sweep()
                ceiling.create(64 * 1024 * 1024).remove()
            except OSError:
                continue
            return ceiling
        return None


def candidates(own_cgroups: str, mountinfo: str) -> list[tuple[Literal[1, 2], Path]]:
    """(version, base) pairs to try, best first, from a process's /proc/self/cgroup and /proc/self/mountinfo
    (cgroup v2 only where its `cgroup.controllers` offers memory)."""
    unified = v1_memory = None
    for line in mountinfo.splitlines():
        before, _, after = line.partition(" - ")
        fields, extra = before.split(), after.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        if extra[0] == "cgroup2":
            unified = unified or Path(fields[4])
        elif extra[0] == "cgroup" and "memory" in extra[2].split(","):
            v1_memory = Path(fields[4])
    found: list[tuple[Literal[1, 2], Path]] = []
    for line in own_cgroups.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, relative = rest.partition(":")
        if number == "0" and unified is not None:
            here = unified / relative.lstrip("/")
            if "memory" in _read(here / "cgroup.controllers").split():
                found += [
                    (2, folder / GROUP_NAME)
                    for folder in (here, here.parent)
                    if folder.is_relative_to(unified)
                ]
        elif "memory" in controllers.split(",") and v1_memory is not None:
            found.append((1, v1_memory / relative.lstrip("/") / GROUP_NAME))
    return found


def _enable_memory(base: Path) -> None:
    """cgroup v2: switch the memory controller on for `base` (in its parent) and for its children."""
    for folder in (base.parent, base):
        control = folder / "cgroup.subtree_control"
        if "memory" not in _read(control).split():
            control.write_text("+memory")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
