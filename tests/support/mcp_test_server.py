"""A real MCP server for tests, written with the official SDK's server side (`MCPServer`, formerly FastMCP).

Run it as `python mcp_test_server.py` (stdio) or `python mcp_test_server.py --http` (streamable HTTP on a
free loopback port; its first stdout line is `listening on http://127.0.0.1:PORT/mcp`). Start-up faults
come from the environment, so a server config's `env` switches them:
  MCP_TEST_MODE=fail_start   exit with code 2 (and a word on stderr) before answering anything
  MCP_TEST_MODE=hang_start   never answer `initialize`
  MCP_TEST_MODE=junk_start   print a greeting on stdout before speaking MCP

Tools:
  ping()                     no arguments: "pong"
  echo(text)                 the text back
  add(a, b)                  a + b; annotated read-only
  slow(seconds)              answer "slept" after `seconds` (asyncio: the server stays responsive)
  freeze(seconds)            block the whole server for `seconds` (a hung server)
  fail(message)              a tool error (`isError`) carrying the message
  picture()                  a 2x2 PNG image
  crash()                    exit with code 3 in the middle of the call
  garbage()                  write a line that is not JSON-RPC on the wire (stdout), then answer nothing
  look(paths)                JSON of what it sees: cwd, HOME, uid, pids in /proc, whether each path exists
  spawn_child()              start a `sleep` helper (it inherits MCP_TEST_MARKER) and answer its pid
  big(size)                  `size` characters of text, numbered lines
  header(name)               over HTTP: the value of a request header ("(none)" without it)
  grow()                     add a tool `extra` (answers "extra") and tell the client its tools changed
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import fcntl
import json
import os
import socket
import stat
import subprocess
import sys
import time

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

# A 2x2 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg=="
)

server = MCPServer("agentsite-test")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after a while."""
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def freeze(seconds: float) -> str:
    """Block the whole server for a while."""
    time.sleep(seconds)
    return "thawed"


@server.tool()
def fail(message: str) -> str:
    """Fail with the message."""
    raise ToolError(message)


@server.tool()
def picture() -> Image:
    """A small picture."""
    return Image(data=PNG, format="png")


@server.tool()
def crash() -> str:
    """Die in the middle of the call."""
    sys.stderr.write("test server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
async def garbage() -> str:
    """Write something that is not MCP on stdout."""
    os.write(_wire(), b"this is not JSON-RPC\n")
    await asyncio.sleep(3600)
    return "never"


def _wire() -> int:
    """The descriptor the protocol is written to. While it serves, the SDK points fd 1 at stderr (so a
    stray print cannot corrupt the protocol) and writes to a duplicate of the original stdout: the one
    write-only pipe above 2 that is not stderr's."""
    stderr = os.fstat(2)
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
        try:
            info = os.fstat(fd)
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        is_pipe = stat.S_ISFIFO(info.st_mode) and flags & os.O_ACCMODE == os.O_WRONLY
        if fd > 2 and is_pipe and (info.st_dev, info.st_ino) != (stderr.st_dev, stderr.st_ino):
            return fd
    return 1


@server.tool()
def look(paths: list[str]) -> str:
    """What this process sees."""
    pids = sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    return json.dumps(
        {
            "cwd": os.getcwd(),
            "home": os.environ.get("HOME"),
            "uid": os.getuid(),
            "pids": pids,
            "env": sorted(os.environ),
            "visible": {path: os.path.exists(path) for path in paths},
        }
    )


@server.tool()
def spawn_child() -> str:
    """Start a helper that sleeps for a long time."""
    child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return str(child.pid)


@server.tool()
def big(size: int) -> str:
    """A long text."""
    lines = "".join(f"line {n:07d}\n" for n in range(size // 13 + 1))
    return lines[:size]


@server.tool()
def header(name: str, ctx: Context) -> str:
    """A header of the HTTP request that carried this call."""
    return (ctx.headers or {}).get(name.lower(), "(none)")


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool and say that the tools changed."""

    def extra() -> str:
        """A tool that came later."""
        return "extra"

    server.add_tool(extra)
    await ctx.request_context.session.send_tool_list_changed()
    return "grown"


def _start_faults() -> None:
    mode = os.environ.get("MCP_TEST_MODE", "")
    if mode == "fail_start":
        sys.stderr.write("test server: refusing to start\n")
        sys.stderr.flush()
        sys.exit(2)
    if mode == "hang_start":
        time.sleep(3600)
    if mode == "junk_start":
        print("Welcome to the test server!", flush=True)


def _serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    options = parser.parse_args()
    _start_faults()
    if options.http:
        _serve_http()
    else:
        server.run("stdio")
