"""`sandbox_network` (docs/protocol.md §6.6, docs/deployment.md "Network"): a user-mode network stack that
reaches the internet but never the host's loopback (its Redis, Postgres, model server), link-local
addresses (cloud metadata), private ranges or the host's own addresses — each such connection fails at
once. Without the setting there is no network at all. Only connections that must fail are tried: this host
reaches nothing outside, so "the internet" is asserted as far as the stack is up (a device, a default
route, the stack's resolver)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.sandbox.bwrap import BwrapSandbox
from agents.sandbox.network import host_addresses
from agents.tools import ToolContext, registry
from tests.support.sandboxes import sandbox_of, sandbox_workspace

# Prints one line per target: "<host>:<port> <outcome> <seconds>".
PROBE = r"""python3 - <<'EOF'
import socket, time
for target in {targets!r}:
    host, port = target.rsplit(":", 1)
    started = time.monotonic()
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        outcome = "REACHED"
    except OSError as exc:
        outcome = type(exc).__name__ + ":" + str(exc.errno)
    print(target, outcome, round(time.monotonic() - started, 2))
EOF"""


@pytest.fixture
def workspace() -> Iterator[Path]:
    with sandbox_workspace() as folder:
        yield folder


def networked(workspace: Path, on: bool = True) -> ToolContext:
    sandbox = sandbox_of("bwrap")
    assert isinstance(sandbox, BwrapSandbox)
    if on and sandbox.layout.network is None:
        pytest.fail(f"no user-mode network stack on this host: {sandbox.detail}")
    return ToolContext(workspace=workspace, session_id="s", sandbox=sandbox, sandbox_network=on)


async def shell(ctx: ToolContext, command: str) -> str:
    tool, params = registry.parse("shell", {"command": command, "timeout_seconds": 60})
    return await tool.run(params, ctx)


def outcomes(output: str) -> dict[str, tuple[str, float]]:
    lines = [
        line.split() for line in output.splitlines() if line.count(" ") == 2 and not line.startswith("[")
    ]
    return {target: (outcome, float(seconds)) for target, outcome, seconds in lines}


async def test_with_sandbox_network_the_host_and_private_ranges_are_refused_at_once(workspace: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # a server of the host's, on loopback only
        port = listener.getsockname()[1]
        own = [f"{address.split('/')[0]}:{port}" for address in host_addresses("ip")]
        targets = [
            "127.0.0.1:6379",  # the host's Redis
            "127.0.0.1:5432",  # the host's Postgres
            f"127.0.0.1:{port}",
            f"10.0.2.2:{port}",  # the stack's gateway, which would lead to the host's loopback
            "10.0.2.2:6379",
            "10.0.0.1:80",
            "172.16.0.1:80",
            "192.168.1.1:80",
            "169.254.169.254:80",  # cloud metadata
            "100.64.0.1:80",
            *own,  # the host's own addresses (its public one too)
        ]
        output = await shell(networked(workspace), PROBE.format(targets=targets))
    seen = outcomes(output)
    assert set(seen) == set(targets), output
    for target, (outcome, seconds) in seen.items():
        assert outcome != "REACHED", f"{target} was reached from the sandbox"
        assert seconds < 2, f"{target} took {seconds} s to fail: it must be refused, not time out"


async def test_with_sandbox_network_the_stack_is_up_with_its_own_resolver(workspace: Path) -> None:
    output = await shell(networked(workspace), "cat /proc/net/route; cat /etc/resolv.conf; ls /sys/class/net")
    routes = [line.split() for line in output.splitlines() if line.startswith("tap0")]
    assert any(fields[1] == "00000000" for fields in routes), f"a default route through tap0:\n{output}"
    assert "nameserver 10.0.2.3" in output
    assert "tap0" in output


async def test_without_sandbox_network_there_is_no_network_at_all(workspace: Path) -> None:
    output = await shell(networked(workspace, on=False), "cat /proc/net/dev; cat /proc/net/route")
    lines = output.splitlines()
    devices = [
        line.split(":")[0].strip() for line in lines if ":" in line and "|" not in line and "[" not in line
    ]
    assert devices == ["lo"], output
    output = await shell(networked(workspace, on=False), PROBE.format(targets=["1.1.1.1:80", "10.0.0.1:80"]))
    assert all(outcome != "REACHED" and seconds < 2 for outcome, seconds in outcomes(output).values())
