"""A folder swapped for a symlink between a path's check and its use (a sandboxed command of the same
session can do that at any moment) is refused, never followed: file tools, ACP fs methods and the
workspace REST API read, write and delete only inside the workspace (agents/tools/workspace.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from acp import fs as acp_fs
from agents.sandbox.site import workspace_dir
from agents.tools import ToolError
from agents.tools import files as file_tools
from agents.tools.workspace import resolve_in_workspace
from chat import files_api
from tests import factories

pytestmark = pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("server secret")
    return folder


def swap_for_symlink(folder: Path, outside: Path) -> None:
    """What a racing `mv sub sub.old && ln -s /elsewhere sub` does."""
    folder.rename(folder.with_name(folder.name + ".old"))
    folder.symlink_to(outside, target_is_directory=True)


def checked_then_swapped(workspace: Path, outside: Path, path: str) -> Path:
    (workspace / "sub").mkdir(exist_ok=True)
    (workspace / "sub" / "secret.txt").write_text("mine")
    target = resolve_in_workspace(workspace, path)  # the check passes: sub is a real folder now
    swap_for_symlink(workspace / "sub", outside)
    return target


def test_write_file_after_the_swap_writes_nothing_outside(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = checked_then_swapped(workspace, outside, "sub/new.txt")

    with pytest.raises(ToolError, match="not a folder inside the workspace"):
        file_tools._write_bytes(workspace, target, b"pwned", "sub/new.txt")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_read_file_after_the_swap_reads_nothing_outside(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = checked_then_swapped(workspace, outside, "sub/secret.txt")

    with pytest.raises(ToolError):
        file_tools._read_text(workspace, target, "sub/secret.txt")
    assert file_tools._old_text(workspace, target) is None  # the confirmation's diff shows nothing either


def test_acp_fs_after_the_swap_neither_reads_nor_writes_outside(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = checked_then_swapped(workspace, outside, "sub/secret.txt")

    with pytest.raises(ToolError):
        acp_fs._read_text(workspace, target)
    with pytest.raises(ToolError):
        acp_fs._write_text(workspace, target, "pwned")
    assert (outside / "secret.txt").read_text() == "server secret"


def test_a_final_symlink_is_replaced_or_refused_never_followed(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("mine")
    target = resolve_in_workspace(workspace, "a.txt")
    (workspace / "a.txt").unlink()
    (workspace / "a.txt").symlink_to(outside / "secret.txt")

    with pytest.raises(ToolError):
        file_tools._read_text(workspace, target, "a.txt")
    with pytest.raises(ToolError, match="Could not write"):
        file_tools._write_bytes(workspace, target, b"pwned", "a.txt")
    assert (outside / "secret.txt").read_text() == "server secret"


# --- the workspace REST API -----------------------------------------------------------------------


@pytest.fixture
def session_workspace(alice: Any) -> Path:
    session = factories.session(alice, session_id="race")
    root = workspace_dir(user_id=alice.id, session_id=session.id)
    for leftover in root.iterdir():  # an earlier test's session of the same name and owner id
        shutil.rmtree(leftover) if leftover.is_dir() and not leftover.is_symlink() else leftover.unlink()
    (root / "sub").mkdir()
    (root / "sub" / "secret.txt").write_text("mine")
    return root


def swap_after_the_check(monkeypatch: pytest.MonkeyPatch, workspace: Path, outside: Path) -> None:
    """The REST view resolves the path, then the folder is swapped before the file is touched."""
    original: Callable[[Path, str], Path] = files_api._entry_location

    def then_swap(root: Path, raw: str) -> Path:
        entry = original(root, raw)
        if (workspace / "sub").is_dir() and not (workspace / "sub").is_symlink():
            swap_for_symlink(workspace / "sub", outside)
        return entry

    monkeypatch.setattr(files_api, "_entry_location", then_swap)
    original_resolve: Callable[[Path, str], Path] = files_api._resolve

    def resolve_then_swap(root: Path, raw: str) -> Path:
        resolved = original_resolve(root, raw)
        if (workspace / "sub").is_dir() and not (workspace / "sub").is_symlink():
            swap_for_symlink(workspace / "sub", outside)
        return resolved

    monkeypatch.setattr(files_api, "_resolve", resolve_then_swap)


def test_rest_upload_after_the_swap_writes_nothing_outside(
    alice_key: str, session_workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swap_after_the_check(monkeypatch, session_workspace, outside)
    response = Client().put(
        "/api/v1/chat/sessions/race/files/sub/new.txt",
        data=b"pwned",
        content_type="application/octet-stream",
        HTTP_AUTHORIZATION=f"Bearer {alice_key}",
    )

    assert response.status_code == 409, response.content
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_rest_delete_after_the_swap_removes_nothing_outside(
    alice_key: str, session_workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swap_after_the_check(monkeypatch, session_workspace, outside)
    response = Client().delete(
        "/api/v1/chat/sessions/race/files/sub/secret.txt", HTTP_AUTHORIZATION=f"Bearer {alice_key}"
    )

    assert response.status_code == 404, response.content
    assert (outside / "secret.txt").read_text() == "server secret"


def test_rest_download_after_the_swap_reads_nothing_outside(
    alice_key: str, session_workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swap_after_the_check(monkeypatch, session_workspace, outside)
    response = Client().get(
        "/api/v1/chat/sessions/race/files/sub/secret.txt", HTTP_AUTHORIZATION=f"Bearer {alice_key}"
    )

    assert response.status_code in (400, 404), response.content
    assert b"server secret" not in b"".join(response) if response.streaming else response.content
    assert not os.path.exists(session_workspace / "sub" / "new.txt")
