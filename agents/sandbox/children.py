"""Long-lived children of tools ("runners": ACP agents, stdio MCP servers): spawn one in its own process
group through the sandbox, drain its stderr, end the whole group.

A runner is third-party code that may start helpers of its own (node, shells, language servers). Running
it as the leader of a fresh process group lets us signal everything it started at once, so closing a
session never leaves an orphan behind; and each one is recorded while it runs, so that those of a server
that was killed are ended when a server starts again (:func:`sweep_orphans`). Plain asyncio, no Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from agents.sandbox import Confinement, Sandbox, SandboxRefused, start_process
from agents.sandbox.base import NO_LIMITS
from agents.sandbox.memory import CallCgroup
from agents.sandbox.process import release_cgroup

# The only variables a runner inherits from the server: enough to behave like a terminal tool, never the
# server's secrets (API keys, SECRET_KEY, DATABASE_URL ...) nor its PATH (it names the server's own
# folders, docs/protocol.md §6.1): a runner's PATH is a neutral one plus the `bin/` folders of its
# program's installation.
BASE_ENV_NAMES: tuple[str, ...] = ("LANG", "TERM")
NEUTRAL_PATH = "/usr/local/bin:/usr/bin:/bin"
# No module a user can place in the workspace (or the runner's HOME) is imported in place of the program's
# own (docs/protocol.md §6.6): Python puts neither the working directory, the script's folder nor the user
# site-packages on sys.path. Set after the configured variables: a configuration cannot switch it off.
PLANT_PROOF_ENV = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"}
# Search paths whose relative or empty entries would mean the working directory.
_SEARCH_PATHS = ("PATH", "PYTHONPATH", "NODE_PATH")
STDOUT_LINE_LIMIT = 50 * 1024 * 1024  # one JSON-RPC frame may carry a whole file
STDERR_TAIL_BYTES = 8 * 1024


def runner_confinement(
    sandbox: Sandbox | None,
    *,
    workspace: Path,
    env: Mapping[str, str],
    network: bool,
    home: Path | None,
    read_only: tuple[Path, ...],
    may_run_unsandboxed: bool,
    empty_cwd: bool = False,
) -> Confinement:
    """Where a runner runs: the site's limits but no CPU-seconds limit (it lives long), the minimal base
    environment plus its own variables, its workspace, HOME, network and visible paths; `empty_cwd`: it
    starts in an empty folder of its own, not in the workspace (stdio MCP servers, §6.6)."""
    limits = replace(sandbox.limits, cpu_seconds=None) if sandbox is not None else NO_LIMITS
    return Confinement(
        workspace=workspace,
        env=build_runner_env(env, program_bins=_bin_folders(read_only)),
        limits=limits,
        network=network,
        home=home,
        read_only=read_only,
        may_run_unsandboxed=may_run_unsandboxed,
        empty_cwd=empty_cwd,
    )


def _bin_folders(shown: tuple[Path, ...]) -> list[str]:
    return [str(path / "bin") for path in shown if (path / "bin").is_dir()]


class SpawnError(Exception):
    """The runner could not be started at all (missing command, not executable, bad cwd)."""


def build_runner_env(extra: Mapping[str, str], *, program_bins: Sequence[str] = ()) -> dict[str, str]:
    """The minimal base environment plus the runner's own configured variables (docs/protocol.md §6.6)."""
    env = {name: os.environ[name] for name in BASE_ENV_NAMES if name in os.environ}
    env["PATH"] = ":".join([*program_bins, NEUTRAL_PATH])
    env.update(extra)
    for name in _SEARCH_PATHS:
        if name in env:
            env[name] = ":".join(entry for entry in env[name].split(":") if entry.startswith("/"))
    env.update(PLANT_PROOF_ENV)
    return env


