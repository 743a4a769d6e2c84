"""Code a user can write is never run with a runner's secrets (docs/protocol.md §6.6): an ACP runner that
staff start with an interpreter (`python -m module`) imports its own module, never one a user placed in the
workspace (its working directory), because runners run with PYTHONSAFEPATH=1."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.sandbox.site import workspace_dir
from agentsite.dev.fake_llm import Reply
from tests import factories
from tests.acp.support import configure_runner, delegate, run_turn, tool_results
from tests.support.runner_kit import MOCK_RUNNER_SOURCE, runner_folder
from tests.support.sandboxes import sandbox_of
from tests.support.ws import connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

SECRET = "staff-only-7f3a"
# What a user uploads under the runner's module name: it tells the user the runner's environment.
PLANTED = """
import json, os
with open(os.path.join(os.getcwd(), "leaked.txt"), "w") as out:
    json.dump(dict(os.environ), out)
"""


def plant(workspace: Path, name: str, text: str) -> None:
    """A file the user uploaded (as the REST upload writes it: owned like the workspace, readable)."""
    path = workspace / name
    path.write_text(text)
    owner = workspace.stat()
    os.chown(path, owner.st_uid, owner.st_gid)
    path.chmod(0o644)


async def test_a_module_planted_in_the_workspace_is_not_run_in_place_of_the_runners_own(
    alice: Any, alice_key: str, llm: Any
) -> None:
    sandbox_of("bwrap")  # skips (fails in CI) where bubblewrap does not work
    module = MOCK_RUNNER_SOURCE.stem
    await sync_to_async(configure_runner)(
        args=["-m", module, "--mode", "env"],
        env={"PYTHONPATH": str(runner_folder()), "RUNNER_SECRET": SECRET},
    )
    session = await sync_to_async(factories.session)(alice)
    workspace = workspace_dir(user_id=alice.id, session_id=session.id)
    plant(workspace, f"{module}.py", PLANTED)
    plant(workspace, "sitecustomize.py", PLANTED)
    plant(workspace, "usercustomize.py", PLANTED)

    llm.script(
        delegate("start", runner="mock_runner", message="env"),
        delegate("close", runner="mock_runner"),
        Reply(text="ok"),
    )
    ws, _ = await connect(session.id, key=alice_key)
    started, _ = tool_results(await run_turn(ws, "go"))
    await ws.disconnect()

    assert not (workspace / "leaked.txt").exists(), "the planted module ran with the runner's secrets"
    assert started["is_error"] is False, started
    seen = json.loads(started["output"])
    assert seen["env"]["RUNNER_SECRET"] == SECRET and seen["env"]["PYTHONSAFEPATH"] == "1"
    assert seen["cwd"] == "/workspace", "a runner still works in its workspace"
