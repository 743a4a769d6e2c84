"""Starting and ending confined processes: the only place that creates a subprocess for a tool.

- :func:`run_command` runs one command to completion (the `shell` tool): capped output, a timeout,
  and everything it started is killed when it ends, times out or its caller is cancelled.
- :func:`start_process` starts a long-lived program with pipes (an ACP runner); its owner ends it.

Every process is the leader of a new process group. In the bubblewrap sandbox that leader is
bubblewrap: killing its group ends the whole PID namespace (agents/sandbox/bwrap.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agents.sandbox.base import Confinement, Launch, Sandbox
from agents.sandbox.memory import CallCgroup

OUTPUT_HEAD_BYTES = 48 * 1024
OUTPUT_TAIL_BYTES = 16 * 1024
OUTPUT_CAP_BYTES = OUTPUT_HEAD_BYTES + OUTPUT_TAIL_BYTES
# After the command exits, how long to wait for output still buffered in the pipe.
_DRAIN_SECONDS = 2.0


@dataclass(frozen=True)
class CommandResult:
    output: str  # stdout and stderr together, capped (head and tail kept)
    returncode: int  # negative: killed by that signal
    timed_out: bool
    memory_exhausted: bool = False  # its processes reached the call's memory ceiling


class OutputBuffer:
    """Keeps the first and the last bytes of a stream and counts what falls in between."""

    def __init__(self, head_limit: int = OUTPUT_HEAD_BYTES, tail_limit: int = OUTPUT_TAIL_BYTES) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._head_limit = head_limit
        self._tail_limit = tail_limit

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: -self._tail_limit]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return (
            f"{head}\n[output truncated: {omitted} of {self.total} bytes omitted; "
            f"showing the first {len(self.head)} and the last {len(self.tail)} bytes]\n{tail}"
        )


class _CommandProtocol(asyncio.SubprocessProtocol):
    """Collects output and tells apart "the command exited" from "the pipe closed".

    `asyncio.subprocess.Process.wait()` waits for both, so a background job holding the pipe would
    keep us waiting for it; here the exit is seen at once.
    """

    def __init__(self, buffer: OutputBuffer) -> None:
        self.buffer = buffer
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.buffer.feed(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


async def run_command(
    argv: Sequence[str],
    *,
    sandbox: Sandbox,
    confinement: Confinement,
    limit_seconds: float,
    stop: asyncio.Event | None = None,
) -> CommandResult:
    """Run `argv` confined; return its capped output, exit code and whether it timed out. When `stop` is
    set before it exits, everything it started is killed as at a timeout (its caller knows why).

    The process group is killed whenever we stop waiting — normal exit (leftover background jobs),
    timeout, or cancellation of the turn — so nothing the command started outlives the call.
    Raises SandboxRefused when it may not run, OSError when it cannot start.
    """
    launch = sandbox.launch(argv, confinement)
    try:
        result = await _run(launch, limit_seconds, stop)
        if launch.cgroup is not None and launch.cgroup.memory_exhausted():
            limit = (confinement.limits.memory_bytes or 0) // (1024 * 1024)
            note = (
                f"\n[the command reached the memory limit of this call ({limit} MB for all its processes "
                "together, AGENTSITE_SANDBOX_MEMORY_MB): the system ended a process of it]"
            )
            result = CommandResult(result.output + note, result.returncode, result.timed_out, True)
    finally:
        await release_cgroup(launch.cgroup)
    return result


async def _run(launch: Launch, limit_seconds: float, stop: asyncio.Event | None) -> CommandResult:
    buffer = OutputBuffer()
    loop = asyncio.get_running_loop()
    with launch.spawning() as spawning:  # its descriptors stay open until it runs
        spawn = loop.create_task(
            loop.subprocess_exec(
                lambda: _CommandProtocol(buffer),
                *spawning.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                **spawning.options,
            )
        )
        try:
            transport, protocol = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            # Cancelled while it starts: asyncio would kill the sandbox's first process only, which can
            # leave the sandboxed command running (see kill_tree). Let it start, then end all of it.
            with contextlib.suppress(Exception):
                transport, protocol = await spawn
                await _end(transport, protocol)
            raise
        try:
            await spawning.ready()
        except BaseException:
            await _end(transport, protocol)
            raise
    pid = transport.get_pid()
    try:
        timed_out = not await _wait_for(protocol.exited, limit_seconds, stop=stop)
        kill_group(pid) if transport.get_returncode() is not None else kill_tree(pid)
        await _wait_for(protocol.exited, _DRAIN_SECONDS)
        # Output still in the pipe; without a sandbox a process that left the group (setsid) may hold it.
        await _wait_for(protocol.output_closed, _DRAIN_SECONDS)
    except BaseException:
        await _end(transport, protocol)
        raise
    transport.close()
    returncode = transport.get_returncode()
    return CommandResult(buffer.text(), -signal.SIGKILL if returncode is None else returncode, timed_out)


async def _end(transport: asyncio.SubprocessTransport, protocol: _CommandProtocol) -> None:
    """Kill what still runs and let asyncio see the exit before closing: closing first would reap the
    process behind asyncio's back (its watcher then warns and reports 255)."""
    if transport.get_returncode() is None:
        kill_tree(transport.get_pid())
        with contextlib.suppress(asyncio.CancelledError):  # a second cancel: the first is raised anyway
            await asyncio.shield(_wait_for(protocol.exited, _DRAIN_SECONDS))
    transport.close()


