"""Disk quotas (docs/protocol.md §6.6): a workspace holds at most AGENTSITE_WORKSPACE_QUOTA_MB and a user's
workspaces together AGENTSITE_USER_DISK_QUOTA_MB. Uploads past them answer 413 `quota_exceeded`, a file tool
write is a tool error, a command that fills one is killed and ends with a tool error; writes stay refused
until files are deleted; every refusal is in the audit trail."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from agents.sandbox.site import workspace_dir
from agents.tools import ToolContext, ToolError, registry
from agents.tools.quota import MB, DiskQuota, QuotaExceeded, tree_bytes, usage
from audit.models import AuditEntry
from audit.services import TurnAudit
from chat.runtime import TurnSetup, _tool_context
from tests import factories
from tests.support.sandboxes import sandbox_of, sandbox_workspace
from tests.test_rest_keys import assert_error


@pytest.fixture(autouse=True)
def fresh_measures() -> Iterator[None]:
    usage.reset()
    yield
    usage.reset()


async def call(ctx: ToolContext, name: str, **arguments: Any) -> str:
    tool, params = registry.parse(name, arguments)
    return await tool.run(params, ctx)


# --- measuring ----------------------------------------------------------------------------------------


def test_usage_is_the_blocks_on_disk_without_following_links(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / "a" / "b" / "data").write_bytes(os.urandom(3 * MB))
    os.link(workspace / "a" / "b" / "data", workspace / "hard")  # the same blocks once
    with open(workspace / "sparse", "wb") as handle:  # 1 GB long, nothing written
        handle.truncate(1024 * MB)
    big = tmp_path / "elsewhere"
    big.mkdir()
    (big / "other").write_bytes(os.urandom(2 * MB))
    (workspace / "link").symlink_to(big)

    used = tree_bytes(workspace)
    assert 3 * MB <= used < 3 * MB + 256 * 1024
    assert tree_bytes(tmp_path / "missing") == 0


def test_a_tree_deeper_than_the_folders_held_open_is_counted_whole(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    deep = workspace
    for index in range(150):
        deep = deep / f"d{index}"
    deep.mkdir(parents=True)
    (deep / "bottom").write_bytes(os.urandom(MB))
    (workspace / "d0" / "side").write_bytes(os.urandom(MB))
    assert tree_bytes(workspace) >= 2 * MB


# --- file tools -------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_file_tool_write_past_the_quota_is_refused_until_files_are_deleted(
    tmp_path: Path, alice: Any
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    quota = DiskQuota(workspace=workspace, workspace_limit=2 * MB, user_limit=None)

    async def disk_quota() -> DiskQuota:
        return quota

    audit = TurnAudit(user_id=alice.id, session_id="s")
    ctx = ToolContext(workspace=workspace, session_id="s", disk_quota=disk_quota, audit=audit)
    await call(ctx, "write_file", path="one.txt", content="x" * (MB + MB // 2))
    with pytest.raises(ToolError, match="would pass the workspace's disk quota"):
        await call(ctx, "write_file", path="two.txt", content="y" * MB)
    assert not (workspace / "two.txt").exists()  # nothing left of the refused write
    await call(ctx, "write_file", path="one.txt", content="z" * (MB + MB // 2))  # a rewrite in place fits

    os.unlink(workspace / "one.txt")  # deleted (by a command: the server measures again)
    quota.changed()
    written = await call(ctx, "write_file", path="two.txt", content="y" * MB)
    assert written == f"Wrote {MB} bytes to 'two.txt'."
    entry = await AuditEntry.objects.filter(action="quota.exceeded").aget()
    assert entry.user_id == alice.id and entry.details["scope"] == "workspace"
    assert entry.details["limit_bytes"] == 2 * MB and entry.details["tool"] == "write_file"


# --- commands -----------------------------------------------------------------------------------------


@pytest.fixture
def sandboxed() -> Iterator[Path]:
    with sandbox_workspace() as folder:
        yield folder


@pytest.mark.django_db(transaction=True)
async def test_a_dd_past_the_quota_is_killed_with_a_tool_error_and_writes_stay_refused(
    sandboxed: Path, alice: Any
) -> None:
    quota = DiskQuota(workspace=sandboxed, workspace_limit=8 * MB, user_limit=None)

    async def disk_quota() -> DiskQuota:
        return quota

    ctx = ToolContext(
        workspace=sandboxed,
        session_id="s",
        sandbox=sandbox_of("bwrap"),
        disk_quota=disk_quota,
        audit=TurnAudit(user_id=alice.id, session_id="s"),
    )
    started = time.monotonic()
    # dd in a loop, ~40 MB/s, for ever (or up to the 1 GB file-size limit): only the quota's watch stops it.
    command = "while dd if=/dev/zero bs=1M count=1 2>/dev/null; do sleep 0.02; done > big; echo finished"
    with pytest.raises(ToolError, match="disk quota is used up") as refused:
        await call(ctx, "shell", command=command, timeout_seconds=120)
    assert "killed with every process it started" in str(refused.value)
    assert "finished" not in str(refused.value)
    assert time.monotonic() - started < 30
    size = (sandboxed / "big").stat().st_size
    await asyncio.sleep(1)
    assert (sandboxed / "big").stat().st_size == size  # not kept growing: nothing runs any more
    assert 8 * MB < size < 200 * MB

    with pytest.raises(ToolError, match="disk quota is used up"):
        await call(ctx, "write_file", path="note.txt", content="x")
    with pytest.raises(ToolError, match="disk quota is used up"):  # a command that adds is stopped too
        await call(ctx, "shell", command="sleep 1; head -c 100000 /dev/zero > more; sleep 5")
    assert "[exit code: 0]" in await call(ctx, "shell", command="rm big more; ls")  # deleting works
    assert await call(ctx, "write_file", path="note.txt", content="x") == "Wrote 1 bytes to 'note.txt'."
    commands = [entry async for entry in AuditEntry.objects.filter(action="command.run").order_by("id")]
    assert commands[0].details["status"] == "quota_exceeded"
    assert await AuditEntry.objects.filter(action="quota.exceeded").acount() == 3


async def test_a_command_within_the_quota_runs_as_before(sandboxed: Path) -> None:
    quota = DiskQuota(workspace=sandboxed, workspace_limit=8 * MB, user_limit=None)

    async def disk_quota() -> DiskQuota:
        return quota

    ctx = ToolContext(workspace=sandboxed, session_id="s", sandbox=sandbox_of("bwrap"), disk_quota=disk_quota)
    output = await call(ctx, "shell", command="head -c 1000000 /dev/zero > f; sleep 1.2; echo done")
    assert output == "done\n\n[exit code: 0]"


# --- uploads ----------------------------------------------------------------------------------------


FILES = "/api/v1/chat/sessions/{}/files"


def upload(client: Client, key: str, session: str, path: str, size: int) -> Any:
    return client.put(
        f"{FILES.format(session)}/{path}",
        data=b"u" * size,
        content_type="application/octet-stream",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )


@pytest.fixture
def two_workspaces(alice: Any) -> list[Path]:
    folders = []
    for session_id in ("q1", "q2"):
        session = factories.session(alice, session_id=session_id)
        root = workspace_dir(user_id=alice.id, session_id=session.id)
        for leftover in root.iterdir():
            shutil.rmtree(leftover) if leftover.is_dir() and not leftover.is_symlink() else leftover.unlink()
        folders.append(root)
    return folders


@override_settings(AGENTSITE_WORKSPACE_QUOTA_MB=2, AGENTSITE_USER_DISK_QUOTA_MB=3)
def test_uploads_past_the_workspace_and_the_user_quota_are_413(
    client: Client, alice_key: str, two_workspaces: list[Path]
) -> None:
    first, second = two_workspaces
    assert upload(client, alice_key, "q1", "a.bin", MB + MB // 2).status_code == 201
    error = assert_error(upload(client, alice_key, "q1", "b.bin", MB), 413, "quota_exceeded")
    assert "the workspace's disk quota" in error["message"] and "2 MB" in error["message"]
    assert not (first / "b.bin").exists() and not [p for p in first.iterdir() if p.name.startswith(".")]

    assert upload(client, alice_key, "q2", "c.bin", MB).status_code == 201
    error = assert_error(upload(client, alice_key, "q2", "d.bin", MB // 2), 413, "quota_exceeded")
    assert "your disk quota" in error["message"] and "3 MB" in error["message"]
    entries = list(AuditEntry.objects.filter(action="quota.exceeded").order_by("id"))
    assert [entry.details["scope"] for entry in entries] == ["workspace", "user"]

    deleted = client.delete(f"{FILES.format('q1')}/a.bin", HTTP_AUTHORIZATION=f"Bearer {alice_key}")
    assert deleted.status_code == 200
    assert upload(client, alice_key, "q2", "d.bin", MB // 2).status_code == 201  # room again


@pytest.mark.django_db(transaction=True)
def test_the_runtime_gives_tools_the_quota_of_the_settings_and_the_users_workspaces(
    alice: Any, two_workspaces: list[Path]
) -> None:
    setup = TurnSetup(
        refusal=None,
        choice=None,  # type: ignore[arg-type]
        system_prompt="",
        history=[],
        tools=[],
        specs=[],
        disabled_tools=frozenset(),
        undiscovered_tools=False,
        workspace=two_workspaces[0],
        user_id=alice.id,
        agent_name="",
        sandbox_network=False,
        may_run_unsandboxed=False,
    )
    ctx = _tool_context(setup, "q1")
    assert ctx.disk_quota is not None
    quota = asyncio.run(_read(ctx))
    assert (quota.workspace_limit, quota.user_limit) == (1024 * MB, 5120 * MB)
    assert quota.others == (two_workspaces[1],)
    with pytest.raises(QuotaExceeded):
        DiskQuota(workspace=two_workspaces[0], workspace_limit=MB, user_limit=None).check(MB + 1)


async def _read(ctx: ToolContext) -> DiskQuota:
    assert ctx.disk_quota is not None
    return await ctx.disk_quota()
