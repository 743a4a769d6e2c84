"""Scale-out benchmark (issue 8, item 5): agentsite on Postgres + Redis, 1 vs 2 processes, and the worst case.

    .venv/bin/python bench/cluster_load.py [--sessions 50,200] [--messages 6,3] [--layouts 1proc,2proc,worst]
                                           [--delays 0,0.03] [--clients 2] [--timeout 90] [--profile DIR]

The load is bench/ws_load.py's (same load clients, same K-word demo reply, same figures); what changes
is where the sessions live and where the sockets land. Servers are separate `manage.py serve --port P`
processes (through bench/serve_demo.py) on one fresh Postgres database and one Redis, so the benchmark
chooses the process of every socket:

- `1proc`: one process; every socket on it (it owns every session).
- `2proc`: two processes; socket i on process i % 2, and each socket's process owns its session (a
  socket connect is the first touch), so every frame stays in its process: the all-local case.
- `worst`: two processes; each session is first touched by a REST GET on A (A owns it), and every
  socket connects to B. Every command goes B → A over the channel layer and every event A → B
  (RedisPubSubChannelLayer, deltas coalesced by chat/live/cluster/relay.py EventRelay) before B sends it.

Each phase checks, through the Redis leases, how many sockets sat on a process that did not own their
session and whether any owner changed during the phase. It reports frames/s, time to first delta and
to `result`, errors, CPU per delivered frame summed over the server processes, and, separately, the
CPU of Redis (INFO; the Redis may be shared) and of this database's Postgres backends.

The database (`agentsite_bench_<hex>`) is created here and dropped at the end, the Redis keys of the
benchmark's sessions are deleted, and every server process is stopped. Loopback only; each phase stops
at its deadline (--timeout). See bench/README.md for the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ws_load  # noqa: E402  (the load clients, server helpers and percentiles are shared)
from ws_load import (  # noqa: E402
    PYTHON,
    ROOT,
    Server,
    cpu_seconds,
    pct,
    rss_mb,
)

LAYOUTS = ("1proc", "2proc", "worst")
# The servers' deployment prefix, so that the session keys are known (chat/live/cluster/keys.py).
DEPLOYMENT = "agentsite-bench"
OWNER_KEY = f"agentsite:{DEPLOYMENT}:owner:{{}}"  # value "<process id>|<fencing token>"
SESSION_KEYS = tuple(
    f"agentsite:{DEPLOYMENT}:{kind}:{{}}" for kind in ("owner", "fence", "events", "events-floor")
)

# ----------------------------------------------------------------------------------------- services


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """CREATE DATABASE agentsite_bench_<hex>; yield its URL; DROP it (WITH FORCE) afterwards."""
    import psycopg

    name = f"agentsite_bench_{secrets.token_hex(5)}"
    admin = admin_url.replace("postgres://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def redis_client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def redis_cpu(client: Any) -> float:
    """used_cpu_user + used_cpu_sys of the Redis server (all its clients, not only ours)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def postgres_cpu(database: str) -> float:
    """CPU seconds of the Postgres backends connected to `database` (found by their command line)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("postgres:") and f" {database} " in cmdline:
            total += cpu_seconds(int(entry.name))
    return total


def owners(client: Any, session_ids: list[str]) -> list[str | None]:
    """The owner process id of each session (None when no lease is held)."""
    raw = client.mget([OWNER_KEY.format(sid) for sid in session_ids]) if session_ids else []
    return [value.decode().split("|", 1)[0] if value else None for value in raw]


def forget_sessions(client: Any, session_ids: list[str]) -> None:
    """Delete the benchmark sessions' leases, fencing counters and replay streams from Redis."""
    keys = [pattern.format(sid) for sid in session_ids for pattern in SESSION_KEYS]
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])


# ----------------------------------------------------------------------------------------- servers


@dataclass
class Cluster:
    servers: list[Server]
    process_ids: dict[int, str]  # port -> process id (the channel name stored in leases)
    touched: list[str]  # every session id created, for the Redis clean-up
    env: dict[str, str]  # the servers' environment (for manage.py)
    user: str  # owner of the API key and of every session


