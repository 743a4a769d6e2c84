"""`sandbox_network` through a user-mode network stack (docs/protocol.md §6.6, docs/deployment.md "Network").

A sandbox always has a network namespace of its own. With `sandbox_network` on, slirp4netns gives it a
`tap0` device whose traffic the slirp4netns process (outside, on the host) turns into ordinary sockets:
the sandbox reaches what the host reaches — but never the host itself nor its neighbours:
- `--disable-host-loopback`: the gateway (10.0.2.2) does not lead to the host's 127.0.0.1, and the
  sandbox's own 127.0.0.1 is its own loopback;
- routes of type `unreachable`, set in the namespace before the command runs, refuse at once (EHOSTUNREACH)
  every loopback, private, link-local, shared (CGNAT), multicast and reserved IPv4 range and each address
  of the host's own interfaces; there is no IPv6 at all. The sandbox's user holds no capability in the
  namespace, so it cannot change them;
- its DNS is slirp4netns' own resolver (10.0.2.3, which asks the host's): the sandbox's /etc/resolv.conf
  names only it.
slirp4netns runs in a sandbox and a seccomp filter of its own (`--enable-sandbox --enable-seccomp`) and ends
when bubblewrap ends (`--exit-fd` on the end of a pipe whose other end bubblewrap holds, `--sync-fd`).

pasta (passt) would do as well; slirp4netns was chosen because `--disable-host-loopback` is one switch and
its address plan (10.0.2.0/24) is fixed, so the unreachable routes never cover its own gateway.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import ipaddress
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# Everything that is not the internet: this host, its networks and the cloud's metadata services.
BLOCKED_RANGES = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
NAMESERVER = "10.0.2.3"
_NS_GET_USERNS = 0xB701  # ioctl_ns(2): _IO(0xb7, 0x1)  # slirp4netns' resolver inside
_READY_SECONDS = 10.0
_helpers: set[subprocess.Popen[bytes]] = set()


class NetworkFailed(OSError):
    """The network could not be set up; the sandbox is ended."""


@dataclass(frozen=True)
class NetworkStack:
    """The programs and what to refuse, found once at start-up (:meth:`find`)."""

    slirp4netns: str
    nsenter: str
    ip: str
    blocked: tuple[str, ...]
    resolv_conf: Path
    as_root: bool  # the server is root: it sets the routes from outside (no need to enter the user ns)

    @classmethod
    def find(cls, *, state_dir: Path) -> NetworkStack | str:
        """The stack on this host, or why there is none (a sentence)."""
        programs = {name: shutil.which(name) for name in ("slirp4netns", "nsenter")}
        programs["ip"] = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
        missing = [name for name, path in programs.items() if path is None]
        if missing:
            return f"{', '.join(missing)} not installed (Debian/Ubuntu: apt-get install slirp4netns iproute2)"
        resolv = state_dir / "resolv.conf"
        resolv.write_text(f"nameserver {NAMESERVER}\n")
        resolv.chmod(0o644)
        blocked = (*BLOCKED_RANGES, *host_addresses(programs["ip"] or "ip"))
        return cls(
            slirp4netns=programs["slirp4netns"] or "",
            nsenter=programs["nsenter"] or "",
            ip=programs["ip"] or "",
            blocked=blocked,
            resolv_conf=resolv,
            as_root=os.geteuid() == 0,
        )

    def attach(self, pid: int, exit_fd: int, *, user: int | None) -> None:
        """Give the network namespace of `pid` its device and its routes (blocking: run in a thread).
        slirp4netns ends when `exit_fd`'s pipe closes. NetworkFailed when it does not come up."""
        _reap()
        net = _namespace_of(pid)
        try:
            owner = fcntl.ioctl(net, _NS_GET_USERNS)  # the user namespace that owns it (bubblewrap nests
        except OSError as exc:  # another one inside for the sandbox's uid, which must not be entered)
            os.close(net)
            raise NetworkFailed(errno.EIO, f"the sandbox's namespaces could not be read ({exc})") from None
        try:
            self._attach(net, owner, exit_fd, user=user)
        finally:
            os.close(net)
            os.close(owner)

    def _attach(self, net: int, owner: int, exit_fd: int, *, user: int | None) -> None:
        as_user = None if self.as_root else user  # an unprivileged server: as the sandbox's own user
        groups: list[int] | None = None if as_user is None else []
        # As root, the namespace is entered directly; otherwise through its owner, where our user may.
        enter_user = [] if self.as_root else [f"--userns-path=/proc/self/fd/{owner}"]
        # Its own sandbox (a mount namespace, pivot_root) needs root's ids inside, which a namespace that
        # maps only the sandbox's user lacks: a helper of an unprivileged server runs as that user already.
        confine = ["--enable-sandbox"] if self.as_root else []
        ready_read, ready_write = os.pipe()
        try:
            helper = subprocess.Popen(
                [
                    self.slirp4netns,
                    "--configure",
                    "--mtu=65520",
                    "--disable-host-loopback",
                    *confine,
                    "--enable-seccomp",
                    f"--ready-fd={ready_write}",
                    f"--exit-fd={exit_fd}",
                    *enter_user,
                    "--netns-type=path",
                    f"/proc/self/fd/{net}",
                    "tap0",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(ready_write, exit_fd, net, owner),
                start_new_session=True,
                user=as_user,
                group=as_user,
                extra_groups=groups,
            )
        except OSError as exc:
            raise NetworkFailed(errno.EIO, f"slirp4netns could not be started: {exc}") from None
        finally:
            os.close(ready_write)
        _helpers.add(helper)
        try:
            ready = _read_with_timeout(ready_read, _READY_SECONDS)
        finally:
            os.close(ready_read)
        if ready != b"1":
            helper.kill()
            raise NetworkFailed(errno.EIO, "the network stack (slirp4netns) did not come up")
        enter = [self.nsenter, f"--net=/proc/self/fd/{net}"]
        if not self.as_root:
            enter += ["--preserve-credentials", f"--user=/proc/self/fd/{owner}"]
        routes = "".join(f"route add unreachable {cidr}\n" for cidr in self.blocked)
        result = subprocess.run(
            [*enter, self.ip, "-batch", "-"],
            input=routes.encode(),
            capture_output=True,
            timeout=_READY_SECONDS,
            check=False,
            pass_fds=(net, owner),
            user=as_user,
            group=as_user,
            extra_groups=groups,
        )
        if result.returncode != 0:
            helper.kill()
            raise NetworkFailed(
                errno.EIO, f"the sandbox's routes could not be set: {result.stderr.decode().strip()}"
            )


def _namespace_of(pid: int) -> int:
    """An open handle of the network namespace of `pid`, once it is the sandbox's own (bubblewrap reports
    its child as it is made): never the server's, whose routes are the host's."""
    deadline = time.monotonic() + _READY_SECONDS
    ours = os.stat("/proc/self/ns/net").st_ino
    while True:
        try:
            net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise NetworkFailed(
                errno.EIO, f"the sandbox ended before its network was set up ({exc})"
            ) from None
        if os.fstat(net).st_ino != ours:
            return net
        os.close(net)
        if time.monotonic() > deadline:
            raise NetworkFailed(errno.EIO, "the sandbox's network namespace did not appear in time")
        time.sleep(0.001)


def host_addresses(ip: str) -> list[str]:
    """This host's own IPv4 addresses outside the blocked ranges (e.g. a public one), as /32 routes."""
    try:
        shown = subprocess.run([ip, "-j", "-4", "addr", "show"], capture_output=True, timeout=5, check=False)
        interfaces = json.loads(shown.stdout or b"[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    found = []
    for interface in interfaces:
        for info in interface.get("addr_info", []):
            with contextlib.suppress(KeyError, ValueError):
                address = ipaddress.IPv4Address(info["local"])
                if not any(address in ipaddress.IPv4Network(cidr) for cidr in BLOCKED_RANGES):
                    found.append(f"{address}/32")
    return found


def _read_with_timeout(fd: int, seconds: float) -> bytes:
    readable, _, _ = select.select([fd], [], [], seconds)
    return os.read(fd, 1) if readable else b""


def _reap() -> None:
    """Collect the helpers that ended with their sandboxes (they are nobody else's children)."""
    for helper in list(_helpers):
        if helper.poll() is not None:
            _helpers.discard(helper)
