"""Which host paths a program needs visible inside the sandbox, and which paths may never be shown.

A runner's or MCP server's program is usually installed outside the system directories: a
virtualenv, `~/.local`, `/opt/<tool>`. Its executable is found on the server's PATH, and it is shown
read-only together with its installation prefix (the folder above its `bin/`), following symlinks
(a virtualenv's `python` → the base interpreter's prefix) and a script's `#!` interpreter. Staff may
list more paths (`sandbox_paths`); none of them may be or contain the data directory, the project's
code or a workspace (docs/protocol.md §6.1).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from agents.sandbox.base import SandboxRefused

SYSTEM_ROOTS = (Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"), Path("/lib32"))
_MAX_HOPS = 8


def _is_system(path: Path) -> bool:
    return any(path == root or path.is_relative_to(root) for root in SYSTEM_ROOTS)


def _prefix(executable: Path) -> Path:
    """The installation a program belongs to: the folder above `bin/` (`sbin/`), else its own folder."""
    folder = executable.parent
    return folder.parent if folder.name in {"bin", "sbin"} else folder


def _shebang(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            first = handle.readline(256)
    except OSError:
        return []
    if not first.startswith(b"#!"):
        return []
    return first[2:].decode("utf-8", errors="replace").split()


def resolve_program(command: str, *, search_path: str) -> Path | None:
    """The executable `command` names: an absolute path as given, a bare name looked up on `search_path`."""
    if os.sep in command:
        candidate = Path(command)
        return candidate if candidate.is_absolute() and candidate.exists() else None
    found = shutil.which(command, path=search_path)
    return Path(found) if found else None


def program_paths(executable: Path, *, search_path: str) -> list[Path]:
    """The host folders that must be visible (read-only) for `executable` to run.

    Follows the chain executable → symlink targets → `#!` interpreter (including `/usr/bin/env NAME`),
    and shows the installation prefix of every link of it that lies outside the system directories.
    """
    shown: list[Path] = []
    pending = [executable]
    hops = 0
    while pending and hops < _MAX_HOPS:
        hops += 1
        current = pending.pop()
        chain = [current]
        resolved = Path(os.path.realpath(current))
        if resolved != current:
            chain.append(resolved)
        for link in chain:
            if not _is_system(link):
                prefix = _prefix(link)
                if prefix not in shown:
                    shown.append(prefix)
        interpreter = _shebang(resolved)
        if interpreter:
            program = interpreter[0]
            if Path(program).name == "env" and len(interpreter) > 1:
                found = resolve_program(interpreter[1], search_path=search_path)
                if found is not None:
                    pending.append(found)
            elif Path(program).is_absolute():
                pending.append(Path(program))
    return shown


def forbidden_overlap(path: Path, forbidden: Sequence[Path]) -> Path | None:
    """The forbidden path that `path` is, contains or lies inside; None when it touches none."""
    for guarded in forbidden:
        if path == guarded or path.is_relative_to(guarded) or guarded.is_relative_to(path):
            return guarded
    return None


def is_virtualenv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


def check_program_paths(paths: Sequence[Path], *, data_dir: Path, code_dir: Path) -> None:
    """Refuse to show a program whose installation overlaps the data directory or the project's code.

    A virtualenv inside the project's folder (the server's own `.venv`) is an installation, not the
    project's code, and may be shown; the folder it sits in is not.
    """
    for path in paths:
        if forbidden_overlap(path, [data_dir]) is not None:
            raise SandboxRefused(
                f"The program lies in the server's data directory ({path}); it cannot be run."
            )
        if forbidden_overlap(path, [code_dir]) is not None and not (
            is_virtualenv(path) and path.is_relative_to(code_dir)
        ):
            raise SandboxRefused(
                f"The program's folder {path} overlaps the server's own code, which the sandbox never shows; "
                "install the program elsewhere."
            )


def sandbox_path_error(raw: str, *, forbidden: Sequence[Path]) -> str | None:
    """Why a configured `sandbox_paths` entry is refused (400), or None when it may be shown."""
    if not raw or "\x00" in raw:
        return "A sandbox path must be a non-empty absolute path."
    path = Path(raw)
    if not path.is_absolute():
        return f"'{raw}' is not an absolute path."
    real = Path(os.path.realpath(path))
    for candidate in {path, real}:
        guarded = forbidden_overlap(candidate, forbidden)
        if guarded is not None:
            return (
                f"'{raw}' overlaps {guarded}, which the sandbox never shows "
                "(the data directory, the project's code and the workspaces)."
            )
    return None