CREATE_SESSIONS = """
from django.contrib.auth import get_user_model
from chat.services import session_create
user = get_user_model().objects.get(username=USER)
print(" ".join(session_create(user=user).id for _ in range(COUNT)))
"""


def create_sessions_in_db(env: dict[str, str], user: str, count: int) -> list[str]:
    """Create the benchmark's sessions in one `manage.py shell` (one DB connection, no REST).

    Not POST /api/v1/chat/sessions: under ASGI each REST request runs in a thread of its own, and with
    persistent connections (CONN_MAX_AGE=600) each such thread leaves a Postgres connection behind until
    the garbage collector finds it; 200 sessions' worth of requests exhausted max_connections=100
    (see bench/README.md, bottleneck 1).
    """
    script = CREATE_SESSIONS.replace("USER", repr(user)).replace("COUNT", str(int(count)))
    done = subprocess.run(
        [PYTHON, "manage.py", "shell", "-v", "0", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(f"creating sessions failed:\n{done.stdout}\n{done.stderr}")
    ids = done.stdout.strip().splitlines()[-1].split() if done.stdout.strip() else []
    if len(ids) != count:
        raise RuntimeError(f"expected {count} session ids, got:\n{done.stdout[-500:]}")
    return ids


async def touch_by_socket(server: Server, session_ids: list[str]) -> None:
    """Connect a socket to `server` for each session, read `connected`, close: that process owns it now."""
    import json

    from websockets.asyncio.client import connect

    gate = asyncio.Semaphore(20)

    async def one(session_id: str) -> None:
        async with gate, connect(server.url(session_id), open_timeout=60) as ws:
            first = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if first.get("type") != "connected":
                raise RuntimeError(f"touch {session_id}: {first}")

    await asyncio.gather(*(one(sid) for sid in session_ids))


async def touch(server: Server, session_ids: list[str]) -> None:
    """GET /api/v1/chat/sessions/{id} on `server`: the first touch makes that process the owner."""
    import httpx

    gate = asyncio.Semaphore(20)
    headers = {"Authorization": f"Bearer {server.key}"}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{server.port}", headers=headers, timeout=60
    ) as client:

        async def one(session_id: str) -> None:
            async with gate:
                response = await client.get(f"/api/v1/chat/sessions/{session_id}")
                response.raise_for_status()

        await asyncio.gather(*(one(sid) for sid in session_ids))


@contextmanager
def cluster(
    args: argparse.Namespace, workdir: Path, database_url: str, user: str, key: str, count: int, label: str
) -> Iterator[Cluster]:
    """`count` serve_demo.py processes on the same database and Redis (only the first runs the scheduler)."""
    args.database_url, args.redis_url = database_url, args.redis
    env = ws_load.agentsite_env(args, workdir / "data")  # one SECRET_KEY and data dir for all of them
    env["AGENTSITE_CACHE_PREFIX"] = DEPLOYMENT
    started: list[Server] = []
    logs: list[Path] = []
    try:
        for index in range(count):
            port = ws_load.free_port()
            log = workdir / f"{label}-{index}.log"
            logs.append(log)
            command = [PYTHON, str(HERE / "serve_demo.py"), "--host", "127.0.0.1", "--port", str(port)]
            if index:
                command.append("--no-scheduler")
            with log.open("wb") as out:
                process = subprocess.Popen(
                    command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            started.append(
                Server("ABCD"[index], process, port, "/api/v1/chat/ws/{sid}?api_key={key}", key=key)
            )
            ws_load._wait_port(process, port, log)
        redis = redis_client(args.redis)
        process_ids: dict[int, str] = {}
        touched: list[str] = []
        for server in started:  # warm-up, and learn each process's id from a session it owns
            probe = asyncio.run(ws_load.create_sessions(server, 1))
            asyncio.run(touch(server, probe))
            touched += probe
            owner = owners(redis, probe)[0]
            if owner is None:
                raise RuntimeError(f"server {server.name} took no lease: is REDIS_URL honoured?")
            process_ids[server.port] = owner
            server.base_rss = rss_mb(server.process.pid)
        yield Cluster(started, process_ids, touched, env, user)
    finally:
        for server in started:
            ws_load._stop(server.process)
        for log in logs:
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            bad = [i for i, line in enumerate(lines) if "Traceback" in line or "ERROR" in line]
            if bad:
                print(f"  ! {log.name} has {len(bad)} error line(s), e.g.:", flush=True)
                print("\n".join(f"      {line}" for line in lines[bad[0] : bad[0] + 3]), flush=True)
                causes = {
                    line for line in lines if line[:1].isalpha() and ("Error" in line or "Exception" in line)
                }
                for cause in sorted(causes)[:5]:  # the exception lines that end the tracebacks
                    print(f"      ... {cause}", flush=True)


# ----------------------------------------------------------------------------------------- phases


@dataclass
class ClusterResult:
    layout: str
    delay: float
    phase: ws_load.PhaseResult
    cpu_by_process: dict[str, float]
    rss_by_process: dict[str, float]
    redis_cpu: float
    postgres_cpu: float
    cross_sockets: int  # sockets on a process that did not own their session
    owner_changes: int  # sessions whose owner changed during the phase

    def per_frame(self, seconds: float) -> float:
        return seconds / self.phase.frames * 1e6 if self.phase.frames else float("nan")


def _start_profilers(servers: list[Server], tag: str, args: argparse.Namespace) -> list[Any]:
    """py-spy on every server process of the phase (collapsed stacks in --profile DIR)."""
    if not args.profile:
        return []
    spy = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    Path(args.profile).mkdir(parents=True, exist_ok=True)
    flags = os.environ.get("BENCH_PYSPY_FLAGS", "--gil").split()
    spies = []
    for server in servers:
        out = Path(args.profile) / f"{tag}-{server.name}.txt"
        command = [spy, "record", "--pid", str(server.process.pid), "--format", "raw", "--rate", "200"]
        command += [*flags, "--nonblocking", "-o", str(out)]
        spies.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(0.5)
    return spies


async def cluster_phase(
    group: Cluster, layout: str, sessions: int, args: argparse.Namespace, database: str
) -> ClusterResult:
    """Place N sessions and sockets by `layout`, run M messages per socket, measure every process."""
    servers = group.servers
    first = servers[0]
    session_ids = create_sessions_in_db(group.env, group.user, sessions)  # owned by nobody yet
    group.touched += session_ids
    if layout == "worst":
        await (touch if args.own_by == "rest" else touch_by_socket)(first, session_ids)  # A owns them all...
        placed = [servers[1]] * sessions  # ...and every socket is on B
    else:
        placed = [servers[i % len(servers)] for i in range(sessions)]
    urls = [server.url(sid) for server, sid in zip(placed, session_ids, strict=True)]
    messages = args.message_counts[sessions]
    tag = f"{layout}{sessions}"
    workers = await ws_load._spawn_workers(urls, args, idle=False, tag=tag, messages=messages)
    await ws_load._read_ready(workers, args.timeout)
    redis = redis_client(args.redis)
    owned_before = owners(redis, session_ids)
    cpu0 = {s.name: cpu_seconds(s.process.pid) for s in servers}
    redis0, pg0 = redis_cpu(redis), postgres_cpu(database)
    done = asyncio.Event()
    samplers = {s.name: asyncio.create_task(ws_load._sample_rss(s.process.pid, done)) for s in servers}
    spies = _start_profilers(servers, f"{layout}-d{args.delay:g}-{sessions}", args)
    await ws_load._tell(workers, "go")
    stats = await ws_load._collect(workers)
    done.set()
    for spy in spies:
        ws_load._stop_profiler(spy)
    cpu = {s.name: cpu_seconds(s.process.pid) - cpu0[s.name] for s in servers}
    redis_used, pg_used = redis_cpu(redis) - redis0, postgres_cpu(database) - pg0
    rss = {name: await task for name, task in samplers.items()}
    owned_after = owners(redis, session_ids)
    cross = sum(
        1
        for server, owner in zip(placed, owned_before, strict=True)
        if owner != group.process_ids[server.port]
    )
    changes = sum(1 for a, b in zip(owned_before, owned_after, strict=True) if a != b)
    first_send = min((s.first_send for s in stats if s.first_send), default=0.0)
    last = max((s.last_recv for s in stats), default=0.0)
    phase = ws_load.PhaseResult(
        server=layout,
        sessions=sessions,
        messages=messages,
        frames=sum(s.frames for s in stats),
        deltas=sum(s.deltas for s in stats),
        results=sum(s.results for s in stats),
        expected=sessions * messages,
        seconds=max(last - first_send, 0.0),
        ttfd=[v for s in stats for v in s.ttfd],
        ttr=[v for s in stats for v in s.ttr],
        errors=[e for s in stats for e in s.errors],
        server_cpu=sum(cpu.values()),
        client_cpu=[s.cpu for s in stats],
        rss_peak=max(rss.values()),
        rss_after=0.0,
    )
    return ClusterResult(layout, args.delay, phase, cpu, rss, redis_used, pg_used, cross, changes)


# ----------------------------------------------------------------------------------------- report


def describe(result: ClusterResult) -> str:
    phase = result.phase
    secs = phase.seconds or float("nan")
    per_process = ", ".join(
        f"{name} {value / secs * 100:.0f}%" for name, value in result.cpu_by_process.items()
    )
    clients = ", ".join(f"{c / secs * 100:.0f}%" for c in phase.client_cpu)
    return (
        f"  {result.layout:6} delay {result.delay:<5g} N={phase.sessions:<4} {phase.fps:>7,.0f} frames/s  "
        f"first delta p50 {pct(phase.ttfd, 0.5):7.1f} p99 {pct(phase.ttfd, 0.99):7.1f} ms  "
        f"result p99 {pct(phase.ttr, 0.99):7.1f} ms  errors {len(phase.errors)}  "
        f"results {phase.results}/{phase.expected}  cross-process sockets {result.cross_sockets}/"
        f"{phase.sessions}  owner changes {result.owner_changes}  server CPU {per_process} "
        f"({result.per_frame(phase.server_cpu):.0f} µs/frame)  Redis {result.per_frame(result.redis_cpu):.0f}"
        f" µs/frame  Postgres {result.per_frame(result.postgres_cpu):.0f} µs/frame  clients {clients}  "
        f"RSS peak {', '.join(f'{n} {v:.0f} MB' for n, v in result.rss_by_process.items())}"
    )


def report(results: list[ClusterResult]) -> None:
    print("\n## Summary")
    print(
        "| layout | delay (s) | N | frames/s | first delta p50 / p99 (ms) | result p99 (ms) | errors "
        "| cross-process sockets | server CPU µs/frame (sum) | Redis µs/frame | Postgres µs/frame |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        p = r.phase
        print(
            f"| {r.layout} | {r.delay:g} | {p.sessions} | {p.fps:,.0f} | {pct(p.ttfd, 0.5):,.0f} / "
            f"{pct(p.ttfd, 0.99):,.0f} | {pct(p.ttr, 0.99):,.0f} | {len(p.errors)} | {r.cross_sockets}/"
            f"{p.sessions} | {r.per_frame(p.server_cpu):.0f} | {r.per_frame(r.redis_cpu):.0f} | "
            f"{r.per_frame(r.postgres_cpu):.0f} |"
        )
    by_key = {(r.layout, r.delay, r.phase.sessions): r for r in results}
    print("\n## Cost of a cross-process frame (worst case − all-local on the same two processes)")
    for (layout, delay, n), worst in sorted(by_key.items()):
        local = by_key.get(("2proc", delay, n))
        if layout != "worst" or local is None:
            continue
        mine = worst.per_frame(worst.phase.server_cpu)
        base = local.per_frame(local.phase.server_cpu)
        with_redis = mine + worst.per_frame(worst.redis_cpu)
        base_redis = base + local.per_frame(local.redis_cpu)
        print(
            f"- delay {delay:g}, N={n}: servers {mine:.0f} vs {base:.0f} µs/frame (+{mine - base:.0f}); "
            f"with Redis {with_redis:.0f} vs {base_redis:.0f} (+{with_redis - base_redis:.0f})"
        )


# ----------------------------------------------------------------------------------------- main


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", default="50,200", help="session counts (default 50,200)")
    parser.add_argument("--messages", default="6,3", help="messages per session, one per --sessions entry")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="1proc, 2proc, worst (default all)")
    parser.add_argument("--delays", default="0,0.03", help="demo delays in seconds, one server start each")
    parser.add_argument("--chunks", type=int, default=50, help="deltas per reply, K (default 50)")
    parser.add_argument("--clients", type=int, default=2, help="load client processes (default 2)")
    parser.add_argument("--timeout", type=float, default=90.0, help="deadline of each phase in seconds")
    parser.add_argument(
        "--max-turns", type=int, default=0, help="AGENTSITE_MAX_CONCURRENT_TURNS (default max N)"
    )
    parser.add_argument(
        "--postgres",
        default="postgres://postgres@127.0.0.1:5432/postgres",
        help="an admin URL; a fresh database is created next to it and dropped at the end",
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="REDIS_URL")
    parser.add_argument(
        "--own-by",
        choices=("socket", "rest"),
        default="socket",
        help="worst case: make A the owner by a socket connect (default) or a REST GET on A",
    )
    parser.add_argument("--profile", default="", help="write py-spy collapsed stacks of every server here")
    args = parser.parse_args(argv)
    args.sessions = [int(n) for n in args.sessions.split(",") if n.strip()]
    counts = [int(m) for m in args.messages.split(",") if m.strip()]
    if len(counts) == 1:
        counts *= len(args.sessions)
    if len(counts) != len(args.sessions):
        parser.error("--messages takes one count, or one per --sessions entry")
    args.message_counts = dict(zip(args.sessions, counts, strict=True))
    args.layouts = [name for name in args.layouts.split(",") if name.strip()]
    if unknown := set(args.layouts) - set(LAYOUTS):
        parser.error(f"unknown layout(s): {', '.join(sorted(unknown))}")
    args.delays = [float(d) for d in args.delays.split(",") if d.strip()]
    args.max_turns = args.max_turns or max([*args.sessions, 1])
    return args


def main() -> int:
    args = parse()
    started = time.monotonic()
    print(f"load average at start: {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="agentsite-cluster-bench-"))
    results: list[ClusterResult] = []
    touched: list[str] = []
    try:
        with fresh_database(args.postgres) as database_url:
            database = database_url.rsplit("/", 1)[1]
            args.delay, args.database_url, args.redis_url = 0.0, database_url, args.redis
            setup = ws_load.agentsite_env(args, workdir / "data")
            ws_load.manage(setup, "migrate", "--noinput")
            user = f"bench-{secrets.token_hex(3)}"
            key = ws_load.manage(setup, "create_api_key", "--user", user, "--create-user").strip()
            for delay in args.delays:
                args.delay = delay
                for layout in args.layouts:
                    count = 1 if layout == "1proc" else 2
                    print(f"# {layout}: {count} process(es), demo delay {delay:g} s", flush=True)
                    label = f"{layout}-{delay:g}"
                    with cluster(args, workdir, database_url, user, key, count, label) as group:
                        try:
                            for sessions in args.sessions:
                                result = asyncio.run(cluster_phase(group, layout, sessions, args, database))
                                results.append(result)
                                print(describe(result), flush=True)
                                ws_load.show_errors(result.phase)
                        finally:
                            touched += group.touched
        report(results)
    finally:
        if touched:
            forget_sessions(redis_client(args.redis), touched)
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\ntotal {time.monotonic() - started:.0f} s, load average at end {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    return 0 if all(not r.phase.errors for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
