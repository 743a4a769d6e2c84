"""The sandbox launcher (agents/sandbox/): bubblewrap's command line, program paths, site choice."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from agents.sandbox import Confinement, Limits, SandboxRefused
from agents.sandbox.base import NoSandbox
from agents.sandbox.bwrap import HOME_INSIDE, WORKSPACE_INSIDE, BwrapSandbox, HostLayout, bwrap_arguments
from agents.sandbox.programs import check_program_paths, program_paths, resolve_program, sandbox_path_error
from agents.sandbox.site import make_sandbox, workspace_name

LAYOUT = HostLayout(
    system=(("/usr", None), ("/bin", "usr/bin")),
    etc=(("/etc/ssl/certs", "/etc/ssl/certs"), ("/run/resolv.conf", "/etc/resolv.conf")),
    passwd=Path("/state/passwd"),
    group=Path("/state/group"),
    hidden=("/usr/local/agentsite",),
    disable_userns=True,
)


def arguments(**confinement: object) -> list[str]:
    spec = Confinement(workspace=Path("/data/ws/abc"), **confinement)  # type: ignore[arg-type]
    return bwrap_arguments(
        ["/bin/sh", "-c", "ls"], spec, bwrap="/usr/bin/bwrap", prlimit="/usr/bin/prlimit", layout=LAYOUT
    )


def pairs(args: list[str], option: str) -> list[tuple[str, ...]]:
    """Each occurrence of `option` with its operands (two for binds, one for the rest)."""
    width = 2 if option in {"--ro-bind", "--bind", "--ro-bind-try", "--symlink", "--setenv"} else 1
    return [tuple(args[i + 1 : i + 1 + width]) for i, arg in enumerate(args) if arg == option]


def test_every_namespace_is_new_and_privileges_are_dropped() -> None:
    args = arguments()
    for option in ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]:
        assert option in args
    assert ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"] == args[
        args.index("--die-with-parent") : args.index("--clearenv") + 1
    ]
    assert pairs(args, "--uid") == [("1000",)] and "--disable-userns" in args


def test_the_hosts_network_is_never_shared() -> None:
    """With `network`, a user-mode stack is attached to the sandbox's own namespace (tests/agents/
    test_sandbox_network.py); without a stack on the host, there is none."""
    assert "--unshare-net" in arguments(network=True)
    assert "--sync-fd" not in arguments(network=True), "no stack in this layout: no helper to keep alive"


def test_the_environment_is_exactly_what_was_given_plus_home() -> None:
    env = dict(pairs(arguments(env={"PATH": "/usr/bin", "LANG": "C.UTF-8"}), "--setenv"))
    assert env == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "HOME": WORKSPACE_INSIDE,
        "USER": "agent",
        "LOGNAME": "agent",
        "TMPDIR": "/tmp",
    }


def test_the_filesystem_is_the_system_read_only_and_the_workspace() -> None:
    args = arguments()
    assert pairs(args, "--ro-bind")[:1] == [("/usr", "/usr")]
    assert ("usr/bin", "/bin") in pairs(args, "--symlink")
    assert ("/run/resolv.conf", "/etc/resolv.conf") in pairs(args, "--ro-bind-try")
    assert ("/state/passwd", "/etc/passwd") in pairs(args, "--ro-bind")
    assert pairs(args, "--bind") == [("/data/ws/abc", WORKSPACE_INSIDE)]
    assert ("/tmp",) in pairs(args, "--tmpfs") and ("/usr/local/agentsite",) in pairs(args, "--tmpfs")
    # The hidden path is covered after the system is bound, or the bind would show it again.
    assert args.index("/usr/local/agentsite") > args.index("/usr")
    assert pairs(args, "--chdir") == [(WORKSPACE_INSIDE,)]


def test_a_runner_gets_its_home_and_its_program_read_only() -> None:
    args = arguments(home=Path("/data/homes/7/default/claude"), read_only=(Path("/opt/claude"),))
    assert ("/data/homes/7/default/claude", HOME_INSIDE) in pairs(args, "--bind")
    assert ("/opt/claude", "/opt/claude") in pairs(args, "--ro-bind")
    assert dict(pairs(args, "--setenv"))["HOME"] == HOME_INSIDE


def test_limits_are_set_inside_with_prlimit_before_the_program() -> None:
    limits = Limits(
        cpu_seconds=5,
        memory_bytes=1 << 30,
        processes=64,
        file_size_bytes=1 << 20,
        data_bytes=1 << 26,
        tmp_bytes=1 << 24,
    )
    args = arguments(limits=limits)
    tail = args[args.index("--") + 1 :]
    assert tail == [
        "/usr/bin/prlimit",
        "--core=0",
        "--cpu=5:5",
        f"--data={1 << 26}:{1 << 26}",  # per process; the call's memory_bytes is a cgroup's
        "--nproc=64:64",
        f"--fsize={1 << 20}:{1 << 20}",
        "--",
        "/bin/sh",
        "-c",
        "ls",
    ]
    assert pairs(args, "--size") == [(str(1 << 24),)]  # the private /tmp: AGENTSITE_SANDBOX_TMP_MB


def test_bubblewrap_itself_starts_with_an_empty_environment_as_the_sandbox_user() -> None:
    sandbox = BwrapSandbox(
        bwrap="/usr/bin/bwrap", prlimit="/usr/bin/prlimit", layout=LAYOUT, uid=65534, gid=65534
    )
    launch = sandbox.launch(["true"], Confinement(workspace=Path("/w")))
    assert launch.env == {} and launch.sandboxed
    options = launch.popen_options()
    assert options["user"] == 65534 and options["extra_groups"] == [] and options["start_new_session"]


def test_no_sandbox_refuses_users_without_the_permission() -> None:
    sandbox = NoSandbox(prlimit="/usr/bin/prlimit")
    with pytest.raises(SandboxRefused, match=r"agents\.run_unsandboxed"):
        sandbox.launch(["true"], Confinement(workspace=Path("/w")))
    launch = sandbox.launch(
        ["true"],
        Confinement(
            workspace=Path("/w"), limits=Limits(processes=5, cpu_seconds=1), may_run_unsandboxed=True
        ),
    )
    # Without a user namespace a process count would count the server's own processes: not set.
    assert launch.argv == ["/usr/bin/prlimit", "--core=0", "--cpu=1:1", "--", "true"]
    assert launch.env == {"HOME": "/w"} and not launch.sandboxed


def test_workspace_names_cannot_be_chosen_to_collide() -> None:
    names = {
        workspace_name(user_id=user, session_id=sid)
        for user in (1, 2, 12)
        for sid in ["a", "a.b", "..", ".", "s-" + "0" * 32, "2:a", "а", "a\u200b", "A", "x" * 128]
    }
    assert len(names) == 30 and all(len(name) == 64 for name in names)
    # "1" + "2:a" and "12" + ":a" would collide if the id came first or were not separated.
    assert workspace_name(user_id=1, session_id="2:a") != workspace_name(user_id=12, session_id="a")


# --- programs -----------------------------------------------------------------------------------------


def make_program(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_program_outside_the_system_shows_its_installation(tmp_path: Path) -> None:
    tool = make_program(tmp_path / "opt/tool/bin/tool", "#!/bin/sh\n")
    assert program_paths(tool, search_path="") == [tmp_path / "opt/tool"]


def test_a_script_shows_its_interpreter_and_a_venv_its_base(tmp_path: Path) -> None:
    base = make_program(tmp_path / "python/bin/python3.13", "binary")
    venv_python = tmp_path / "venv/bin/python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(base)
    script = make_program(tmp_path / "agent/bin/agent", f"#!{venv_python}\n")
    shown = program_paths(script, search_path="")
    assert shown == [tmp_path / "agent", tmp_path / "venv", tmp_path / "python"]


def test_env_shebangs_are_looked_up_on_the_search_path(tmp_path: Path) -> None:
    node = make_program(tmp_path / "node/bin/node", "binary")
    script = make_program(tmp_path / "cli/bin/cli", "#!/usr/bin/env node\n")
    assert program_paths(script, search_path=str(node.parent)) == [tmp_path / "cli", tmp_path / "node"]
    assert resolve_program("node", search_path=str(node.parent)) == node
    assert resolve_program("relative/node", search_path="") is None


def test_programs_in_the_data_dir_or_the_code_are_refused(tmp_path: Path) -> None:
    data, code = tmp_path / "data", tmp_path / "code"
    (code / ".venv").mkdir(parents=True)
    (code / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    check_program_paths([code / ".venv", Path("/opt/x")], data_dir=data, code_dir=code)  # a venv is fine
    with pytest.raises(SandboxRefused, match="data directory"):
        check_program_paths([data / "bin"], data_dir=data, code_dir=code)
    with pytest.raises(SandboxRefused, match="server's own code"):
        check_program_paths([code / "tests"], data_dir=data, code_dir=code)


@pytest.mark.parametrize(
    ("raw", "refused"),
    [
        ("/opt/tool", False),
        ("relative", True),
        ("", True),
        ("/", True),
        ("/data", True),
        ("/data/ws/x", True),
        ("/code/sub", True),
    ],
)
def test_configured_sandbox_paths_never_overlap_the_data_dir_or_the_code(raw: str, refused: bool) -> None:
    error = sandbox_path_error(raw, forbidden=[Path("/data"), Path("/code")])
    assert (error is not None) == refused


def test_a_symlink_to_the_data_dir_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "data")
    assert sandbox_path_error(str(tmp_path / "link"), forbidden=[tmp_path / "data"]) is not None


# --- choosing the site's sandbox -------------------------------------------------------------------


def test_bwrap_mode_refuses_to_start_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ImproperlyConfigured, match="bubblewrap"):
        make_sandbox("bwrap")
    fallback = make_sandbox("auto")
    assert fallback.mode == "none" and "not installed" in fallback.detail


def test_none_mode_is_none() -> None:
    assert make_sandbox("none").status() == {"mode": "none", "detail": "AGENTSITE_SANDBOX=none"}


def test_the_probe_finds_bubblewrap_here() -> None:
    from tests.support.sandboxes import sandbox_of

    sandbox = sandbox_of("bwrap")
    assert sandbox.mode == "bwrap" and "bubblewrap" in sandbox.detail
    assert sandbox.status()["uid"] == (65534 if os.geteuid() == 0 else os.geteuid())


# --- the one launcher ------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ["agentsite", "agents", "chat", "acp", "mcpservers", "cron", "portal"]
# Where a process may be started: the sandbox launcher (and its start-up probe), and `serve`, which starts
# the server's own worker processes (nothing a user drives).
LAUNCHERS = {
    "agents/sandbox/process.py",
    "agents/sandbox/site.py",
    "agents/sandbox/network.py",  # the network helper a sandbox gets (slirp4netns, its routes)
    "agentsite/management/commands/serve.py",
}
_SPAWNING_CALLS = {"create_subprocess_exec", "create_subprocess_shell", "subprocess_exec", "subprocess_shell"}
_SPAWNING_OS_CALLS = {
    "system",
    "popen",
    "fork",
    "forkpty",
    "posix_spawn",
    "posix_spawnp",
    *(f"exec{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
    *(f"spawn{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
}


def _starts_processes(source: str) -> list[str]:
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(alias.name in {"subprocess", "pty"} for alias in node.names):
            found.append(f"line {node.lineno}: import")
        elif isinstance(node, ast.ImportFrom) and node.module in {"subprocess", "pty"}:
            found.append(f"line {node.lineno}: from-import")
        elif isinstance(node, ast.Attribute) and (
            node.attr in _SPAWNING_CALLS
            or (
                node.attr in _SPAWNING_OS_CALLS and isinstance(node.value, ast.Name) and node.value.id == "os"
            )
        ):
            found.append(f"line {node.lineno}: {node.attr}")
    return found


def test_no_process_is_started_outside_the_sandbox_launcher() -> None:
    offenders = {}
    for package in PRODUCTION:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" in relative or relative in LAUNCHERS:
                continue
            hits = _starts_processes(path.read_text())
            if hits:
                offenders[relative] = hits
    assert offenders == {}, "start processes through agents.sandbox (docs/deployment.md), not on your own"


def test_the_check_finds_what_it_looks_for() -> None:
    assert _starts_processes("import subprocess") and _starts_processes(
        "await asyncio.create_subprocess_exec('x')"
    )
    assert _starts_processes("os.execvp('sh', [])") and not _starts_processes("print('subprocess')")
    assert not _starts_processes("layout.system")
