"""Looking at processes from the host's side: what a test started must be gone, whatever it did.

Processes inside a sandbox have PIDs of their own namespace, so tests mark what they start with a
unique string on the command line (`sleep 3141.5926`) and look for it in every /proc/*/cmdline.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path


def marker() -> str:
    """A `sleep` argument no other process on the machine has: a duration of ~10 000 s with a random
    fraction (`sleep 10000.123456`), long enough to outlive any test that fails to kill it."""
    return f"10000.{uuid.uuid4().int % 10**9:09d}"


def _state(pid: str) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def pids_with(text: str) -> list[int]:
    """Live (not zombie) processes whose command line contains `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            continue
        if text in cmdline and _state(entry) not in {None, "Z", "X"}:
            found.append(int(entry))
    return found


def pids_with_env(entry: str) -> list[int]:
    """Live (not zombie) processes whose environment holds `entry` (`NAME=value`): a runner's or a server's
    marker, which everything it starts inherits."""
    needle = entry.encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and _state(pid) not in {None, "Z", "X"}:
            found.append(int(pid))
    return found


def none_left(live: Callable[[], list[int]], within: float = 5.0) -> bool:
    """True once `live()` finds no process (a loaded machine takes a moment to reap SIGKILLed ones, a
    killed sandbox's PID 1 to be reaped by the host's init)."""
    deadline = time.monotonic() + within
    while live():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def gone(text: str, within: float = 5.0) -> bool:
    """True once no live process carries `text` on its command line."""
    return none_left(lambda: pids_with(text), within)


async def appears(text: str, within: float = 10.0) -> list[int]:
    """The processes carrying `text`, once at least one runs (waits without blocking the event loop)."""
    deadline = time.monotonic() + within
    while not (found := pids_with(text)):
        if time.monotonic() > deadline:
            raise AssertionError(f"no process with {text!r} appeared within {within} s")
        await asyncio.sleep(0.02)
    return found