class StderrTail:
    """Keeps the last bytes a runner wrote to stderr, for error messages; older bytes are dropped."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self._limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self.total_bytes = 0

    def feed(self, chunk: bytes) -> None:
        """Append a chunk, trimming from the front so at most `limit` bytes are kept."""
        self.total_bytes += len(chunk)
        self._chunks.append(chunk)
        self._size += len(chunk)
        while self._size - len(self._chunks[0]) >= self._limit:
            self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        """The kept tail, decoded leniently and cut to the limit."""
        data = b"".join(self._chunks)[-self._limit :]
        return data.decode("utf-8", errors="replace").strip()


# Where live runners are recorded (set by the Django app to AGENTSITE_DATA_DIR/runners), so that the
# runners of a server that was killed (SIGKILL: no clean-up ran) are ended when a server starts again.
RECORD_DIR: Path | None = None


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot): tells a recorded pid from a reused one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _record(pgid: int) -> None:
    if RECORD_DIR is None:
        return
    with contextlib.suppress(OSError):
        RECORD_DIR.mkdir(parents=True, exist_ok=True)
        record = {
            "pgid": pgid,
            "start": _start_time(pgid),
            "server_pid": os.getpid(),
            "server_start": _start_time(os.getpid()),
        }
        (RECORD_DIR / f"{pgid}.json").write_text(json.dumps(record))


def _forget(pgid: int) -> None:
    if RECORD_DIR is not None:
        with contextlib.suppress(OSError):
            (RECORD_DIR / f"{pgid}.json").unlink()


def sweep_orphans(record_dir: Path) -> list[int]:
    """End the process groups of runners whose server died without closing them; return their pgids."""
    ended: list[int] = []
    for path in record_dir.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        server_alive = _start_time(record["server_pid"]) == record.get("server_start")
        if server_alive:
            continue  # another live server (a worker on this machine) owns it
        if _start_time(record["pgid"]) == record.get("start") and group_exists(record["pgid"]):
            _signal_group(record["pgid"], signal.SIGKILL)
            ended.append(record["pgid"])
        path.unlink(missing_ok=True)
    return ended


class RunnerProcess:
    """Owns one runner child: its pipes, its stderr drain, and the shutdown of its process group."""

    def __init__(self, process: asyncio.subprocess.Process, cgroup: CallCgroup | None = None) -> None:
        self.process = process
        self.cgroup = cgroup  # its memory cgroup (agents/sandbox/memory.py), removed when it ends
        self.pid = process.pid
        self.pgid = process.pid  # start_new_session=True makes the child its group's leader
        self.stderr_tail = StderrTail()
        self._drain_task = asyncio.create_task(self._drain_stderr(), name=f"acp-stderr-{self.pid}")
        _record(self.pgid)

    @classmethod
    async def spawn(
        cls, command: str, args: list[str], *, sandbox: Sandbox, confinement: Confinement
    ) -> RunnerProcess:
        """Start the runner confined (agents/sandbox/), the leader of a new process group, with piped stdio.

        In the bubblewrap sandbox the group's leader is bubblewrap: ending the group ends the sandbox and
        every process in it."""
        _check_workspace(confinement.workspace)
        try:
            process, cgroup = await start_process(
                [command, *args], sandbox=sandbox, confinement=confinement, line_limit=STDOUT_LINE_LIMIT
            )
        except SandboxRefused as exc:
            raise SpawnError(str(exc)) from exc
        except FileNotFoundError as exc:
            raise SpawnError(f"The runner command {command!r} was not found.") from exc
        except PermissionError as exc:
            raise SpawnError(f"The runner command {command!r} is not executable.") from exc
        except OSError as exc:
            raise SpawnError(f"The runner command {command!r} could not be started: {exc}.") from exc
        return cls(process, cgroup)

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def memory_note(self) -> str:
        """ " at the memory limit …" when its call's memory ceiling ended a process of it (for the sentence
        that says it ended), else ""."""
        if self.cgroup is not None and self.cgroup.memory_exhausted():
            return " at the memory limit of its sandbox (AGENTSITE_SANDBOX_MEMORY_MB)"
        return ""

    async def _drain_stderr(self) -> None:
        """Read stderr until EOF so a chatty runner never blocks on a full pipe."""
        stream = self.process.stderr
        assert stream is not None
        with contextlib.suppress(Exception):
            while chunk := await stream.read(65536):
                self.stderr_tail.feed(chunk)

    async def wait_exit(self, seconds: float) -> int | None:
        """Wait up to `seconds` for the leader to exit; its exit code, or None if still running."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.process.wait()), seconds)
        return self.process.returncode

    async def terminate(
        self, *, grace: float = 1.0, term_grace: float = 2.0, reap_timeout: float = 3.0
    ) -> None:
        """Close stdin, wait `grace`, SIGTERM the group, wait `term_grace`, SIGKILL the group.

        Runs to completion even if the caller is cancelled, so a cancelled turn cannot leak a runner.
        """
        task = asyncio.ensure_future(self._terminate(grace, term_grace, reap_timeout))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            await task
            raise

    async def _terminate(self, grace: float, term_grace: float, reap_timeout: float) -> None:
        self._close_stdin()
        if self.returncode is None:
            await self.wait_exit(grace)
        if group_has_live_members(self.pgid):
            _signal_group(self.pgid, signal.SIGTERM)
            await _wait_until(lambda: not group_has_live_members(self.pgid), term_grace)
        if group_has_live_members(self.pgid):
            _signal_group(self.pgid, signal.SIGKILL)
        await self.process.wait()
        # Killed helpers may linger as zombies until init reaps them; wait so callers see a clean slate.
        await _wait_until(lambda: not group_exists(self.pgid), reap_timeout)
        await release_cgroup(self.cgroup)
        _forget(self.pgid)
        await self._stop_drain()

    def _close_stdin(self) -> None:
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(Exception):
                stdin.close()

    async def _stop_drain(self) -> None:
        """Give the drain a moment to collect the last stderr bytes, then stop it."""
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._drain_task), 0.5)
        self._drain_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._drain_task


def _check_workspace(cwd: Path) -> None:
    if not cwd.is_dir():
        raise SpawnError(f"The workspace folder {cwd} does not exist.")


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_exists(pgid: int) -> bool:
    """True while any process (zombies included) is in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_has_live_members(pgid: int) -> bool:
    """True while a non-zombie process is in the group (zombies cannot be signalled any further)."""
    if not group_exists(pgid):
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if entry.name.isdigit() and _is_live_member(entry / "stat", pgid):
            return True
    return False


def _is_live_member(stat_path: Path, pgid: int) -> bool:
    try:
        stat = stat_path.read_text()
    except OSError:
        return False
    # Fields after the parenthesised command name: state ppid pgrp ...
    fields = stat.rsplit(")", 1)[-1].split()
    return len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X")


async def _wait_until(predicate: Callable[[], bool], seconds: float, interval: float = 0.02) -> bool:
    """Poll `predicate` until it is true or `seconds` pass; whether it became true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not predicate():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(interval)
    return True
