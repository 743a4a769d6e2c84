"""What the sandbox adds to a `shell` call: the same command, N times, in bubblewrap and without a sandbox.

    .venv/bin/python bench/sandbox_start.py [--calls 100] [--command true]

Both runs go through agents/sandbox/process.run_command, as the `shell` tool's calls do, with the
site's limits, from one event loop; the calls alternate (bwrap, none, bwrap, ...) so that a change in
the machine's load falls on both. It prints the median, p90 and max wall time per call of each and
the median added by the sandbox; the target is at most 15 ms median added (bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
os.environ.setdefault("DEBUG", "true")
os.environ.setdefault("AGENTSITE_DATA_DIR", tempfile.mkdtemp(prefix="agentsite-bench-"))

import django

django.setup()

from agents.sandbox import Confinement, run_command  # noqa: E402
from agents.sandbox.site import hand_over, make_sandbox  # noqa: E402
from agents.tools.shell import SHELL_ENVIRONMENT  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--command", default="true")
    args = parser.parse_args()

    bwrap, none = make_sandbox("bwrap"), make_sandbox("none")
    workspace = Path(os.environ["AGENTSITE_DATA_DIR"]) / "workspaces" / "bench"
    workspace.mkdir(parents=True)
    hand_over(workspace)
    times: dict[str, list[float]] = {"bwrap": [], "none": []}
    argv = ["/bin/sh", "-c", args.command]
    for index in range(args.calls * 2 + 4):
        sandbox = bwrap if index % 2 == 0 else none
        confinement = Confinement(
            workspace=workspace, env=SHELL_ENVIRONMENT, limits=sandbox.limits, may_run_unsandboxed=True
        )
        started = time.perf_counter()
        result = await run_command(argv, sandbox=sandbox, confinement=confinement, limit_seconds=30)
        elapsed = (time.perf_counter() - started) * 1000
        assert result.returncode == 0, result.output
        if index >= 4:  # the first calls warm the page cache
            times[sandbox.mode].append(elapsed)

    uid = bwrap.status()["uid"]
    print(f"{args.calls} calls of {args.command!r} each, alternating; {bwrap.detail}, sandbox uid {uid}")
    print(f"{'sandbox':8} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}")
    for mode, values in times.items():
        ordered = sorted(values)
        p90 = ordered[int(len(ordered) * 0.9) - 1]
        print(f"{mode:8} {statistics.median(values):10.2f} {p90:8.2f} {max(values):8.2f}")
    added = statistics.median(times["bwrap"]) - statistics.median(times["none"])
    print(f"added by the sandbox: {added:.2f} ms median per call (target <= 15 ms)")
    sys.exit(0 if added <= 15 else 1)


if __name__ == "__main__":
    asyncio.run(main())
