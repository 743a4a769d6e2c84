"""Helpers for delegation tests: mock runner configs, scripted tool calls, turns over the socket, processes.

Every runner configured here carries a unique `ACP_TEST_MARKER` in its environment; its children inherit
it, so `marker_pids(marker)` finds every process a runner left behind by reading /proc — the outside
view, without asking our own code.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from channels.testing import WebsocketCommunicator

from acp.services import runner_upsert
from agents.services import default_agent_ensure, tool_set_enabled
from agentsite.dev.fake_llm import Reply
from tests.support.processes import none_left, pids_with_env
from tests.support.runner_kit import mock_runner_script, runner_folder, runner_python
from tests.support.ws import send

MOCK_RUNNER = Path(__file__).resolve().parents[1] / "support" / "mock_acp_runner.py"  # run unsandboxed
TOOL = "delegate_external_agent"
FRAME_TIMEOUT = 10

Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


def runner_body(*modes: str, marker: str, env: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    """A RUNNER (docs/protocol.md §2) that starts the mock ACP runner with `modes`, installed outside the
    project as a real runner would be (tests/support/runner_kit.py), so that it runs in the sandbox."""
    args = ["-P", str(mock_runner_script()), *(["--mode", ",".join(modes)] if modes else [])]
    return {
        "enabled": True,
        "command": runner_python(),
        "args": args,
        "env": {"ACP_TEST_MARKER": marker, **(env or {})},
        "trusted": False,
        "tool_parse_mode": "call_title",
        "timeout_seconds": 20,
        "sandbox_paths": [str(runner_folder())],
        **fields,
    }


def configure_runner(
    *modes: str, name: str = "mock_runner", env: dict[str, str] | None = None, **fields: Any
) -> str:
    """Store a mock runner for the default agent and switch the tool on (services); its process marker."""
    marker = uuid.uuid4().hex
    agent = default_agent_ensure()
    runner_upsert(agent=agent, name=name, data=runner_body(*modes, marker=marker, env=env, **fields))
    tool_set_enabled(agent=agent, tool_name=TOOL, enabled=True)
    return marker


def delegate(action: str, *, call_id: str | None = None, **arguments: Any) -> Reply:
    """A model step that calls delegate_external_agent."""
    call: dict[str, Any] = {"name": TOOL, "arguments": {"action": action, **arguments}}
    if call_id is not None:
        call["id"] = call_id
    return Reply(tool_calls=[call])


def approve(data: dict[str, Any]) -> dict[str, Any]:
    return {"approved": True}


async def run_turn(
    ws: WebsocketCommunicator,
    content: str,
    *,
    approval_mode: str = "full_access",
    answer: Answer = approve,
    until: str = "result",
    frame_timeout: float = FRAME_TIMEOUT,
) -> list[dict[str, Any]]:
    """Send a message and read every frame up to and including its `result`, answering confirmations."""
    await send(ws, {"type": "message", "content": content, "approval_mode": approval_mode})
    frames: list[dict[str, Any]] = []
    while True:
        frame = await ws.receive_json_from(timeout=frame_timeout)
        frames.append(frame)
        if frame["type"] == "confirmation_request":
            reply = answer(frame["data"])
            if reply is not None:
                confirmation_id = frame["data"]["confirmation_id"]
                await send(ws, {"type": "confirmation_reply", "confirmation_id": confirmation_id, **reply})
        if frame["type"] == until:
            return frames


def of_type(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [frame for frame in frames if frame["type"] == kind]


def tool_results(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return of_type(frames, "tool_result")


def marker_pids(marker: str) -> list[int]:
    """Live processes whose environment carries this runner's marker (the runner and its children)."""
    return pids_with_env(f"ACP_TEST_MARKER={marker}")


def group_gone(pgid: int, within: float = 5.0) -> bool:
    """True once no live process is left in the group. A killed sandbox's PID 1 may stay a zombie for a
    moment, until the host's init reaps it: a zombie runs nothing, so it counts as gone."""
    return none_left(lambda: _live_members(pgid), within)


def _live_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members
