"""A workspace belongs to exactly one chat session (docs/protocol.md §6.1), whatever ids users choose."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings

from agents.contract import ChatRequest
from agents.sandbox.site import workspace_dir, workspace_name
from agents.tools import ToolContext, ToolError, registry
from chat.runtime import turn_setup
from tests import factories

pytestmark = pytest.mark.django_db

CRAFTED = [
    "proj.x",
    "s-" + hashlib.sha256(b"proj.x").hexdigest()[:32],
    "..",
    ".",
    "a:b",
    "раб",
    "pa",
    "x" * 128,
]


def setup_for(session_id: str) -> Any:
    return turn_setup(session_id, ChatRequest(message_id="m", content="hi"))


async def read(workspace: Path, path: str) -> str:
    tool, params = registry.parse("read_file", {"path": path})
    return await tool.run(params, ToolContext(workspace=workspace, session_id="s"))


def test_crafted_ids_of_two_users_never_share_a_workspace(alice: Any, bob: Any) -> None:
    workspaces = set()
    for owner, prefix in [(alice, "a"), (bob, "b")]:
        for session_id in CRAFTED:
            factories.session(owner, session_id=f"{prefix}{session_id}")
            workspaces.add(setup_for(f"{prefix}{session_id}").workspace)
    # The old scheme's collision: a plain id equal to another session's hashed folder name.
    factories.session(alice, session_id="proj.x")
    factories.session(bob, session_id="s-" + hashlib.sha256(b"proj.x").hexdigest()[:32])
    workspaces.add(setup_for("proj.x").workspace)
    workspaces.add(setup_for("s-" + hashlib.sha256(b"proj.x").hexdigest()[:32]).workspace)
    assert len(workspaces) == 2 * len(CRAFTED) + 2
    assert all(path.parent == Path(settings.WORKSPACES_DIR) and len(path.name) == 64 for path in workspaces)


def test_another_users_file_cannot_be_read_through_a_crafted_id(alice: Any, bob: Any) -> None:
    crafted = "s-" + hashlib.sha256(b"proj.x").hexdigest()[:32]
    factories.session(alice, session_id="proj.x")
    factories.session(bob, session_id=crafted)
    mine = setup_for("proj.x").workspace
    (mine / "secret.txt").write_text("alice's")
    theirs = setup_for(crafted).workspace
    with pytest.raises(ToolError, match="no file"):
        asyncio.run(read(theirs, "secret.txt"))
    assert asyncio.run(read(mine, "secret.txt")) == "alice's"


def test_the_migration_moves_old_folders_and_the_first_session_keeps_a_shared_one(
    alice: Any, bob: Any
) -> None:
    migration = importlib.import_module("chat.migrations.0003_workspaces_by_owner")
    root = Path(settings.WORKSPACES_DIR)
    crafted = "s-" + hashlib.sha256(b"old.id").hexdigest()[:32]
    factories.session(alice, session_id="old.id")
    factories.session(alice, session_id="plain")
    factories.session(bob, session_id=crafted)  # created later: the old scheme gave it alice's folder
    for name, text in [(crafted, "alice's old.id files"), ("plain", "plain files")]:
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "f.txt").write_text(text)

    migration.forwards(apps, None)

    moved = root / workspace_name(user_id=alice.id, session_id="old.id")
    assert (moved / "f.txt").read_text() == "alice's old.id files"
    assert (
        root / workspace_name(user_id=alice.id, session_id="plain") / "f.txt"
    ).read_text() == "plain files"
    assert not (root / crafted).exists() and not (root / "plain").exists()
    assert not (workspace_dir(user_id=bob.id, session_id=crafted) / "f.txt").exists()

    migration.backwards(apps, None)
    assert (root / crafted / "f.txt").read_text() == "alice's old.id files"
    assert (root / "plain" / "f.txt").exists()
