"""The site's sandbox: chosen once from `AGENTSITE_SANDBOX`, probed, and the folders it binds.

`AGENTSITE_SANDBOX` (docs/protocol.md §6.1): `auto` (default) uses bubblewrap when a trivial command
runs in it on this host and falls back to no sandbox otherwise (logged as a warning); `bwrap` refuses
to start without it; `none` never sandboxes — then only users holding `agents.run_unsandboxed` may
run commands and runners. The choice is made on first use (`manage.py serve` makes it before it
listens) and kept for the life of the process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agents.sandbox.base import Confinement, Limits, NoSandbox, Sandbox, SandboxRefused
from agents.sandbox.bwrap import BwrapSandbox, HostLayout
from agents.sandbox.memory import MemoryCeiling, fallback_limits
from agents.sandbox.network import NetworkStack
from agents.sandbox.programs import check_program_paths, program_paths, resolve_program, sandbox_path_error

logger = logging.getLogger("agentsite.sandbox")

PROBE_SECONDS = 10.0
MB = 1024 * 1024

_lock = threading.Lock()
_sandbox: Sandbox | None = None


def site_limits() -> Limits:
    """The per-call limits from `AGENTSITE_SANDBOX_*` (0 = no limit)."""
    return Limits(
        cpu_seconds=settings.AGENTSITE_SANDBOX_CPU_SECONDS or None,
        memory_bytes=settings.AGENTSITE_SANDBOX_MEMORY_MB * MB or None,
        processes=settings.AGENTSITE_SANDBOX_PROCESSES or None,
        file_size_bytes=settings.AGENTSITE_SANDBOX_FILE_SIZE_MB * MB or None,
        tmp_bytes=settings.AGENTSITE_SANDBOX_TMP_MB * MB or None,
    )


def sandbox_ids() -> tuple[int | None, int | None]:
    """The OS user and group sandboxes run as: `AGENTSITE_SANDBOX_UID` (a root server defaults to
    65534, nobody: process limits do not hold for root); None: the server's own user."""
    uid = settings.AGENTSITE_SANDBOX_UID
    if uid == os.geteuid():
        return None, None
    return uid, uid


def get_sandbox() -> Sandbox:
    """The process's sandbox, chosen (and probed) on first use."""
    global _sandbox
    if _sandbox is None:
        with _lock:
            if _sandbox is None:
                _sandbox = _choose()
    return _sandbox


def reset_sandbox() -> None:
    """Forget the choice (tests that change `AGENTSITE_SANDBOX`)."""
    global _sandbox
    with _lock:
        _sandbox = None


def _choose() -> Sandbox:
    return make_sandbox(settings.AGENTSITE_SANDBOX)


def make_sandbox(mode: str, *, limits: Limits | None = None) -> Sandbox:
    """A sandbox for `mode` (`auto`, `bwrap`, `none`), probed; `bwrap` that does not work raises
    ImproperlyConfigured, `auto` falls back to no sandbox."""
    limits = limits or site_limits()
    prlimit = shutil.which("prlimit")
    if mode == "none":
        logger.warning("AGENTSITE_SANDBOX=none: commands and runners run without a sandbox")
        return NoSandbox(
            limits=fallback_limits(limits),
            detail="AGENTSITE_SANDBOX=none",
            prlimit=prlimit,
            empty_dir=_empty(),
        )
    try:
        sandbox = _bubblewrap(limits, prlimit)
    except _ProbeFailed as exc:
        if mode == "bwrap":
            raise ImproperlyConfigured(f"AGENTSITE_SANDBOX=bwrap, but {exc}") from None
        logger.warning(
            "no sandbox for commands: %s. Only users with agents.run_unsandboxed may run them.", exc
        )
        return NoSandbox(limits=fallback_limits(limits), detail=str(exc), prlimit=prlimit, empty_dir=_empty())
    logger.info("commands and runners run in a bubblewrap sandbox (%s)", sandbox.detail)
    return sandbox


def _empty() -> Path:
    """The empty folder an MCP server starts in without a sandbox (docs/protocol.md §6.6)."""
    folder = Path(settings.DATA_DIR) / "sandbox" / "empty"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    return folder


class _ProbeFailed(Exception):
    pass


def _bubblewrap(limits: Limits, prlimit: str | None) -> BwrapSandbox:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise _ProbeFailed("bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    if prlimit is None:
        raise _ProbeFailed("prlimit (util-linux) is not installed")
    help_text = _run([bwrap, "--help"]).stdout
    version = _run([bwrap, "--version"]).stdout.strip() or "bubblewrap"
    uid, gid = sandbox_ids()
    data_dir = Path(settings.DATA_DIR)
    if uid is not None:
        # The sandbox's user must pass through the data directory to its workspace (never list it).
        data_dir.chmod(data_dir.stat().st_mode | 0o001)
        blocked = _first_blocked(data_dir, uid)
        if blocked is not None:
            raise _ProbeFailed(
                f"the sandbox's user (uid {uid}) cannot reach the data directory {data_dir}: {blocked} is "
                "closed to it. Let others pass through the folders above it (chmod o+x), move "
                "AGENTSITE_DATA_DIR, or set AGENTSITE_SANDBOX_UID"
            )
    state = data_dir / "sandbox"
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o711)
    layout = HostLayout.read(
        state_dir=state,
        hidden=[settings.DATA_DIR, settings.BASE_DIR],
        disable_userns="--disable-userns" in help_text,
    )
    network = NetworkStack.find(state_dir=state)
    if isinstance(network, str):
        logger.warning("sandbox_network gives no network on this host: %s", network)
    layout = replace(layout, network=None if isinstance(network, str) else network)
    memory = MemoryCeiling.find() if limits.memory_bytes else None
    if memory is not None:
        logger.info("each call's memory cgroup is made under %s", memory.base)
    if memory is None:
        limits = fallback_limits(limits)
    detail = f"{version}; " + (memory.detail if memory else "memory: per-process limits (no cgroup)")
    detail += "; sandbox_network: " + (network if isinstance(network, str) else "slirp4netns")
    sandbox = BwrapSandbox(
        bwrap=bwrap,
        prlimit=prlimit,
        layout=layout,
        limits=limits,
        detail=detail,
        uid=uid,
        gid=gid,
        memory=memory,
    )
    with tempfile.TemporaryDirectory(prefix="probe-", dir=state) as scratch:
        workspace = Path(scratch)
        hand_over(workspace)
        probe = Confinement(workspace=workspace, limits=replace(limits, memory_bytes=None))
        launch = sandbox.launch(["/bin/sh", "-c", "exit 0"], probe)
        try:
            with launch.spawning() as spawning:
                result = subprocess.run(
                    spawning.argv,
                    capture_output=True,
                    text=True,
                    timeout=PROBE_SECONDS,
                    check=False,
                    **spawning.options,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            raise _ProbeFailed(f"bubblewrap could not be started: {exc}") from None
    if result.returncode != 0:
        reason = (
            result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.returncode}"
        )
        raise _ProbeFailed(
            f"bubblewrap does not work on this host ({reason}); it needs unprivileged user namespaces "
            "(see docs/deployment.md)"
        )
    return sandbox


