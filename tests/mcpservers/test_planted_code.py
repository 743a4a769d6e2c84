"""Code a user can write is never run with a staff MCP server's secrets (docs/protocol.md §6.6): a stdio
server started as `python -m module` starts in an empty folder of its own (the workspace stays at
/workspace) and with PYTHONSAFEPATH=1, so a module a user placed in the workspace is never imported in
place of the server's own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.sandbox.site import workspace_dir
from agentsite.dev.fake_llm import Reply
from tests import factories
from tests.acp.support import tool_results
from tests.acp.test_planted_code import PLANTED, SECRET, plant
from tests.mcpservers.support import call, configure_server, run_turn
from tests.support.runner_kit import MCP_SERVER_SOURCE, mcp_server_folder
from tests.support.sandboxes import sandbox_of
from tests.support.ws import connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]


async def test_a_module_planted_in_the_workspace_is_not_run_with_the_servers_secrets(
    alice: Any, alice_key: str, llm: Any
) -> None:
    sandbox_of("bwrap")  # skips (fails in CI) where bubblewrap does not work
    module = MCP_SERVER_SOURCE.stem
    await sync_to_async(configure_server)(
        args=["-m", module], env={"PYTHONPATH": str(mcp_server_folder()), "STAFF_SECRET": SECRET}
    )
    session = await sync_to_async(factories.session)(alice)
    workspace = workspace_dir(user_id=alice.id, session_id=session.id)
    for name in (f"{module}.py", "sitecustomize.py", "usercustomize.py"):
        plant(workspace, name, PLANTED)

    llm.script(call("look", paths=["/workspace", f"/workspace/{module}.py"]), Reply(text="ok"))
    ws, _ = await connect(session.id, key=alice_key)
    (looked,) = tool_results(await run_turn(ws, "go", approval_mode="full_access"))
    await ws.disconnect()

    assert not (workspace / "leaked.txt").exists(), "the planted module ran with the server's secrets"
    assert looked["is_error"] is False, looked
    seen = json.loads(looked["output"])
    assert {"STAFF_SECRET", "PYTHONSAFEPATH"} <= set(seen["env"]), "the server itself has its variables"
    assert seen["cwd"] == "/var/empty", "an empty folder of its own, not the workspace"
    assert seen["visible"] == {"/workspace": True, f"/workspace/{module}.py": True}, "the workspace stays"
