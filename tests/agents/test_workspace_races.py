"""A folder swapped for a symlink while the server lists, reads or writes through it (a sandboxed command
of the same session can do that at any moment) is never followed out: file tools, ACP fs methods, the
files an MCP server returns and the workspace REST API reach the workspace only by walking from its open
handle (agents/tools/workspace.py, docs/protocol.md "Workspace files")."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from acp import fs as acp_fs
from agents.sandbox.site import workspace_dir
from agents.tools import ToolContext, ToolError, registry
from agents.tools.workspace import PathOutside, WorkspaceDir, list_folder, open_file, write_file
from tests import factories

pytestmark = pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume")
CANARY = "canary-7f3c.txt"  # the file outside: its name must never be listed ...
SECRET = "secret-91d2"  # ... nor its content read
RACE_SECONDS = 4.0

# Swaps `x` (a folder holding mine.txt) with a symlink to the outside folder, as fast as it can, in one
# atomic step (renameat2 RENAME_EXCHANGE): `x` is always one or the other, as in a command that runs
# `mv x x.dir && ln -s /elsewhere x` and back in a loop, only faster.
SWAPPER = """
import ctypes, os, sys
workspace, outside = sys.argv[1], sys.argv[2]
os.chdir(workspace)
os.symlink(outside, "x.link")
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
while True:
    if libc.renameat2(AT_FDCWD, b"x", AT_FDCWD, b"x.link", RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
"""


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / CANARY).write_text(SECRET)
    return folder


def assert_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == [CANARY]
    assert (outside / CANARY).read_text() == SECRET


@pytest.fixture
def swapping(outside: Path) -> Iterator[Any]:
    """Start the swapper in a workspace (a process of its own: it races on the other core)."""
    started: list[subprocess.Popen[bytes]] = []

    def start(workspace: Path) -> None:
        (workspace / "x").mkdir()
        (workspace / "x" / "mine.txt").write_text("mine")
        started.append(subprocess.Popen([sys.executable, "-c", SWAPPER, str(workspace), str(outside)]))
        time.sleep(0.2)

    yield start
    for process in started:
        process.kill()
        process.wait()


# --- without a race: links that lead out are refused wherever they are --------------------------------


def test_the_walk_refuses_links_out_and_follows_links_inside(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "real").mkdir(parents=True)
    (workspace / "real" / "a.txt").write_text("inside")
    (workspace / "out").symlink_to(outside)
    (workspace / "abs-out").symlink_to(outside / CANARY)
    (workspace / "up").symlink_to("../outside")
    (workspace / "rel").symlink_to("real")
    (workspace / "abs-in").symlink_to(workspace / "real")
    (workspace / "sandbox-in").symlink_to("/workspace/real/a.txt")  # as a command in the sandbox sees it
    (workspace / "loop").symlink_to("loop")

    for path in ("out", "out/x", "up", "abs-out", "real/../../outside", "loop"):
        with pytest.raises(PathOutside):
            list_folder(workspace, path)
        with pytest.raises(PathOutside):
            open_file(workspace, f"{path}/{CANARY}" if path != "abs-out" else path)
        with pytest.raises(PathOutside):
            write_file(workspace, f"{path}/planted.txt" if path != "abs-out" else path, b"pwned")
    assert_untouched(outside)
    for path in ("rel/a.txt", "abs-in/a.txt", "sandbox-in"):
        fd, shown = open_file(workspace, path)
        assert os.read(fd, 100) == b"inside" and shown == "real/a.txt"
        os.close(fd)
    shown, entries = list_folder(workspace, "rel")
    assert shown == "real" and [entry.name for entry in entries] == ["a.txt"]
    listed = {entry.name: entry.kind for entry in list_folder(workspace, ".")[1]}
    assert listed["out"] == "symlink" and listed["real"] == "directory"


def test_the_walk_holds_a_folder_that_is_swapped_while_it_is_open(tmp_path: Path, outside: Path) -> None:
    """What is done relative to a folder opened before the swap stays in that folder (now `x.dir`)."""
    workspace = tmp_path / "ws"
    (workspace / "x").mkdir(parents=True)
    with WorkspaceDir(workspace) as walk:
        walk.folder("x")
        (workspace / "x").rename(workspace / "x.dir")
        (workspace / "x").symlink_to(outside)
        assert walk.entries() == []
        fd, shown, created = walk.open_for_writing("new.txt")
        os.close(fd)
    assert created and shown == "x/new.txt" and (workspace / "x.dir" / "new.txt").exists()
    assert_untouched(outside)


def test_acp_fs_never_reads_or_writes_through_a_link_out(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "x").mkdir(parents=True)
    target = workspace / "x" / CANARY  # the path the permission check saw
    (workspace / "x").rename(workspace / "x.dir")
    (workspace / "x").symlink_to(outside)

    with pytest.raises(ToolError):
        acp_fs._read_text(workspace, target)
    with pytest.raises(ToolError):
        acp_fs._write_text(workspace, target, "pwned")
    assert_untouched(outside)


# --- the race, for several seconds ----------------------------------------------------------------


async def test_file_tools_racing_a_swap_never_leak_or_write_outside(
    tmp_path: Path, outside: Path, swapping: Any
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    swapping(workspace)
    ctx = ToolContext(workspace=workspace, session_id="race")
    calls = [
        ("list_files", {"path": "x"}),
        ("read_file", {"path": f"x/{CANARY}"}),
        ("read_file", {"path": "x/mine.txt"}),
        ("write_file", {"path": "x/planted.txt", "content": "pwned"}),
    ]
    counts: dict[str, int] = {"ok": 0, "refused": 0}
    deadline = time.monotonic() + RACE_SECONDS
    while time.monotonic() < deadline:
        for name, arguments in calls:
            tool, params = registry.parse(name, arguments)
            try:
                output = await tool.run(params, ctx)
            except ToolError as exc:
                output = str(exc)
                counts["refused"] += 1
            else:
                counts["ok"] += 1
            assert SECRET not in output, (name, output)
            assert name != "list_files" or CANARY not in output, output
        await asyncio.sleep(0)
    assert_untouched(outside)
    assert counts["ok"] > 10 and counts["refused"] > 10, counts  # both sides of the swap were hit


@pytest.fixture
def session_workspace(alice: Any) -> Path:
    session = factories.session(alice, session_id="race")
    root = workspace_dir(user_id=alice.id, session_id=session.id)
    for leftover in root.iterdir():  # an earlier test's session of the same name and owner id
        shutil.rmtree(leftover) if leftover.is_dir() and not leftover.is_symlink() else leftover.unlink()
    return root


@pytest.mark.django_db(transaction=True)
def test_the_rest_api_racing_a_swap_never_leaks_writes_outside_or_fails(
    alice_key: str, session_workspace: Path, outside: Path, swapping: Any
) -> None:
    swapping(session_workspace)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {alice_key}")
    files = "/api/v1/chat/sessions/race/files"
    listing = f"{files}?path=x"
    requests = [
        ("get", listing, {200, 400, 404}),
        ("get", f"{files}/x/{CANARY}", {200, 400, 404}),
        ("get", f"{files}/x/{CANARY}?preview=1", {200, 400, 404}),
        ("get", f"{files}/x/mine.txt?download=1", {200, 400, 404}),
        ("put", f"{files}/x/planted.txt", {200, 201, 400, 404, 409}),
        ("delete", f"{files}/x/{CANARY}", {400, 404}),
    ]
    statuses: dict[int, int] = {}
    deadline = time.monotonic() + RACE_SECONDS
    while time.monotonic() < deadline:
        for method, url, allowed in requests:
            if method == "put":
                response = client.put(url, data=b"pwned", content_type="application/octet-stream")
            else:
                response = getattr(client, method)(url)
            body = b"".join(response) if response.streaming else response.content
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            assert response.status_code in allowed, (method, url, response.status_code, body[:300])
            assert SECRET.encode() not in body, (method, url, body[:300])
            assert url != listing or CANARY.encode() not in body, body[:300]
    assert_untouched(outside)
    assert statuses.get(200, 0) > 10 and statuses.get(400, 0) + statuses.get(404, 0) > 10, statuses
