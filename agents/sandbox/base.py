"""What a sandboxed process may see and do, and the interface both sandboxes implement.

Plain Python, no Django: tools and the ACP client get a :class:`Sandbox` injected (the site's, chosen
at start-up in :mod:`agents.sandbox.site`) and describe each process with a :class:`Confinement`.
"""

from __future__ import annotations

import contextlib
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from agents.sandbox.memory import CallCgroup
    from agents.sandbox.network import NetworkStack
    from agents.sandbox.startup import Spawning

SandboxMode = Literal["bwrap", "none"]

NO_SANDBOX_MESSAGE = (
    "This server has no sandbox for commands, and running them without one needs the permission "
    "'agents.run_unsandboxed', which you do not hold. Nothing was run; ask the site's administrator."
)


class SandboxRefused(Exception):
    """The process was not started: no sandbox here and the user may not run without one, or the
    program cannot be made visible inside. Its message is a sentence for the user and the model."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one call (None: no limit). Per process, applied inside the sandbox with `prlimit`:
    CPU seconds, the process count, file size and (where no cgroup holds `memory_bytes`, see
    agents/sandbox/memory.py) a data limit. `memory_bytes`: what the call's processes use together;
    `tmp_bytes`: the size of the private /tmp."""

    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    processes: int | None = None
    file_size_bytes: int | None = None
    data_bytes: int | None = None  # per process (RLIMIT_DATA)
    tmp_bytes: int | None = None

    def prlimit_options(self, *, processes: bool = True) -> list[str]:
        """`prlimit` options for these limits (soft = hard), core dumps always off.

        `processes=False` leaves the process count alone: without a user namespace of its own the
        count would include every process of the server's user.
        """
        options = ["--core=0"]
        for name, value in (
            ("cpu", self.cpu_seconds),
            ("data", self.data_bytes),
            ("nproc", self.processes if processes else None),
            ("fsize", self.file_size_bytes),
        ):
            if value:
                options.append(f"--{name}={value}:{value}")
        return options


NO_LIMITS = Limits()


@dataclass(frozen=True, kw_only=True)
class Confinement:
    """One process's world: its workspace (the working directory and the only writable place besides
    a private /tmp and, for runners, a persistent `home`), its environment, network and limits.

    `env` is the program's whole environment; the sandbox adds HOME (and USER/LOGNAME, TMPDIR) to it.
    `read_only` lists host paths the program needs to see (its executable, interpreter prefix and
    configured `sandbox_paths`). `may_run_unsandboxed`: the user holds `agents.run_unsandboxed`.
    `empty_cwd`: the working directory is an empty folder nobody writes to, not the workspace (which stays
    reachable: at `/workspace` in the sandbox) — for programs holding secrets that load code from their
    working directory (docs/protocol.md §6.6).
    """

    workspace: Path
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = NO_LIMITS
    network: bool = False
    home: Path | None = None
    read_only: tuple[Path, ...] = ()
    may_run_unsandboxed: bool = False
    empty_cwd: bool = False


@dataclass(frozen=True)
class Launch:
    """How to start one process: the command line, environment, directory and OS user.

    `hidden_args`: arguments handed to the program on a descriptor (bubblewrap's `--args FD`) rather than
    on its command line, where every process that can read `/proc/<pid>/cmdline` — the sandbox's own, for
    its PID 1 — would see them. `cgroup`: the call's memory cgroup, joined before the program runs
    anything (agents/sandbox/startup.py); `network`: the user-mode stack its namespace gets before that.
    The descriptor numbers stand in the arguments as placeholders (`startup.ARGS_FD`, ...).
    """

    argv: list[str]
    env: dict[str, str]
    cwd: str
    sandboxed: bool
    user: int | None = None
    group: int | None = None
    hidden_args: tuple[str, ...] = ()
    cgroup: CallCgroup | None = None
    network: NetworkStack | None = None

    def popen_options(self) -> dict[str, Any]:
        """Keyword arguments for `subprocess.Popen` / asyncio's subprocess functions."""
        options: dict[str, Any] = {"env": self.env, "cwd": self.cwd, "start_new_session": True}
        if self.user is not None:
            options.update(user=self.user, group=self.group, extra_groups=[])
        return options

    @contextlib.contextmanager
    def spawning(self) -> Iterator[Spawning]:
        """Its command line, Popen options and the steps after it started, valid while the block runs."""
        from agents.sandbox.startup import Spawning

        spawning = Spawning(self)
        try:
            yield spawning
        finally:
            spawning.close()


class Sandbox(ABC):
    """Turns a program and its confinement into a :class:`Launch`.

    `limits` are the site's defaults for one command; callers pass them (or a variant: runners run
    long and get no CPU-seconds limit) in the confinement.
    """

    mode: ClassVar[SandboxMode]

    def __init__(self, *, limits: Limits = NO_LIMITS, detail: str = "") -> None:
        self.limits = limits
        self.detail = detail

    @abstractmethod
    def launch(self, argv: Sequence[str], confinement: Confinement) -> Launch:
        """The command line that runs `argv` confined; SandboxRefused when it must not run."""

    @abstractmethod
    def workspace_inside(self, workspace: Path) -> str:
        """Where the process sees its workspace (what a runner is told as its `cwd`)."""

    def status(self) -> dict[str, Any]:
        """For /healthz and the admin."""
        return {"mode": self.mode, "detail": self.detail}


class NoSandbox(Sandbox):
    """`AGENTSITE_SANDBOX=none` (or `auto` where bubblewrap does not work): processes run as the server's
    user, in their own process group, with the limits `prlimit` can set — and only for users who hold
    `agents.run_unsandboxed`. What such a process starts with `setsid` is not contained."""

    mode = "none"

    def __init__(
        self,
        *,
        limits: Limits = NO_LIMITS,
        detail: str = "",
        prlimit: str | None = None,
        empty_dir: Path | None = None,
    ) -> None:
        """`empty_dir`: the empty folder a process with `empty_cwd` starts in (default: a new one, 0555)."""
        super().__init__(limits=limits, detail=detail)
        self._prlimit = prlimit
        if empty_dir is None:
            empty_dir = Path(tempfile.mkdtemp(prefix="agentsite-empty-"))
            empty_dir.chmod(0o555)
        self.empty_dir = empty_dir

    def launch(self, argv: Sequence[str], confinement: Confinement) -> Launch:
        if not confinement.may_run_unsandboxed:
            raise SandboxRefused(NO_SANDBOX_MESSAGE)
        command = list(argv)
        if self._prlimit is not None:
            command = [self._prlimit, *confinement.limits.prlimit_options(processes=False), "--", *command]
        home = confinement.home or confinement.workspace
        env = {**confinement.env, "HOME": str(home)}
        cwd = self.empty_dir if confinement.empty_cwd else confinement.workspace
        return Launch(argv=command, env=env, cwd=str(cwd), sandboxed=False)

    def workspace_inside(self, workspace: Path) -> str:
        return str(workspace)
