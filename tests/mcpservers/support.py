"""Helpers for MCP tests: the test server's config, scripted calls of its tools, its processes from /proc.

Every stdio server configured here carries a unique `MCP_TEST_MARKER` in its environment; what it starts
inherits it, so `marker_pids(marker)` finds every process it left behind by reading /proc/*/environ —
the outside view, without asking our own code.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from channels.testing import WebsocketCommunicator

from agents.services import default_agent_ensure
from agentsite.dev.fake_llm import Reply
from mcpservers.services import server_upsert
from tests.acp import support as acp_support
from tests.support.processes import none_left, pids_with_env
from tests.support.runner_kit import mcp_server_folder, mcp_server_script, runner_python

SERVER = "testsrv"
# Between two frames of a turn a server may start (Python and the SDK load: seconds on a busy machine).
FRAME_TIMEOUT = 45.0


def tool(name: str, server: str = SERVER) -> str:
    return f"mcp__{server}__{name}"


def server_body(*, marker: str, env: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    """An MCP config (docs/protocol.md §2) that starts tests/support/mcp_test_server.py on stdio, installed
    outside the project as a real server would be (tests/support/runner_kit.py), so that it runs in the
    sandbox."""
    return {
        "enabled": True,
        "transport": "stdio",
        "command": runner_python(),
        "args": [str(mcp_server_script())],
        "env": {"MCP_TEST_MARKER": marker, **(env or {})},
        "timeout_seconds": 20,
        "sandbox_paths": [str(mcp_server_folder())],
        **fields,
    }


def configure_server(name: str = SERVER, *, env: dict[str, str] | None = None, **fields: Any) -> str:
    """Store the test server for the default agent (services); its process marker."""
    marker = uuid.uuid4().hex
    body = {
        "args": [],
        "url": "",
        "headers": {},
        "trusted_tools": [],
        "trusted": False,
        **server_body(marker=marker, env=env, **fields),
    }
    server_upsert(agent=default_agent_ensure(), name=name, data=body)
    return marker


def call(name: str, /, *, call_id: str | None = None, server: str = SERVER, **arguments: Any) -> Reply:
    """A model step that calls one tool of the test server."""
    step: dict[str, Any] = {"name": tool(name, server), "arguments": arguments}
    if call_id is not None:
        step["id"] = call_id
    return Reply(tool_calls=[step])


async def run_turn(ws: WebsocketCommunicator, content: str, **options: Any) -> list[dict[str, Any]]:
    """tests/acp/support.py's run_turn, with time for servers to start between frames."""
    return await acp_support.run_turn(ws, content, frame_timeout=FRAME_TIMEOUT, **options)


def marker_pids(marker: str) -> list[int]:
    """Live processes whose environment carries this server's marker (the server and its children)."""
    return pids_with_env(f"MCP_TEST_MARKER={marker}")


def gone(marker: str, within: float = 5.0) -> bool:
    """True once no live process carries the marker (a killed sandbox takes a moment to be reaped)."""
    return none_left(lambda: marker_pids(marker), within)


async def ends(marker: str, within: float) -> bool:
    """`gone`, waiting without blocking the event loop (for what this loop itself must do meanwhile)."""
    deadline = time.monotonic() + within
    while marker_pids(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
