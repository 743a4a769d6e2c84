"""The memory of one call (docs/protocol.md §6.6, docs/deployment.md "Memory"): the processes of a `shell`
call together use at most `AGENTSITE_SANDBOX_MEMORY_MB` — a cgroup per call where the host offers one,
otherwise per-process limits whose sum stays under it — and its private /tmp holds at most
`AGENTSITE_SANDBOX_TMP_MB`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.sandbox import Limits
from agents.sandbox.bwrap import BwrapSandbox
from agents.sandbox.memory import FALLBACK_PROCESSES, candidates, fallback_limits
from agents.tools import ToolContext, registry
from tests.support.processes import gone, marker
from tests.support.sandboxes import sandbox_of, sandbox_workspace

MB = 1024 * 1024
LIMITS = Limits(memory_bytes=256 * MB, tmp_bytes=16 * MB, processes=64, cpu_seconds=60)
# Four processes that each take and touch 96 MB, and wait: 384 MB together, each under the ceiling alone.
HOG = (
    "for i in 1 2 3 4; do python3 -c 'import time\nb = bytearray(96 << 20)\n"
    "for i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(5)' {tag} & done; wait; echo all-done"
)


@pytest.fixture
def workspace() -> Iterator[Path]:
    with sandbox_workspace() as folder:
        yield folder


async def shell(ctx: ToolContext, command: str) -> str:
    tool, params = registry.parse("shell", {"command": command, "timeout_seconds": 60})
    return await tool.run(params, ctx)


async def test_processes_of_one_call_together_stop_at_the_memory_ceiling(workspace: Path) -> None:
    sandbox = sandbox_of("bwrap", LIMITS)
    assert isinstance(sandbox, BwrapSandbox)
    audited: list[dict[str, Any]] = []

    async def audit(action: str, *, summary: str, details: dict[str, Any]) -> None:
        audited.append(details)

    ctx = ToolContext(workspace=workspace, session_id="s", sandbox=sandbox, audit=audit)
    tag = marker()
    output = await shell(ctx, HOG.format(tag=tag))
    if sandbox.memory is not None:  # a cgroup for the call: the kernel ends a process, the user is told
        assert "memory limit of this call (256 MB" in output, output
        assert audited[-1]["error"] == "the memory limit of this call", "counted in the audit trail"
    else:  # per process: an equal share of the ceiling each, and fewer processes
        assert sandbox.limits.data_bytes == 256 * MB // FALLBACK_PROCESSES
        assert "MemoryError" in output, output
    assert gone(tag)


async def test_a_call_under_the_ceiling_runs(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, session_id="s", sandbox=sandbox_of("bwrap", LIMITS))
    output = await shell(ctx, "python3 -c 'b = bytearray(8 << 20); print(len(b))'")
    assert output.startswith(str(8 << 20)) and "memory limit" not in output


async def test_filling_the_private_tmp_past_its_size_fails_with_no_space(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, session_id="s", sandbox=sandbox_of("bwrap", LIMITS))
    output = await shell(ctx, "head -c 64M /dev/zero > /tmp/fill; echo status=$?; du -m /tmp/fill")
    assert "No space left on device" in output and "status=1" in output
    assert int(output.split("status=1")[1].split()[0]) <= 16


def test_without_a_cgroup_the_processes_shares_add_up_to_the_ceiling() -> None:
    limits = fallback_limits(Limits(memory_bytes=2048 * MB, processes=256))
    assert limits.processes == FALLBACK_PROCESSES
    assert limits.data_bytes is not None and limits.data_bytes * limits.processes <= 2048 * MB
    few = fallback_limits(Limits(memory_bytes=2048 * MB, processes=4))
    assert few.processes == 4 and few.data_bytes == 512 * MB
    assert fallback_limits(Limits(processes=256)).data_bytes is None, "0: no ceiling"


async def test_without_a_cgroup_each_process_stops_at_its_share(workspace: Path) -> None:
    """The fallback where the host offers no memory cgroup (forced: the site's bubblewrap without one)."""
    site = sandbox_of("bwrap", LIMITS)
    assert isinstance(site, BwrapSandbox)
    limits = fallback_limits(LIMITS)
    sandbox = BwrapSandbox(
        bwrap=site.bwrap, prlimit=site.prlimit, layout=site.layout, limits=limits, uid=site.uid, gid=site.gid
    )
    ctx = ToolContext(workspace=workspace, session_id="s", sandbox=sandbox)
    tag = marker()
    output = await shell(ctx, HOG.format(tag=tag))
    assert output.count("MemoryError") == 4, output
    assert "memory limit of this call" not in output
    assert gone(tag)


def test_the_cgroup_is_found_where_the_host_offers_one(tmp_path: Path) -> None:
    """Which cgroup the ceiling uses, read from a process's view of the host (its /proc/self/cgroup and
    mountinfo, and the hierarchy's cgroup.controllers; here a folder laid out like one)."""
    unified = tmp_path / "unified"
    service = unified / "system.slice" / "agentsite.service"
    (service / "supervisor").mkdir(parents=True)
    for folder in (unified, service, service / "supervisor"):
        (folder / "cgroup.controllers").write_text("cpu io memory pids\n")
    v2_only = f"29 23 0:26 / {unified} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    found = candidates("0::/system.slice/agentsite.service/supervisor\n", v2_only)
    # the server's own cgroup first, then the one systemd delegated (DelegateSubgroup=supervisor)
    assert found == [(2, service / "supervisor" / "agentsite"), (2, service / "agentsite")]
    assert candidates("0::/\n", v2_only) == [(2, unified / "agentsite")], "the root: no parent above it"

    (service / "cgroup.controllers").write_text("cpu io pids\n")  # memory not delegated
    (service / "supervisor" / "cgroup.controllers").write_text("cpu io pids\n")
    assert candidates("0::/system.slice/agentsite.service/supervisor\n", v2_only) == []

    memory = tmp_path / "memory"
    hybrid = (  # this host: v1 controllers, an empty cgroup2 beside them
        f"30 23 0:27 / {memory} rw,relatime - cgroup cgroup rw,memory\n"
        f"31 23 0:28 / {tmp_path / 'empty-unified'} rw,relatime - cgroup2 cgroup2 rw\n"
    )
    own = "4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
    assert candidates(own, hybrid) == [(1, memory / "process_api" / "abc" / "agentsite")]
