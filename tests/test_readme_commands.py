"""Every `manage.py …` and `make …` command the README names runs on a fresh clone as written (issue 31).

The commands are read from the README itself (inline code and code blocks), so a command added there is
tested here without a line of this file changing. Each runs in a subprocess on one fresh data directory,
with none of the test run's environment: no SECRET_KEY, no DEBUG, only what the README writes before the
command (`DEBUG=false SECRET_KEY=… … python manage.py serve`). The README's first step is `make run`
(it migrates), so that runs first; then each command must exit 0 without a traceback. Commands that serve
are started, asked for /healthz (the scheduler: until it says it runs) and stopped with SIGTERM. Make
targets that run the suite, the benchmarks or the soak are checked with `make -n` (they exist and their
recipe reads), with the reason said.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.server import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"

_COMMAND = re.compile(r"^((?:[A-Z][A-Z0-9_]*=\S*\s+)*)(?:python3?\s+)?((?:manage\.py|make)\b.*)$")
# Targets not run for real, and why.
NOT_RUN = {
    "test": "the whole suite, of which this test is a part",
    "lint": "ruff and mypy over the whole project: minutes, and the data directory plays no part",
    "test-stock": "the socket, queue and turn tests on the stock stack, a part of `make test`",
    "bench": "the load benchmarks (bench/README.md), not tests",
    "soak": "about 10 minutes against Postgres and a Redis of its own",
}


@dataclass(frozen=True)
class Command:
    text: str  # as the README writes it
    environ: dict[str, str]  # the variables written before it
    argv: list[str]  # manage.py … or make …

    @property
    def tool(self) -> str:
        return self.argv[0]


def readme_commands(markdown: str) -> list[Command]:
    """Inline code spans (across line breaks) and the lines of code blocks that are a `manage.py` or a
    `make` command, in the README's order, each once. A synopsis's optional parts (`[--staff]`) are
    given, its placeholders (`NAME`) taken as written, an elided value (`SECRET_KEY=…`) filled in."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", markdown, flags=re.M | re.S)
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", markdown, flags=re.M | re.S)
    found = [line.split("  #")[0] for block in blocks for line in block.splitlines()]
    found += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    commands: list[Command] = []
    for text in found:
        match = _COMMAND.match(text.strip())
        if match is None:
            continue
        environ = dict(item.split("=", 1) for item in shlex.split(match.group(1)))
        environ = {
            key: secrets.token_urlsafe(50) if value == "…" else value for key, value in environ.items()
        }
        argv = shlex.split(re.sub(r"[\[\]]", "", match.group(2)))
        command = Command(text=text.strip(), environ=environ, argv=argv)
        if command not in commands:
            commands.append(command)
    return commands


COMMANDS = readme_commands(README.read_text())


def test_the_readme_names_the_commands_this_file_knows_how_to_run() -> None:
    names = {(c.tool, c.argv[1] if len(c.argv) > 1 else "") for c in COMMANDS}
    # The commands issue 31 found crashing, and the server's own: if the parsing lost them, this says so.
    assert {("manage.py", "create_api_key"), ("manage.py", "axes_reset"), ("make", "run")} <= names
    assert ("manage.py", "serve") in names and ("manage.py", "rotate_secrets") in names


def clean_environ(data_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    """A shell's environment with nothing of agentsite's: the README's variables only."""
    environ = {
        "PATH": f"{VENV_PYTHON.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", str(data_dir)),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "AGENTSITE_DATA_DIR": str(data_dir),
    }
    environ.update(extra)
    return environ


def no_traceback(output: str) -> None:
    assert "Traceback (most recent call last)" not in output, output


def group_members(pgid: int) -> list[int]:
    """The processes of a process group but its leader (`make`'s children)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pgid:
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                members.append(int(entry))
    return members


def run_server(
    argv: list[str], environ: dict[str, str], *, url: str = "", host: str = "", ready: str | None = None
) -> str:
    """Start it, wait for /healthz to answer (or for `ready` on its output), stop it; its output."""
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                log.seek(0)
                output = log.read()
                assert process.poll() is None, f"{argv} exited with {process.returncode}:\n{output}"
                if ready is not None and ready in output:
                    break
                if ready is None:
                    try:
                        # The production command's HTTPS redirect spares /healthz (docs/deployment.md).
                        answer = httpx.get(f"{url}/healthz", headers={"Host": host} if host else {})
                        if answer.status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                assert time.monotonic() < deadline, f"{argv} did not answer within 90 s:\n{output}"
                time.sleep(0.2)
        finally:
            if process.poll() is None:
                # Ctrl+C's SIGTERM to the server; make itself passes on its child's exit status.
                for pid in group_members(process.pid) if argv[0] == "make" else [process.pid]:
                    os.kill(pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=5)
        log.seek(0)
        output = log.read()
    assert process.returncode == 0, f"{argv} stopped with {process.returncode}:\n{output}"
    return output


def make_run(command: Command, data_dir: Path) -> str:
    """`make run` as written, on a free port (the README's 8000 or 9000 may be taken on a test machine)."""
    port = free_port()
    argv = ["make", "--no-print-directory", *[a for a in command.argv[1:] if not a.startswith("PORT=")]]
    environ = clean_environ(data_dir, command.environ)
    return run_server([*argv, f"PORT={port}"], environ, url=f"http://127.0.0.1:{port}")


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """One fresh data directory, set up by the README's first step, `make run`."""
    if not (ROOT / ".venv" / ".installed").exists():
        pytest.skip("no .venv made by `make setup` here: `make run` would create and install one")
    with tempfile.TemporaryDirectory(prefix="agentsite-readme-") as folder:
        path = Path(folder) / "data"
        first = next(c for c in COMMANDS if c.argv[:2] == ["make", "run"])
        no_traceback(make_run(first, path))
        yield path


@pytest.mark.parametrize("command", COMMANDS, ids=[c.text for c in COMMANDS])
def test_a_readme_command_runs_as_written_on_a_fresh_clone(command: Command, data_dir: Path) -> None:
    environ = clean_environ(data_dir, command.environ)
    if command.tool == "make":
        target = command.argv[1] if len(command.argv) > 1 else ""
        if target in NOT_RUN:
            done = subprocess.run(["make", "-n", *command.argv[1:]], cwd=ROOT, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            pytest.skip(f"`{command.text}` checked with make -n only: {NOT_RUN[target]}")
        assert target == "run", f"a make target this test does not know: {command.text}"
        no_traceback(make_run(command, data_dir))
        return

    argv = [str(VENV_PYTHON), *command.argv]
    name = command.argv[1]
    if name == "serve":
        if "--workers" in argv and argv[argv.index("--workers") + 1] != "1":
            pytest.skip(
                "several workers need REDIS_URL (the README says so); tests/e2e/test_serve.py runs them"
            )
        port = free_port()
        argv += ["--port", str(port)]
        host = (environ.get("ALLOWED_HOSTS") or "").split(",")[0]
        no_traceback(run_server(argv, environ, url=f"http://127.0.0.1:{port}", host=host))
        return
    if name == "runscheduler":
        no_traceback(run_server(argv, environ, ready="scheduler running"))
        return
    done = subprocess.run(argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)
    no_traceback(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_generated_secret_key_is_the_servers_own_and_kept(data_dir: Path) -> None:
    key = data_dir / "secret_key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert len(key.read_text().strip()) >= 50
