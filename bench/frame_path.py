"""What a client's frame costs the server, and what open sockets cost while they are silent (issue 15 item 2).

    .venv/bin/python bench/frame_path.py [--root DIR] [--sockets 50] [--frames 400] [--clients 2]
                                         [--idle-sockets 1000] [--idle-seconds 10] [--users 1000]
                                         [--database-url URL] [--redis-url URL]

One `manage.py serve` of the checkout in --root (default: this one), production-like (DEBUG off), with
--sockets key-authenticated sockets (`?api_key=`), one session each. Phases:
- `ping`: every socket sends --frames `ping` frames one after another, each after the previous `pong`;
- `steer`: the same with `steer` frames naming a message that is not pending (the frame reaches the
  session's queue and comes back as `error no_longer_pending`): a frame that does work, but no turn;
- `idle`: --idle-sockets sockets connected and silent for --idle-seconds, spread over --users users with
  a key each: the server's CPU while nothing happens (the periodic check of open sockets' accounts runs here,
  over that many distinct users and keys).
For each: round trips per second, round-trip p50/p99 and the server's CPU (utime+stime) per frame (per
second of idle). Run it with --root set to a checkout before a change and then after, same machine,
back to back. Loopback only; the data dir is temporary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ws_load import _stop, _wait_port, cpu_seconds, free_port, pct  # noqa: E402

PYTHON = sys.executable


# ----------------------------------------------------------------------------------------- worker side


@dataclass
class Stats:
    round_trips: int = 0
    rtt: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    first_send: float = 0.0
    last_recv: float = 0.0
    connected: int = 0


async def _socket(
    url: str,
    spec: dict[str, Any],
    stats: Stats,
    gate: asyncio.Semaphore,
    ready: asyncio.Event,
    go: asyncio.Event,
) -> None:
    from websockets.asyncio.client import connect

    try:
        async with gate:  # a burst of 1,000 handshakes at once overflows the server's listen backlog
            ws = await connect(url, compression=None, ping_interval=None, open_timeout=60)
            first = json.loads(await asyncio.wait_for(ws.recv(), 60))
    except Exception as exc:  # a reported error, not a crash
        stats.errors.append(f"connect: {type(exc).__name__}: {exc}")
        return
    if first.get("type") != "connected":
        stats.errors.append(f"connect: {first}")
        return
    stats.connected += 1
    if stats.connected == spec["count"]:
        ready.set()
    await go.wait()
    frame = json.dumps(
        {"type": "ping"} if spec["kind"] == "ping" else {"type": "steer", "message_id": "none"}
    )
    expect = "pong" if spec["kind"] == "ping" else "error"
    try:
        for _ in range(spec["frames"]):
            sent = time.monotonic()
            stats.first_send = stats.first_send or sent
            await ws.send(frame)
            answer = json.loads(await asyncio.wait_for(ws.recv(), 30))
            now = time.monotonic()
            if answer.get("type") != expect:
                stats.errors.append(f"got {answer}")
                break
            stats.round_trips += 1
            stats.rtt.append(now - sent)
            stats.last_recv = now
        if spec["kind"] == "idle":
            await asyncio.sleep(3600)  # until the parent says stop
    except Exception as exc:
        stats.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        await ws.close()


async def _worker(spec: dict[str, Any]) -> Stats:
    stats = Stats()
    ready, go = asyncio.Event(), asyncio.Event()
    if not spec["urls"]:
        ready.set()
    gate = asyncio.Semaphore(20)
    tasks = [asyncio.create_task(_socket(url, spec, stats, gate, ready, go)) for url in spec["urls"]]
    await asyncio.wait([asyncio.create_task(ready.wait()), *tasks], return_when=asyncio.FIRST_COMPLETED)
    print(f"ready {stats.connected}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    go.set()
    if spec["kind"] == "idle":
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for task in tasks:
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return stats


def worker_main() -> None:
    spec = json.loads(sys.stdin.readline())
    stats = asyncio.run(_worker(spec))
    print("result " + json.dumps(stats.__dict__), flush=True)


# ----------------------------------------------------------------------------------------- parent side


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    keys: list[str]  # one per user; the load phases use the first
    env: dict[str, str]


USERS = """
from django.contrib.auth import get_user_model
from accounts.services import api_key_create
for n in range({count}):
    print(api_key_create(user=get_user_model().objects.create_user(f"bench{{n}}"))[1])
