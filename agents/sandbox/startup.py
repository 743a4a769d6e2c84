"""Starting one process in steps: what it reads from descriptors, and what happens before it runs anything.

bubblewrap takes its options from an anonymous in-memory file (`--args FD`: its command line, which the
sandbox's PID 1 shows, names no host path). When the call has a memory cgroup or a network, bubblewrap also
reports its first child (`--info-fd`) and waits (`--block-fd`) until the server has moved that child into
the cgroup and given its network namespace the user-mode stack (agents/sandbox/network.py); only then does
it start the command, so every process of the call is inside from its first instruction.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
from typing import TYPE_CHECKING, Any

from agents.sandbox.network import NetworkFailed

if TYPE_CHECKING:
    from agents.sandbox.base import Launch

# Placeholders in a launch's arguments for the numbers of the descriptors the process inherits.
ARGS_FD = "{args_fd}"
INFO_FD = "{info_fd}"
BLOCK_FD = "{block_fd}"
SYNC_FD = "{sync_fd}"
# How long bubblewrap may take to report its child.
_INFO_SECONDS = 10.0


class SandboxStartFailed(OSError):
    """The sandbox ended or failed before its command could be started."""


class Spawning:
    """One start of a launch: `argv` and `options` for Popen; after the process started, `await ready()`."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self._child_fds: dict[str, int] = {}
        self._own_fds: list[int] = []
        self._info = self._block = self._exit = -1
        if launch.network is not None:  # the network helper ends when bubblewrap closes its end
            self._exit, sync_child = os.pipe()
            self._own_fds.append(self._exit)
            self._child_fds[SYNC_FD] = sync_child
        if launch.cgroup is not None or launch.network is not None:
            self._info, info_child = os.pipe()
            block_child, self._block = os.pipe()
            self._own_fds += [self._info, self._block]
            self._child_fds.update({INFO_FD: info_child, BLOCK_FD: block_child})
        if launch.hidden_args:
            memfd = os.memfd_create("args")
            self._child_fds[ARGS_FD] = memfd
            hidden = self._substitute(launch.hidden_args)
            os.write(memfd, b"".join(arg.encode() + b"\0" for arg in hidden))
            os.lseek(memfd, 0, os.SEEK_SET)
        self.argv = self._substitute(launch.argv)
        self.options: dict[str, Any] = launch.popen_options()
        if self._child_fds:
            self.options["pass_fds"] = tuple(self._child_fds.values())

    def _substitute(self, args: list[str] | tuple[str, ...]) -> list[str]:
        return [str(self._child_fds[arg]) if arg in self._child_fds else arg for arg in args]

    def started(self) -> None:
        """The child holds its descriptors now: close the server's copies (so a pipe sees its end)."""
        for fd in self._child_fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._child_fds.clear()

    async def ready(self) -> None:
        """Let the started process run its command, once its first child is in the call's cgroup.
        SandboxStartFailed when it ended before."""
        self.started()
        launch = self.launch
        if launch.cgroup is None and launch.network is None:
            return
        try:
            async with asyncio.timeout(_INFO_SECONDS):
                info = await asyncio.to_thread(_read_all, self._info)
            child = int(json.loads(info)["child-pid"])
            if launch.cgroup is not None:
                launch.cgroup.join(child)
            if launch.network is not None:
                await asyncio.to_thread(launch.network.attach, child, self._exit, user=launch.user)
            os.write(self._block, b"1")
        except NetworkFailed:
            raise
        except (OSError, ValueError, KeyError, TimeoutError) as exc:
            raise SandboxStartFailed(errno.EIO, f"the sandbox did not start ({exc or 'no report'})") from None

    def close(self) -> None:
        self.started()
        for fd in self._own_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._own_fds.clear()


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    return data