async def start_process(
    argv: Sequence[str], *, sandbox: Sandbox, confinement: Confinement, line_limit: int
) -> tuple[asyncio.subprocess.Process, CallCgroup | None]:
    """Start a long-lived confined program with piped stdin, stdout and stderr (its owner ends it with
    :func:`kill_group` on its pid, then :func:`release_cgroup` on the cgroup returned with it). Raises
    SandboxRefused, or OSError when it cannot start."""
    launch = sandbox.launch(argv, confinement)
    try:
        with launch.spawning() as spawning:
            process = await asyncio.create_subprocess_exec(
                *spawning.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=line_limit,
                **spawning.options,
            )
            try:
                await spawning.ready()
            except BaseException:
                kill_tree(process.pid)
                await process.wait()
                raise
    except BaseException:
        await release_cgroup(launch.cgroup)
        raise
    return process, launch.cgroup


async def release_cgroup(cgroup: CallCgroup | None, within: float = 2.0) -> None:
    """Remove a call's cgroup once its processes are gone (they may linger a moment after a kill); one
    still busy then is left to the next start's sweep (agents/sandbox/memory.py)."""
    if cgroup is None:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cgroup.remove() and loop.time() < deadline:  # noqa: ASYNC110 (no event tells it is empty)
        await asyncio.sleep(0.02)


async def _wait_for(event: asyncio.Event, limit_seconds: float, *, stop: asyncio.Event | None = None) -> bool:
    """Wait for `event` at most `limit_seconds` (and not past `stop`); say whether it happened."""
    if stop is not None:
        return await _wait_unless(event, limit_seconds, stop)
    try:
        async with asyncio.timeout(limit_seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def _wait_unless(event: asyncio.Event, limit_seconds: float, stop: asyncio.Event) -> bool:
    waits = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waits, timeout=limit_seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    return event.is_set()


def kill_group(pgid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(pid: int) -> None:
    """Kill a process that still runs, its group and every descendant, also those in a session of their own.

    The group alone is not enough for a sandbox stopped just after it started: bubblewrap's child leaves
    the group (`--new-session`) and only then asks to die with its parent, so killing bubblewrap in between
    would leave the command running. The group is stopped first, so nothing in it forks meanwhile; killing
    the sandbox's first process ends everything in its PID namespace.
    """
    kill_group(pid, signal.SIGSTOP)
    _wait_stopped(pid)
    for descendant in _descendants(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(descendant, signal.SIGKILL)
    kill_group(pid, signal.SIGKILL)


def _wait_stopped(pid: int, within: float = 0.1) -> None:
    """A signal is delivered when its target next runs: wait (briefly) until `pid` is stopped or gone."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                state = stat.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            return
        if state in (b"T", b"t", b"Z", b"X"):
            return
        time.sleep(0.0002)


def _descendants(pid: int) -> list[int]:
    """Every live descendant of `pid`, from /proc (a parent-pid map; /proc/*/children is not always built)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found
