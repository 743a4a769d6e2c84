"""What a sandboxed command sees of the host (docs/protocol.md §6.1 and its extension): no host path of the
server's in any process's command line — bubblewrap's options travel on a descriptor, so PID 1 shows only the
command — and a neutral PATH, never the server's (which names its virtualenv)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from agents.tools import ToolContext, registry
from tests.support.sandboxes import sandbox_of, sandbox_workspace

LOOK = r"""
echo "pid1: $(tr '\0' ' ' < /proc/1/cmdline)"
echo "parent: $(tr '\0' ' ' < /proc/$PPID/cmdline)"
echo "path: $PATH"
echo "pwd: $(pwd)"
for f in /proc/[0-9]*/cmdline; do echo "$f: $(tr '\0' ' ' < $f)"; done
cat /proc/[0-9]*/environ | tr '\0' '\n'
"""


@pytest.fixture
def workspace() -> Iterator[Path]:
    with sandbox_workspace() as folder:
        yield folder


async def test_no_process_in_the_sandbox_shows_a_host_path_or_the_servers_path(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, session_id="session-1", sandbox=sandbox_of("bwrap"))
    tool, params = registry.parse("shell", {"command": LOOK})
    output = await tool.run(params, ctx)

    assert "pid1: " in output and "pwd: /workspace" in output
    host_paths = {str(settings.DATA_DIR), str(workspace), str(settings.BASE_DIR), workspace.name}
    server_path = [
        entry for entry in os.environ["PATH"].split(":") if entry.startswith(str(settings.BASE_DIR))
    ]
    server_path += [str(Path(sys.prefix) / "bin")]  # the server's virtualenv
    for shown in (*host_paths, *server_path):
        assert shown not in output, f"{shown} is visible inside the sandbox:\n{output}"
    path = next(line for line in output.splitlines() if line.startswith("path: "))
    assert path == "path: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
