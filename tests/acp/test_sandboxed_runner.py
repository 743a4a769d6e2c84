"""An ACP runner in the sandbox (docs/protocol.md §6.1): it sees its workspace at /workspace and its own
persistent HOME, nothing of the server and nothing of other users; its fs/* requests are still served by
us inside the workspace; without a sandbox only holders of agents.run_unsandboxed may start one."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from agents.sandbox.site import reset_sandbox, workspace_dir
from agentsite.dev.fake_llm import Reply
from tests import factories
from tests.acp.support import configure_runner, delegate, marker_pids, run_turn, tool_results
from tests.support.sandboxes import sandbox_of
from tests.support.ws import connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.fixture(autouse=True)
def fresh_homes() -> None:
    """User ids repeat from test to test; the runner homes of earlier tests must not count."""
    shutil.rmtree(settings.DATA_DIR / "homes", ignore_errors=True)


@pytest.fixture
def bubblewrap() -> None:
    sandbox_of("bwrap")  # skips (fails in CI) where bubblewrap does not work


async def look(user: Any, key: str, llm: Any, probes: list[str], *, close: bool = True) -> dict[str, Any]:
    """Start the runner in a new chat session of `user`, ask what it sees, close it."""
    session = await sync_to_async(factories.session)(user)
    steps = [delegate("start", runner="mock_runner", message=json.dumps(probes))]
    if close:
        steps.append(delegate("close", runner="mock_runner"))
    llm.script(*steps, Reply(text="ok"))
    ws, _ = await connect(session.id, key=key)
    results = tool_results(await run_turn(ws, "look around"))
    await ws.disconnect()
    assert results[0]["is_error"] is False, results[0]
    return {**json.loads(results[0]["output"]), "session_id": session.id}


async def test_a_runner_sees_its_workspace_and_its_home_and_nothing_else(
    bubblewrap: None, alice: Any, alice_key: str, bob: Any, bob_key: str, llm: Any
) -> None:
    marker = await sync_to_async(configure_runner)("look")
    other = await sync_to_async(factories.session)(bob)
    others_workspace = workspace_dir(user_id=bob.id, session_id=other.id)
    probes = [
        str(settings.DATA_DIR),
        str(settings.BASE_DIR / "manage.py"),  # the folder itself may exist: its venv is shown inside it
        str(settings.BASE_DIR / "agents"),
        str(others_workspace),
        str(settings.DATA_DIR / "agentsite.sqlite3"),
        "/workspace",
        "/home/agent",
    ]
    seen = await look(alice, alice_key, llm, probes)

    assert seen["cwd"] == "/workspace" and seen["home"] == "/home/agent" and seen["uid"] == 1000
    assert seen["visible"] == {**dict.fromkeys(probes[:5], False), "/workspace": True, "/home/agent": True}
    assert len(seen["pids"]) <= 3, "its own PID namespace: bubblewrap's init, the runner, maybe a helper"
    assert marker_pids(marker) == []

    again = await look(alice, alice_key, llm, [])
    assert again["starts"] == 2, "alice's HOME for this runner persists between its starts"
    bobs = await look(bob, bob_key, llm, [])
    assert bobs["starts"] == 1, "bob's runner has a HOME of its own"
    home = settings.DATA_DIR / "homes" / str(alice.id) / "default" / "mock_runner"
    assert (home / ".mock-runner-starts").read_text() == "2"


async def test_fs_requests_under_workspace_are_served_from_the_sessions_workspace(
    bubblewrap: None, alice: Any, alice_key: str, llm: Any
) -> None:
    await sync_to_async(configure_runner)("fs")
    session = await sync_to_async(factories.session)(alice)
    llm.script(
        delegate("start", runner="mock_runner", message="write /workspace/notes/a.txt from the runner"),
        delegate("message", runner="mock_runner", message=f"read {settings.DATA_DIR}/secret_key"),
        delegate("close", runner="mock_runner"),
        Reply(text="ok"),
    )
    ws, _ = await connect(session.id, key=alice_key)
    wrote, refused, _ = tool_results(await run_turn(ws, "files"))
    await ws.disconnect()
    assert wrote["output"] == "wrote /workspace/notes/a.txt"
    workspace = workspace_dir(user_id=alice.id, session_id=session.id)
    assert (workspace / "notes" / "a.txt").read_text() == "from the runner"
    assert refused["output"].startswith("fs error:") and "outside the workspace" in refused["output"]


async def test_without_a_sandbox_a_user_without_the_permission_cannot_start_a_runner(
    alice: Any, alice_key: str, llm: Any, settings: Any
) -> None:
    settings.AGENTSITE_SANDBOX = "none"
    reset_sandbox()
    try:
        marker = await sync_to_async(configure_runner)("look")
        session = await sync_to_async(factories.session)(alice)
        llm.script(delegate("start", runner="mock_runner", message="[]"), Reply(text="ok"))
        ws, _ = await connect(session.id, key=alice_key)
        (started,) = tool_results(await run_turn(ws, "look"))
        await ws.disconnect()
        assert started["is_error"] is True
        assert (
            "no sandbox for commands" in started["output"] and "agents.run_unsandboxed" in started["output"]
        )
        assert marker_pids(marker) == []
    finally:
        reset_sandbox()


async def test_without_a_sandbox_a_superuser_starts_it_in_the_real_workspace(
    alice_key: str, llm: Any, settings: Any
) -> None:
    settings.AGENTSITE_SANDBOX = "none"
    reset_sandbox()
    try:
        await sync_to_async(configure_runner)("look")
        boss = await sync_to_async(factories.user)("boss")
        boss.is_superuser = True
        await sync_to_async(boss.save)()
        key = await sync_to_async(factories.api_key)(boss)
        seen = await look(boss, key, llm, [])
        assert seen["cwd"] == str(workspace_dir(user_id=boss.id, session_id=seen["session_id"]))
    finally:
        reset_sandbox()
