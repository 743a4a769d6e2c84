"""A real ACP agent for tests: a subprocess speaking ACP on stdio through the SDK's agent side.

Run it as `python mock_acp_runner.py [--mode MODE[,MODE...]]`; modes may also come from the
environment (`ACP_MOCK_MODE=a,b`), so a runner config's `env` can switch them. Without a mode it
echoes: "hello mock" → "mock reply: hello mock", streamed in several chunks after a thought, a plan,
a tool call and its update.

Modes:
  permission        ask permission before replying; the reply ends with "(permission: selected <id>)" or
                    "(permission: cancelled)". The tool call's command and path come from a JSON prompt
                    ({"command": ..., "path": ...}) or ACP_MOCK_PERMISSION_COMMAND / _PATH; the options
                    from ACP_MOCK_PERMISSION_OPTIONS (JSON [[id, name, kind], ...])
  fs                the prompt is "read PATH" or "write PATH CONTENT", done through the client's fs/*;
                    the reply is "read: <content>", "wrote PATH" or "fs error: <message>"
  env               reply with JSON {"env": ..., "cwd": ...} of this process
  look              reply with JSON of what this process sees: cwd, HOME, uid, how many times it was started
                    with this HOME (a counter file there), the PIDs in /proc, and for each path of a JSON list
                    prompt whether it exists
  crash             send one chunk, then exit with code 3 mid-prompt
  hang              never answer the prompt (and ignore session/cancel and the end of stdin)
  slow              stream ACP_MOCK_CHUNKS chunks ACP_MOCK_DELAY s apart; honours session/cancel
  junk              print a non-JSON line on stdout before speaking ACP
  stderr_flood      write ACP_MOCK_STDERR_BYTES to stderr during the prompt, then reply
  fail_init_error   answer `initialize` with a JSON-RPC error (also ACP_MOCK_FAIL_INITIALIZE=1)
  fail_init_exit    exit with code 2 during `initialize`
  spawn_child       start a helper process (same process group) that sleeps for a minute
  ignore_sigterm    ignore SIGTERM (this process and its helper), so only SIGKILL ends them
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
from typing import Any, cast

import acp
from acp import (
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    plan_entry,
    start_tool_call,
    text_block,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.interfaces import Agent, Client
from acp.schema import AgentCapabilities, Implementation, PermissionOption, ToolCallLocation, ToolCallUpdate

_DEFAULT_OPTIONS = [["allow", "Allow once", "allow_once"], ["reject", "Reject", "reject_once"]]


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


class MockAgent:
    """The agent side of ACP with switchable misbehaviour."""

    def __init__(self, modes: set[str]) -> None:
        self.modes = modes
        self.client: Client | None = None
        self.cancelled = asyncio.Event()
        self.helpers: list[subprocess.Popen[bytes]] = []

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        if "fail_init_exit" in self.modes:
            sys.stderr.write("mock runner: fatal error during initialize\n")
            sys.stderr.flush()
            os._exit(2)
        if "fail_init_error" in self.modes:
            raise RequestError.internal_error({"details": "mock runner refuses to initialize"})
        return InitializeResponse(
            protocol_version=protocol_version,
            agent_info=Implementation(name="mock-acp-runner", title="Mock ACP runner", version="1.0.0"),
            agent_capabilities=AgentCapabilities(load_session=True),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="mock-session-1")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        self.cancelled.clear()
        text = "".join(getattr(block, "text", "") for block in prompt)
        if "hang" in self.modes:
            await asyncio.Event().wait()
        if "crash" in self.modes:
            await self._say(session_id, "starting...")
            sys.stderr.write("mock runner: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        if "stderr_flood" in self.modes:
            _flood_stderr(int(_env("ACP_MOCK_STDERR_BYTES", str(1024 * 1024))))
        if "slow" in self.modes:
            return await self._slow_reply(session_id)
        reply = await self._reply_for(session_id, text)
        await self._progress(session_id)
        for chunk in _chunks(reply, 3):
            await self._say(session_id, chunk)
        return PromptResponse(stop_reason="end_turn")

    async def _reply_for(self, session_id: str, text: str) -> str:
        if "env" in self.modes:
            return json.dumps({"env": dict(os.environ), "cwd": os.getcwd()})
        if "look" in self.modes:
            return _look(json.loads(text) if text.startswith("[") else [])
        if "fs" in self.modes:
            return await self._fs(session_id, text)
        reply = f"{_env('ACP_MOCK_REPLY_TEXT', 'mock reply')}: {text}"
        if "permission" in self.modes:
            reply += f" (permission: {await self._ask_permission(session_id, text)})"
        return reply

    async def _progress(self, session_id: str) -> None:
        """A thought, a plan, a tool call and its update: what real runners stream before answering."""
        assert self.client is not None
        await self.client.session_update(session_id, update_agent_thought_text("thinking about it"))
        await self.client.session_update(
            session_id, update_plan([plan_entry("look around", status="completed"), plan_entry("answer")])
        )
        await self.client.session_update(
            session_id,
            start_tool_call("call-1", "Look around", kind="read", status="pending", raw_input={"path": "."}),
        )
        await self.client.session_update(
            session_id,
            update_tool_call(
                "call-1",
                status="completed",
                content=[acp.tool_content(text_block("2 files"))],
                raw_output="2 files",
            ),
        )

    async def _ask_permission(self, session_id: str, text: str) -> str:
        assert self.client is not None
        raw_options = json.loads(_env("ACP_MOCK_PERMISSION_OPTIONS", json.dumps(_DEFAULT_OPTIONS)))
        options = [PermissionOption(option_id=i, name=n, kind=k) for i, n, k in raw_options]
        wanted = json.loads(text) if text.startswith("{") else {}
        path = wanted.get("path", os.environ.get("ACP_MOCK_PERMISSION_PATH"))
        tool_call = ToolCallUpdate(
            tool_call_id="call-perm",
            title="Run a command",
            kind="execute",
            status="pending",
            raw_input={"command": wanted.get("command", _env("ACP_MOCK_PERMISSION_COMMAND", "ls -la"))},
            locations=[ToolCallLocation(path=path)] if path else None,
        )
        response = await self.client.request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )
        outcome = response.outcome
        if outcome.outcome == "selected":
            return f"selected {outcome.option_id}"
        return "cancelled"

    async def _fs(self, session_id: str, text: str) -> str:
        assert self.client is not None
        verb, _, rest = text.partition(" ")
        try:
            if verb == "read":
                response = await self.client.read_text_file(session_id=session_id, path=rest)
                return f"read: {response.content}"
            path, _, content = rest.partition(" ")
            await self.client.write_text_file(session_id=session_id, path=path, content=content)
        except RequestError as exc:
            return f"fs error: {exc}"
        return f"wrote {path}"

    async def _slow_reply(self, session_id: str) -> PromptResponse:
        delay = float(_env("ACP_MOCK_DELAY", "0.05"))
        for index in range(int(_env("ACP_MOCK_CHUNKS", "100"))):
            if self.cancelled.is_set():
                return PromptResponse(stop_reason="cancelled")
            await self._say(session_id, f"chunk {index} ")
            try:
                await asyncio.wait_for(self.cancelled.wait(), delay)
            except TimeoutError:
                continue
        if self.cancelled.is_set():
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        assert self.client is not None
        await self.client.session_update(session_id, update_agent_message_text(text))


def _chunks(text: str, count: int) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _flood_stderr(total: int) -> None:
    """Blocking writes: if nobody drains our stderr, this never returns (the failure under test)."""
    line = b"mock runner: very chatty diagnostic output line .................................\n"
    written = 0
    while written < total:
        sys.stderr.buffer.write(line)
        written += len(line)
    sys.stderr.buffer.flush()


def _spawn_helper(ignore_sigterm: bool) -> subprocess.Popen[bytes]:
    """A grandchild in our process group that would outlive us if the client only killed its child."""
    code = "import signal, time\n"
    if ignore_sigterm:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "time.sleep(60)\n"
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def parse_modes(argv: list[str]) -> set[str]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", action="append", default=[])
    args = parser.parse_args(argv)
    raw = [*args.mode, os.environ.get("ACP_MOCK_MODE", "")]
    modes = {mode.strip() for item in raw for mode in item.split(",") if mode.strip()}
    if os.environ.get("ACP_MOCK_FAIL_INITIALIZE") not in (None, "", "0"):
        modes.add("fail_init_error")
    return modes


async def main(modes: set[str]) -> None:
    agent = MockAgent(modes)
    if "ignore_sigterm" in modes:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "spawn_child" in modes:
        agent.helpers.append(_spawn_helper("ignore_sigterm" in modes))
    if "junk" in modes:
        sys.stdout.write("Welcome to mock runner v1.0! (this is not JSON-RPC)\n")
        sys.stdout.flush()
    await acp.run_agent(cast(Agent, agent))
    if "hang" in modes:
        await asyncio.Event().wait()  # a hung runner does not leave when its stdin closes


def _look(paths: list[str]) -> str:
    home = os.environ.get("HOME", "")
    counter = os.path.join(home, ".mock-runner-starts")
    starts = 1
    if os.path.exists(counter):
        with open(counter) as handle:
            starts = int(handle.read()) + 1
    if "look_counted" not in os.environ:
        with open(counter, "w") as handle:
            handle.write(str(starts))
        os.environ["look_counted"] = "1"  # count a start once, however often it is asked
    else:
        starts -= 1
    return json.dumps(
        {
            "cwd": os.getcwd(),
            "home": home,
            "uid": os.getuid(),
            "starts": starts,
            "pids": sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit()),
            "visible": {path: os.path.exists(path) for path in paths},
        }
    )


if __name__ == "__main__":
    asyncio.run(main(parse_modes(sys.argv[1:])))
