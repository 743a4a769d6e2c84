"""Runners of a killed server (SIGKILL: nothing could clean up) are ended when a server starts again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agents.sandbox.children import group_exists, sweep_orphans

MOCK = Path(__file__).resolve().parents[1] / "support" / "mock_acp_runner.py"


def test_a_killed_servers_runner_is_ended_by_the_sweep_and_a_live_servers_is_kept(tmp_path):
    records = tmp_path / "runners"
    # A stand-in server: spawns a real runner the way the server does, reports its group, then hangs.
    server = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        sys.path.insert(0, {str(Path.cwd())!r})
        from agents.sandbox import Confinement
        from agents.sandbox.base import NoSandbox
        from agents.sandbox import children as process
        process.RECORD_DIR = Path({str(records)!r})
        async def main():
            confinement = Confinement(
                workspace=Path({str(tmp_path)!r}), env={{"PATH": "/usr/bin:/bin"}}, may_run_unsandboxed=True
            )
            runner = await process.RunnerProcess.spawn(
                sys.executable, ["-P", {str(MOCK)!r}], sandbox=NoSandbox(), confinement=confinement)
            print(runner.pgid, flush=True)
            await asyncio.sleep(120)
        asyncio.run(main())
        """
    )
    dead = subprocess.Popen([sys.executable, "-c", server], stdout=subprocess.PIPE, text=True)
    alive = subprocess.Popen([sys.executable, "-c", server], stdout=subprocess.PIPE, text=True)
    try:
        dead_pgid = int(dead.stdout.readline())  # type: ignore[union-attr]
        alive_pgid = int(alive.stdout.readline())  # type: ignore[union-attr]
        assert {p.name for p in records.iterdir()} == {f"{dead_pgid}.json", f"{alive_pgid}.json"}
        assert json.loads((records / f"{dead_pgid}.json").read_text())["server_pid"] == dead.pid
        dead.send_signal(signal.SIGKILL)
        dead.wait(timeout=10)
        assert group_exists(dead_pgid), "a killed server's runner outlives it"
        assert sweep_orphans(records) == [dead_pgid]
        deadline = time.monotonic() + 10
        while group_exists(dead_pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_exists(dead_pgid)
        assert group_exists(alive_pgid), "a live server's runner is not touched"
        assert {p.name for p in records.iterdir()} == {f"{alive_pgid}.json"}
    finally:
        for process in (dead, alive):
            process.kill()
            process.wait(timeout=10)
        for path in records.glob("*.json"):
            pgid = int(path.stem)
            if group_exists(pgid):
                os.killpg(pgid, signal.SIGKILL)
