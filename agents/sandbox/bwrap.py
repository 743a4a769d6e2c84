"""The bubblewrap sandbox: bubblewrap's command line for one confined process.

What the process gets (docs/protocol.md §6.1): new user, PID, IPC, UTS, cgroup and network namespaces
(with `network`, a user-mode stack that never reaches the host or private ranges: agents/sandbox/network.py)
and a mount namespace of its own, in which only these exist:
- the system's programs and libraries (`/usr`, `/bin`, `/lib*`, `/sbin`) read-only, and a short list
  of `/etc` entries that programs need (certificates, resolver, time zone, linker cache) — not the
  whole of `/etc`, where deployments keep their own secrets; `/etc/passwd` and `/etc/group` are
  generated and name only the sandbox's user;
- its workspace, read-write, at `/workspace` (the working directory; for a stdio MCP server an empty
  read-only `/var/empty`), a private empty `/tmp`, and for a runner its persistent home at `/home/agent`;
- the paths its program needs (executable, interpreter prefix, configured extras), read-only;
- a fresh `/proc` (only its own processes) and a minimal `/dev`.
It runs as an unprivileged user (uid 1000 inside), with every capability dropped, in a new session
(no terminal injection), and dies with the server (`--die-with-parent`). Limits are set inside with
`prlimit`, after the user namespace exists, so the process count is counted per sandbox.

bubblewrap itself starts with an empty environment: with a PID namespace, the sandbox's PID 1 is
bubblewrap's own child, whose `/proc/1/environ` is whatever bubblewrap got.

Ending the process: bubblewrap is the leader of its own process group; killing it takes PID 1 of
the namespace with it, and the kernel then kills every process in the namespace, including those
that called `setsid`, double-forked or daemonized.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agents.sandbox.base import NO_LIMITS, Confinement, Launch, Limits, Sandbox
from agents.sandbox.memory import MemoryCeiling
from agents.sandbox.network import NetworkStack
from agents.sandbox.startup import ARGS_FD, BLOCK_FD, INFO_FD, SYNC_FD

WORKSPACE_INSIDE = "/workspace"
HOME_INSIDE = "/home/agent"
EMPTY_INSIDE = "/var/empty"  # the working directory of a process with `empty_cwd`: empty, read-only
INSIDE_UID = 1000
INSIDE_USER = "agent"
HOSTNAME = "sandbox"

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of /etc programs commonly read; everything else in /etc stays out of sight.
ETC_ENTRIES = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "fonts",
    "gai.conf",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "profile",
    "protocols",
    "resolv.conf",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "terminfo",
    "timezone",
)


@dataclass(frozen=True)
class HostLayout:
    """What of the host the sandbox shows, read once at start-up so each launch is string building.

    `system`: (path, symlink target or None) for each system directory that exists; `etc`: (host
    source, path inside) for each /etc entry that exists (a symlinked entry such as resolv.conf is
    bound from its target); `passwd`/`group`: the generated account files; `hidden`: host paths that
    must not be seen even where they lie inside a bound system directory (the data directory, the
    project's code), covered with an empty tmpfs; `network`: the user-mode network stack for sandboxes
    with `network` (None: they get none either).
    """

    system: tuple[tuple[str, str | None], ...]
    etc: tuple[tuple[str, str], ...]
    passwd: Path
    group: Path
    hidden: tuple[str, ...] = ()
    disable_userns: bool = False
    network: NetworkStack | None = None

    @classmethod
    def read(
        cls, *, state_dir: Path, hidden: Sequence[Path] = (), disable_userns: bool = False
    ) -> HostLayout:
        """Look at this host; write the account files into `state_dir` (readable by the sandbox user)."""
        system: list[tuple[str, str | None]] = []
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                system.append((path, os.readlink(path)))
            elif os.path.isdir(path):
                system.append((path, None))
        etc = []
        for name in ETC_ENTRIES:
            inside = f"/etc/{name}"
            if os.path.exists(inside):
                etc.append((os.path.realpath(inside), inside))
        state_dir.mkdir(parents=True, exist_ok=True)
        passwd = state_dir / "passwd"
        group = state_dir / "group"
        _write_public(
            passwd,
            f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"{INSIDE_USER}:x:{INSIDE_UID}:{INSIDE_UID}:{INSIDE_USER}:{HOME_INSIDE}:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        )
        _write_public(group, f"root:x:0:\n{INSIDE_USER}:x:{INSIDE_UID}:\nnogroup:x:65534:\n")
        bound = [path for path, target in system if target is None]
        shown_hidden = tuple(
            str(path) for path in hidden if any(Path(path).is_relative_to(root) for root in bound)
        )
        return cls(tuple(system), tuple(etc), passwd, group, shown_hidden, disable_userns)


def _write_public(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    path.chmod(0o644)


class BwrapSandbox(Sandbox):
    """Every process in a bubblewrap sandbox of its own (see the module docstring)."""

    mode = "bwrap"

    def __init__(
        self,
        *,
        bwrap: str,
        prlimit: str,
        layout: HostLayout,
        limits: Limits = NO_LIMITS,
        detail: str = "",
        uid: int | None = None,
        gid: int | None = None,
        memory: MemoryCeiling | None = None,
    ) -> None:
        """`uid`/`gid`: the OS user bubblewrap runs as (a root server runs its sandboxes as an unprivileged
        user: process limits do not apply to root); None runs it as the server's own user. `memory`: where
        each call's memory cgroup is made (None: the host offers none, and `limits` holds per-process limits
        instead, agents/sandbox/memory.py)."""
        super().__init__(limits=limits, detail=detail)
        self.memory = memory
        self.bwrap = bwrap
        self.prlimit = prlimit
        self.layout = layout
        self.uid = uid
        self.gid = gid

    def launch(self, argv: Sequence[str], confinement: Confinement) -> Launch:
        full = bwrap_arguments(argv, confinement, bwrap=self.bwrap, prlimit=self.prlimit, layout=self.layout)
        # bubblewrap's options name host paths (the workspace's folder in the data directory): they travel
        # on a descriptor, so its command line — PID 1's, inside — shows only the command (docs/protocol.md).
        options_end = full.index("--")
        hidden = full[1:options_end]
        cgroup = None
        if self.memory is not None and confinement.limits.memory_bytes:
            cgroup = self.memory.create(confinement.limits.memory_bytes)
        network = self.layout.network if confinement.network else None
        if cgroup is not None or network is not None:
            hidden += ["--info-fd", INFO_FD, "--block-fd", BLOCK_FD]
        return Launch(
            argv=[self.bwrap, "--args", ARGS_FD, *full[options_end:]],
            hidden_args=tuple(hidden),
            cgroup=cgroup,
            network=network,
            env={},  # see the module docstring: /proc/1/environ inside is bubblewrap's environment
            cwd="/",
            sandboxed=True,
            user=self.uid,
            group=self.gid,
        )

    def workspace_inside(self, workspace: Path) -> str:
        return WORKSPACE_INSIDE

    def status(self) -> dict[str, object]:
        return {**super().status(), "uid": self.uid if self.uid is not None else os.geteuid()}


def bwrap_arguments(
    argv: Sequence[str], confinement: Confinement, *, bwrap: str, prlimit: str, layout: HostLayout
) -> list[str]:
    """bubblewrap's whole command line for `argv` under `confinement` (pure: unit-tested)."""
    args = [
        bwrap,
        "--unshare-user",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    args.append("--unshare-net")  # with `network`, a user-mode stack is attached (agents/sandbox/network.py)
    args += ["--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID), "--hostname", HOSTNAME]
    if layout.disable_userns:
        args.append("--disable-userns")
    args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    env = {
        **confinement.env,
        "HOME": HOME_INSIDE if confinement.home is not None else WORKSPACE_INSIDE,
        "USER": INSIDE_USER,
        "LOGNAME": INSIDE_USER,
        "TMPDIR": "/tmp",
    }
    for name, value in env.items():
        args += ["--setenv", name, value]
    for path, target in layout.system:
        args += ["--symlink", target, path] if target is not None else ["--ro-bind", path, path]
    network = layout.network if confinement.network else None
    for source, inside in layout.etc:
        if network is not None and inside == "/etc/resolv.conf":
            source = str(network.resolv_conf)  # the stack's own resolver: the host's may be on loopback
        args += ["--ro-bind-try", source, inside]
    if network is not None:
        args += ["--sync-fd", SYNC_FD]
    args += ["--ro-bind", str(layout.passwd), "/etc/passwd", "--ro-bind", str(layout.group), "/etc/group"]
    for hidden in layout.hidden:
        args += ["--tmpfs", hidden]
    args += ["--proc", "/proc", "--dev", "/dev"]
    if confinement.limits.tmp_bytes:
        args += ["--size", str(confinement.limits.tmp_bytes)]
    args += ["--tmpfs", "/tmp", "--bind", str(confinement.workspace), WORKSPACE_INSIDE]
    if confinement.home is not None:
        args += ["--bind", str(confinement.home), HOME_INSIDE]
    for shown in confinement.read_only:
        args += ["--ro-bind", str(shown), str(shown)]
    if confinement.empty_cwd:
        args += ["--perms", "0555", "--dir", EMPTY_INSIDE]
    cwd = EMPTY_INSIDE if confinement.empty_cwd else WORKSPACE_INSIDE
    args += ["--chdir", cwd, "--", prlimit, *confinement.limits.prlimit_options(), "--"]
    return args + list(argv)
