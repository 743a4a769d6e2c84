"""The data directory is the server's own (docs/protocol.md §6.3; agentsite/datadir.py): what it creates
there is 0600/0700, what an earlier version left open is closed, folders a sandbox's user passes through
are 0711. A real server's files are checked in tests/e2e/test_secrets_at_rest.py."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsite.datadir import private_data_dir
from tests.test_settings import REPO_ROOT, base_environ


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def keep_umask() -> Iterator[None]:
    previous = os.umask(0o077)
    os.umask(previous)
    yield
    os.umask(previous)


def test_a_new_data_directory_is_0700_and_what_is_created_in_it_is_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "above" / "data"
    os.umask(0o022)

    private_data_dir(data_dir)
    (data_dir / "file").write_text("x")
    (data_dir / "folder").mkdir()

    assert mode(data_dir) == 0o700
    assert mode(data_dir / "file") == 0o600 and mode(data_dir / "folder") == 0o700
    assert mode(tmp_path / "above") == 0o755  # not the data directory: a sandbox's user may pass through


def test_what_an_earlier_version_left_open_is_closed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    files = [data_dir / name for name in ("agentsite.sqlite3", "agentsite.sqlite3-wal", "secret_key")]
    for path in files:
        path.write_text("x")
        path.chmod(0o644)
    workspaces = data_dir / "workspaces"
    workspaces.mkdir()
    workspaces.chmod(0o755)

    private_data_dir(data_dir, files=[*files, data_dir / "missing"], folders=[workspaces])

    assert mode(data_dir) == 0o711  # no listing; passing through stays as it was (a sandbox may need it)
    assert [mode(path) for path in files] == [0o600, 0o600, 0o600]
    assert mode(workspaces) == 0o711


def test_a_sticky_shared_folder_and_what_others_own_are_left_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    foreign = shared / "foreign"
    foreign.write_text("x")
    foreign.chmod(0o644)
    if os.geteuid() == 0:
        os.chown(foreign, 65534, 65534)

    private_data_dir(shared, files=[foreign] if os.geteuid() == 0 else [])

    assert mode(shared) == 0o1777
    assert mode(foreign) == 0o644


def test_a_server_process_creates_its_secret_key_and_database_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh"
    environ = base_environ(data_dir, DEBUG="true")
    del environ["SECRET_KEY"]

    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert mode(data_dir) == 0o700
    assert mode(data_dir / "secret_key") == 0o600
    assert mode(data_dir / "agentsite.sqlite3") == 0o600
    leftovers = [p for p in data_dir.iterdir() if p.name.startswith("agentsite.sqlite3-")]
    assert all(mode(path) == 0o600 for path in leftovers)
