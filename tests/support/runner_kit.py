"""The mock ACP runner installed the way a real runner would be, so that it can run in the sandbox.

A sandbox never shows the project's code, and a root server's sandboxes run as an unprivileged user
(agents/sandbox/site.py), who cannot reach an interpreter under /root. So tests run the mock runner:
- as a script copied out of the project into a folder of its own (shown through `sandbox_paths`);
- with an interpreter the sandbox's user can run: the test's own Python when it can, otherwise a
  virtualenv made once (under var/, cached) from the system's python3 with the same ACP SDK version.
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
SDK = "agent-client-protocol"


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
    """An interpreter with the ACP SDK that the sandbox's user can run."""
    uid = _sandbox_uid()
    if uid is None or _reachable(Path(sys.base_prefix), uid):
        return sys.executable
    venv = ROOT / "var" / "runner-python"
    python = venv / "bin" / "python"
    version = importlib.metadata.version(SDK)
    stamp = venv / f".installed-{version}"
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
        install = [str(python), "-m", "pip", "install", "--quiet", f"{SDK}=={version}"]
        subprocess.run(install, check=True, umask=0o022)
        stamp.touch()
    return str(python)


@cache
def runner_folder() -> Path:
    """A folder outside the project (and readable by the sandbox's user) holding the mock runner script."""
    digest = hashlib.sha256(MOCK_RUNNER_SOURCE.read_bytes()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"agentsite-mock-runner-{digest}"
    script = folder / "mock_acp_runner.py"
    if not script.exists():
        staging = Path(tempfile.mkdtemp(prefix="agentsite-mock-runner-"))
        shutil.copy(MOCK_RUNNER_SOURCE, staging / "mock_acp_runner.py")
        staging.chmod(0o755)
        (staging / "mock_acp_runner.py").chmod(0o644)
        try:
            staging.rename(folder)
        except OSError:  # another test run put it there first
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def mock_runner_script() -> Path:
    return runner_folder() / "mock_acp_runner.py"