"""


def _env(args: argparse.Namespace, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "OPENAI_", "AGENTSITE_"))}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update(
        DEBUG="false",
        SECRET_KEY="bench-" + "x" * 50,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="false",
        LOG_LEVEL="WARNING",
        AGENTSITE_DATA_DIR=str(data_dir),
        AGENTSITE_EMBEDDED_SCHEDULER="false",
        # One user holds every socket's session: its session cap and the request throttles are off.
        AGENTSITE_USER_MAX_SESSIONS="0",
        AGENTSITE_RATE_USER="off",
        AGENTSITE_RATE_ANON="off",
        # Its sockets, frames and queued messages too (docs/protocol.md §6.6): the path is measured.
        AGENTSITE_USER_MAX_SOCKETS="0",
        AGENTSITE_WS_RATE="off",
        AGENTSITE_SESSION_MAX_PENDING="0",
        AGENTSITE_USER_MAX_PENDING="0",
        PYTHONUNBUFFERED="1",
    )
    if args.database_url:
        env["DATABASE_URL"] = args.database_url
    if args.redis_url:
        env["REDIS_URL"] = args.redis_url
    return env


def _manage(root: Path, env: dict[str, str], *command: str) -> str:
    done = subprocess.run(
        [PYTHON, "manage.py", *command], cwd=root, env=env, capture_output=True, text=True, timeout=180
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@contextmanager
def server(args: argparse.Namespace, workdir: Path) -> Iterator[Server]:
    root = Path(args.root).resolve()
    env = _env(args, workdir)
    _manage(root, env, "migrate", "--noinput")
    keys = _manage(root, env, "shell", "-c", USERS.format(count=args.users)).split()[-args.users :]
    port = free_port()
    log = workdir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [PYTHON, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_port(process, port, log)
        yield Server(process, port, keys, env)
    finally:
        _stop(process)
        errors = [line for line in log.read_text(errors="replace").splitlines() if "Traceback" in line]
        if errors:
            print(f"  ! the server log has {len(errors)} traceback(s): {log}", flush=True)


async def sessions(srv: Server, keys: list[str]) -> list[str]:
    """One session per key given (the socket that opens it uses that key)."""
    import httpx

    gate = asyncio.Semaphore(20)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.port}", timeout=60) as http:

        async def one(key: str) -> str:
            async with gate:
                response = await http.post(
                    "/api/v1/chat/sessions", json={}, headers={"Authorization": f"Bearer {key}"}
                )
                response.raise_for_status()
                return str(response.json()["session_id"])

        return list(await asyncio.gather(*(one(key) for key in keys)))


async def phase(srv: Server, kind: str, count: int, args: argparse.Namespace) -> dict[str, Any]:
    # The load phases: every socket on the first user's key; idle: the sockets spread over every user.
    keys = [srv.keys[n % len(srv.keys)] if kind == "idle" else srv.keys[0] for n in range(count)]
    ids = await sessions(srv, keys)
    urls = [
        f"ws://127.0.0.1:{srv.port}/api/v1/chat/ws/{sid}?api_key={key}"
        for sid, key in zip(ids, keys, strict=True)
    ]
    clients = max(1, min(args.clients, len(urls)))
    workers = []
    for index in range(clients):
        process = await asyncio.create_subprocess_exec(
            PYTHON, __file__, "--worker", stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=2**26
        )
        mine = urls[index::clients]
        spec = {
            "urls": mine,
            "count": len(mine),
            "frames": args.frames if kind != "idle" else 0,
            "kind": kind,
        }
        assert process.stdin is not None
        process.stdin.write((json.dumps(spec) + "\n").encode())
        await process.stdin.drain()
        workers.append(process)
    connected = 0
    for process in workers:
        line = (await asyncio.wait_for(process.stdout.readline(), 120)).decode()
        connected += int(line.split()[1])
    await asyncio.sleep(1.0)  # connections settled
    pid = srv.process.pid
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for process in workers:
        process.stdin.write(b"go\n")
        await process.stdin.drain()
    if kind == "idle":
        await asyncio.sleep(args.idle_seconds)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        for process in workers:
            process.stdin.write(b"stop\n")
            await process.stdin.drain()
    stats = []
    for process in workers:
        line = (await process.stdout.readline()).decode()
        await process.wait()
        stats.append(Stats(**json.loads(line[len("result ") :])))
    if kind != "idle":
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
    first = min((s.first_send for s in stats if s.first_send), default=0.0)
    last = max((s.last_recv for s in stats), default=0.0)
    trips = sum(s.round_trips for s in stats)
    rtt = [v for s in stats for v in s.rtt]
    return {
        "kind": kind,
        "sockets": count,
        "connected": connected,
        "round_trips": trips,
        "per_second": trips / (last - first) if last > first else 0.0,
        "p50": pct(rtt, 0.5),
        "p99": pct(rtt, 0.99),
        "cpu_us_per_frame": (cpu1 - cpu0) / trips * 1e6 if trips else float("nan"),
        "cpu_percent": (cpu1 - cpu0) / (t1 - t0) * 100,
        "errors": [e for s in stats for e in s.errors],
    }


def describe(result: dict[str, Any]) -> str:
    if result["kind"] == "idle":
        return (
            f"| idle | {result['connected']}/{result['sockets']} | - | - | "
            f"{result['cpu_percent']:.2f} % CPU | {len(result['errors'])} |"
        )
    return (
        f"| {result['kind']} | {result['connected']}/{result['sockets']} | {result['per_second']:,.0f} | "
        f"{result['p50']:.2f} / {result['p99']:.2f} | {result['cpu_us_per_frame']:.0f} µs/frame "
        f"({result['cpu_percent']:.0f} %) | {len(result['errors'])} |"
    )


async def run(args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="agentsite-frames-") as workdir,
        server(args, Path(workdir)) as srv,
    ):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=args.root, capture_output=True, text=True
        ).stdout.strip()
        await sessions(srv, srv.keys[:1])  # warm up
        print(f"root {args.root} ({commit or '?'}), {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
        print("| phase | sockets | round trips/s | round trip p50 / p99 (ms) | server CPU | errors |")
        print("|---|---|---|---|---|---|")
        for kind in ("ping", "steer"):
            result = await phase(srv, kind, args.sockets, args)
            print(describe(result), flush=True)
            for error in result["errors"][:3]:
                print(f"    {error}")
        if args.idle_sockets:
            result = await phase(srv, "idle", args.idle_sockets, args)
            print(describe(result), flush=True)
            for error in result["errors"][:3]:
                print(f"    {error}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", default=str(HERE.parent), help="the checkout whose server runs")
    parser.add_argument("--sockets", type=int, default=50)
    parser.add_argument("--frames", type=int, default=400, help="frames per socket in ping and steer")
    parser.add_argument("--clients", type=int, default=2, help="load client processes")
    parser.add_argument("--idle-sockets", type=int, default=1000, help="0 skips the idle phase")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument(
        "--users", type=int, default=1000, help="users with a key each; idle sockets spread over them"
    )
    parser.add_argument("--database-url", default="")
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main()
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
