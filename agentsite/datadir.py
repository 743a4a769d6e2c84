"""The data directory is the server's own: what it creates there, only its OS user may read (§6.3).

`private_data_dir` runs first thing in settings, in every process (server, workers, `manage.py`):
- the process's umask becomes 077, so every file and folder it creates from then on — the SQLite
  database and its `-wal`/`-shm` (SQLite gives those the database file's mode), the generated
  `secret_key`, runner records, workspaces and homes — is 0600 / 0700 unless the code says otherwise;
- the data directory is created 0700; one that already exists loses read and write for group and others
  (listing), not its x bits: a sandbox running as another user passes through it to its workspace
  (agents/sandbox/site.py gives it o+x when that is needed, never more);
- files and folders earlier versions created there with open modes are closed the same way.

Where something must stay reachable by another user, the code that creates it says so explicitly: the
sandbox's account files (0644), and the folders a sandbox's user passes through (0711, traverse without
listing; docs/architecture.md "where a tool's process runs").
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

PRIVATE_UMASK = 0o077
_LISTING = 0o066  # read and write for group and others; x (pass through) is decided elsewhere


def private_data_dir(data_dir: Path, *, files: Iterable[Path] = (), folders: Iterable[Path] = ()) -> None:
    """Set the umask, create or close `data_dir`, and close the given files (0600) and folders
    (no listing) that exist in it. Only what this user owns is changed, and never a sticky folder
    such as /tmp (an operator who points the data directory there gets no chmod of the system's)."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)  # folders above it: the process's own umask, as before
    os.umask(PRIVATE_UMASK)
    data_dir.mkdir(mode=0o700, exist_ok=True)
    _close(data_dir, _LISTING)
    for path in files:
        _close(path, 0o077)
    for path in folders:
        _close(path, _LISTING)


def _close(path: Path, bits: int) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if info.st_uid != os.geteuid() or stat.S_ISLNK(info.st_mode) or info.st_mode & stat.S_ISVTX:
        return
    mode = stat.S_IMODE(info.st_mode)
    if mode & bits:
        path.chmod(mode & ~bits)
