"""The mock ACP runner and the test MCP server installed the way real ones would be, so that they can run
in the sandbox.

A sandbox never shows the project's code, and a root server's sandboxes run as an unprivileged user
(agents/sandbox/site.py), who cannot reach an interpreter under /root. So tests run them:
- as scripts copied out of the project into a folder of their own (shown through `sandbox_paths`);
- with an interpreter the sandbox's user can run: the test's own Python when it can, otherwise a
  virtualenv made once (under var/, cached) from the system's python3 with the same SDK versions
  (the ACP SDK for the runner, the MCP SDK for the server).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
MOCK_RUNNER_SOURCE = Path(__file__).resolve().parent / "mock_acp_runner.py"
MCP_SERVER_SOURCE = Path(__file__).resolve().parent / "mcp_test_server.py"
SDKS = ("agent-client-protocol", "mcp")


def _reachable(path: Path, uid: int) -> bool:
    """Whether `uid` (not root) can pass through every folder to `path`."""
    for folder in [*reversed(path.parents), path]:
        try:
            info = folder.stat()
        except OSError:
            return False
        if info.st_uid != uid and not info.st_mode & 0o001:
            return False
    return True


def _sandbox_uid() -> int | None:
    uid = settings.AGENTSITE_SANDBOX_UID
    return None if uid == os.geteuid() else uid


@cache
def runner_python() -> str:
    """An interpreter with the ACP and MCP SDKs that the sandbox's user can run."""
    uid = _sandbox_uid()
    if uid is None or _reachable(Path(sys.base_prefix), uid):
        return sys.executable
    venv = ROOT / "var" / "runner-python"
    python = venv / "bin" / "python"
    pins = [f"{sdk}=={importlib.metadata.version(sdk)}" for sdk in SDKS]
    stamp = venv / (".installed-" + "-".join(pin.replace("==", "-") for pin in pins))
    if not stamp.exists():
        system = next(
            (
                candidate
                for candidate in ("/usr/bin/python3", "/usr/local/bin/python3")
                if Path(candidate).exists()
            ),
            None,
        )
        if system is None:
            raise RuntimeError(
                "no system python3 that the sandbox's user can run; cannot run the mock runner"
            )
        shutil.rmtree(venv, ignore_errors=True)
        # umask 022: the sandbox's user runs this interpreter, and the settings' umask (077, the data
        # directory is private) would close it to that user.
        subprocess.run([system, "-m", "venv", str(venv)], check=True, umask=0o022)
        install = [str(python), "-m", "pip", "install", "--quiet", *pins]
        subprocess.run(install, check=True, umask=0o022)
        stamp.touch()
    return str(python)


@cache
def script_folder(source: Path) -> Path:
    """A folder outside the project (and readable by the sandbox's user) holding a copy of `source`."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"agentsite-{source.stem}-{digest}"
    if not (folder / source.name).exists():
        staging = Path(tempfile.mkdtemp(prefix=f"agentsite-{source.stem}-"))
        shutil.copy(source, staging / source.name)
        staging.chmod(0o755)
        (staging / source.name).chmod(0o644)
        try:
            staging.rename(folder)
        except OSError:  # another test run put it there first
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def runner_folder() -> Path:
    return script_folder(MOCK_RUNNER_SOURCE)


def mock_runner_script() -> Path:
    return runner_folder() / MOCK_RUNNER_SOURCE.name


def mcp_server_folder() -> Path:
    return script_folder(MCP_SERVER_SOURCE)


def mcp_server_script() -> Path:
    return mcp_server_folder() / MCP_SERVER_SOURCE.name
