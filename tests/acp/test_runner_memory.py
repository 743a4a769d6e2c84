"""The memory ceiling of a call holds for ACP runners too (docs/protocol.md §6.6): one ended at it says so."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.sandbox.bwrap import BwrapSandbox
from agents.sandbox.site import get_sandbox, reset_sandbox
from agentsite.dev.fake_llm import Reply
from tests import factories
from tests.acp.support import configure_runner, delegate, run_turn, tool_results
from tests.support.sandboxes import sandbox_of
from tests.support.ws import connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


async def test_a_runner_ended_at_the_memory_ceiling_says_so(
    alice: Any, alice_key: str, llm: Any, settings: Any
) -> None:
    """The memory ceiling holds for runners too (docs/protocol.md §6.6): 16 MB is less than Python with the
    ACP SDK needs, so the runner is ended while it starts, and the tool result says why."""
    sandbox_of("bwrap")
    settings.AGENTSITE_SANDBOX_MEMORY_MB = 16
    reset_sandbox()
    try:
        sandbox = get_sandbox()
        if not isinstance(sandbox, BwrapSandbox) or sandbox.memory is None:
            pytest.skip("no memory cgroup on this host: per-process limits instead (tests/agents)")
        await sync_to_async(configure_runner)()
        session = await sync_to_async(factories.session)(alice)
        llm.script(delegate("start", runner="mock_runner", message="hello"), Reply(text="ok"))
        ws, _ = await connect(session.id, key=alice_key)
        (started,) = tool_results(await run_turn(ws, "go"))
        await ws.disconnect()
    finally:
        reset_sandbox()
    assert started["is_error"] is True
    assert "at the memory limit of its sandbox" in started["output"], started["output"]


async def test_an_mcp_server_ended_at_the_memory_ceiling_says_so(
    alice: Any, alice_key: str, llm: Any, settings: Any
) -> None:
    """The same for a stdio MCP server: its status and the tool result name the memory limit."""
    from mcpservers.models import McpServer
    from tests.mcpservers.support import SERVER, call, configure_server
    from tests.mcpservers.support import run_turn as mcp_turn

    sandbox_of("bwrap")
    settings.AGENTSITE_SANDBOX_MEMORY_MB = 16
    reset_sandbox()
    try:
        sandbox = get_sandbox()
        if not isinstance(sandbox, BwrapSandbox) or sandbox.memory is None:
            pytest.skip("no memory cgroup on this host: per-process limits instead (tests/agents)")
        await sync_to_async(configure_server)()
        session = await sync_to_async(factories.session)(alice)
        llm.script(call("ping"), Reply(text="ok"))
        ws, _ = await connect(session.id, key=alice_key)
        (called,) = tool_results(await mcp_turn(ws, "go", approval_mode="full_access"))
        await ws.disconnect()
    finally:
        reset_sandbox()
    assert called["is_error"] is True
    message = await sync_to_async(lambda: McpServer.objects.get(name=SERVER).status_message)()
    assert "at the memory limit of its sandbox" in message, message