def _first_blocked(path: Path, uid: int) -> Path | None:
    """The first folder on the way to `path` that `uid` may not pass through (other than by owning it)."""
    for folder in [*reversed(path.parents), path]:
        info = folder.stat()
        if info.st_uid != uid and not info.st_mode & 0o001:
            return folder
    return None


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise _ProbeFailed(f"{argv[0]} could not be run: {exc}") from None


# -- folders a sandbox binds ------------------------------------------------------------------------


def hand_over(path: Path) -> None:
    """Make a folder the sandbox binds read-write belong to the sandbox's user (0700)."""
    uid, gid = sandbox_ids()
    if uid is not None and gid is not None:
        os.chown(path, uid, gid)
    path.chmod(0o700)


def _ensure(path: Path) -> Path:
    if not os.path.isdir(path):  # asked for every turn: a stat is cheaper than mkdir's FileExistsError
        passage_to(path.parent)
        path.mkdir(exist_ok=True)
        hand_over(path)
    return path


def passage_to(folder: Path) -> None:
    """Create, or set the mode of, the folders from the data directory down to `folder` (`workspaces/`,
    `homes/<user>/<agent>/`) on the way to a folder the sandbox binds: the server's own, 0700 — or 0711
    when the sandbox runs as another user, who must pass through them, never list them (the data
    directory is private, docs/protocol.md §6.3). Runs when a workspace or home is created, not per turn.
    """
    data_dir = Path(settings.DATA_DIR)
    uid, _ = sandbox_ids()
    mode = 0o711 if uid is not None else 0o700
    for current in [*reversed(folder.parents), folder]:
        if current == data_dir or not current.is_relative_to(data_dir):
            continue
        current.mkdir(exist_ok=True)
        info = current.stat()
        if info.st_uid == os.geteuid() and info.st_mode & 0o777 != mode:
            current.chmod(mode)


def workspace_name(*, user_id: int, session_id: str) -> str:
    """A session's workspace folder name: the full SHA-256 of its owner and id.

    Never the id itself: no session id a user can choose maps to another session's folder (user ids
    contain no ':', so `<user>:<id>` is unambiguous).
    """
    return hashlib.sha256(f"{user_id}:{session_id}".encode()).hexdigest()


def workspace_dir(*, user_id: int, session_id: str) -> Path:
    """The session's workspace, created on first use."""
    return _ensure(Path(settings.WORKSPACES_DIR) / workspace_name(user_id=user_id, session_id=session_id))


@contextmanager
def scratch_workspace(prefix: str) -> Iterator[Path]:
    """A workspace for a process started apart from any chat (the Test of an MCP server or an ACP
    runner), removed afterwards."""
    folder = Path(settings.WORKSPACES_DIR) / f"{prefix}-{uuid.uuid4().hex}"
    passage_to(folder.parent)
    folder.mkdir()
    hand_over(folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def runner_home(*, user_id: int, agent_name: str, runner: str) -> Path:
    """A runner's private HOME for one user, kept between its starts (credentials, caches).
    Agent and runner names are 1-64 of [A-Za-z0-9_-], so they are safe folder names."""
    return _ensure(Path(settings.HOMES_DIR) / str(user_id) / agent_name / runner)


def program_for(command: str, sandbox_paths: list[str]) -> tuple[str, tuple[Path, ...]]:
    """A runner's or MCP server's program as an absolute path (a bare name is looked up on the server's
    PATH), and the host paths that must be visible to run it: its installation, its interpreter's, and the
    configured `sandbox_paths`. SandboxRefused (a sentence) when it is not found or may not be shown."""
    search_path = os.environ.get("PATH", "")
    executable = resolve_program(command, search_path=search_path)
    if executable is None:
        raise SandboxRefused(f"the command {command!r} was not found.")
    shown = program_paths(executable, search_path=search_path)
    check_program_paths(shown, data_dir=Path(settings.DATA_DIR), code_dir=Path(settings.BASE_DIR))
    return str(executable), (*shown, *(Path(path) for path in sandbox_paths))


def sandbox_path_refusal(raw: str) -> str | None:
    """Why a staff-configured `sandbox_paths` entry is refused (400), or None."""
    return sandbox_path_error(raw, forbidden=[Path(settings.DATA_DIR), Path(settings.BASE_DIR)])
