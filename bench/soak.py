"""Soak (issue 14, item 7): two server processes, 200 chatting sessions, Redis restarted twice and one
server SIGKILLed; nothing acknowledged may be lost and nothing may arrive twice.

    .venv/bin/python bench/soak.py [--minutes 10] [--sessions 200] [--think 30] [--chunks 12] [--delay 0.08]
                                   [--postgres URL] [--redis-port 0] [--seed 1] [--keep] [--trace FILE]

(`make soak` runs it with the defaults.) Loopback only. What it starts, it owns and stops: a redis-server
on a free port (so that it can restart it; no data kept: a restart loses every lease, replay stream and
channel-layer message), two `manage.py serve` processes (daphne, DEBUG off, Postgres + Redis, the demo
model streaming --chunks deltas --delay s apart: bench/serve_demo.py), and a fresh Postgres database next
to --postgres, dropped at the end.

Timeline of the chat phase (--minutes minus 150 s for setup, drain and the check): at 20 % Redis is
killed and started again, at 45 % server B is SIGKILLed and started again, at 70 % Redis again. At the end
nobody sends new messages; the clients drive their queues until every message is answered (at most
--drain s), then every session's history is read back over REST from a live process. The clients
(bench/soak_client.py) follow the contract on errors. bench/README.md ("Soak") defines every figure.
Exit status 0 only when nothing was lost and nothing was duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from contextlib import nullcontext  # noqa: E402

import ws_load  # noqa: E402  (environment, ports, processes: shared with the other benchmarks)
from cluster_load import create_sessions_in_db, fresh_database  # noqa: E402
from soak_client import FINAL_STATUSES, Client, Tally  # noqa: E402
from ws_load import PYTHON, ROOT, pct  # noqa: E402

# ------------------------------------------------------------------------------------ what it owns


class OwnRedis:
    """A redis-server this run starts, kills and starts again on the same port (nothing persisted)."""

    def __init__(self, port: int, log: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("the soak needs redis-server (Debian: apt-get install redis-server)")
        self.binary, self.port, self.log = binary, port, log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen([*command, "no"], stdout=out, stderr=subprocess.STDOUT)
        wait_port(self.port, up=True)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        wait_port(self.port, up=False)


class Servers:
    """Two `serve_demo.py` processes on fixed ports (clients know only these two); B may be killed."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env, self.workdir = env, workdir
        self.ports = [ws_load.free_port(), ws_load.free_port()]
        self.processes: list[subprocess.Popen[bytes] | None] = [None, None]

    def log(self, index: int) -> Path:
        return self.workdir / f"server-{'AB'[index]}.log"

    def start(self, index: int) -> None:
        command = [
            PYTHON,
            str(HERE / "serve_demo.py"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.ports[index]),
        ]
        if index:
            command.append("--no-scheduler")
        with self.log(index).open("ab") as out:
            process = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes[index] = process
        ws_load._wait_port(process, self.ports[index], self.log(index))

    def kill(self, index: int) -> None:
        process = self.processes[index]
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        wait_port(self.ports[index], up=False)

    def stop(self) -> None:
        for process in self.processes:
            if process is not None:
                ws_load._stop(process)

    def alive(self, index: int) -> bool:
        process = self.processes[index]
        return process is not None and process.poll() is None

    def error_lines(self) -> list[str]:
        """Per server log: how many error lines, and the exception lines that end its tracebacks."""
        out = []
        for index in (0, 1):
            path = self.log(index)
            lines = path.read_text(errors="replace").splitlines() if path.exists() else []
            bad = [line for line in lines if "Traceback" in line or "ERROR" in line]
            causes = Counter(
                line for line in lines if line[:1].isalpha() and ("Error" in line or "Exception" in line)
            )
            out.append(f"server {'AB'[index]}: {len(bad)} error line(s) in {path.name}")
            out += [f"    {count} × {cause[:160]}" for cause, count in causes.most_common(6)]
        return out


def wait_port(port: int, *, up: bool, within: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                answering = True
        except OSError:
            answering = False
        if answering == up:
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} {'never answered' if up else 'still answers'}")


# ------------------------------------------------------------------------------------ the faults


@dataclass
class Fault:
    name: str
    started: float = 0.0  # monotonic
    back: float = 0.0  # the service (Redis, the server's port) answers again


async def inject(
    faults: list[Fault], at: list[float], redis: OwnRedis, servers: Servers, t0: float, redis_down: float
) -> None:
    for fault, when in zip(faults, at, strict=True):
        await asyncio.sleep(max(0.0, t0 + when - time.monotonic()))
        fault.started = time.monotonic()
        print(f"  [{fault.started - t0:6.1f} s] {fault.name}", flush=True)
        if fault.name.startswith("Redis"):
            await asyncio.to_thread(redis.kill)
            await asyncio.sleep(redis_down)
            await asyncio.to_thread(redis.start)
        else:
            await asyncio.to_thread(servers.kill, 1)
            await asyncio.sleep(3.0)
            await asyncio.to_thread(servers.start, 1)
        fault.back = time.monotonic()
        print(f"  [{fault.back - t0:6.1f} s] back", flush=True)


# ------------------------------------------------------------------------------------ the check


@dataclass
class Verdict:
    sent: int = 0
    acked: int = 0
    stored: int = 0
    answered: int = 0
    answered_live: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)  # stored, still waiting in a session still at work
    stored_twice: list[str] = field(default_factory=list)
    unacked_stored: int = 0  # sent, never acknowledged, yet stored (and answered): not lost, just unsure
    unacked_unanswered: list[str] = field(default_factory=list)
    not_idle: list[str] = field(default_factory=list)  # sessions still running or with pending at the end


async def read_back(port: int, key: str, clients: list[Client]) -> Verdict:
    """Every session's stored history and snapshot, from a live process, against what the clients sent."""
    import httpx

    verdict = Verdict()
    gate = asyncio.Semaphore(8)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as http:

        async def rows_of(session_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
            # The snapshot first: a message queued or running then is in it, and one that started since is
            # in the history read after it (rows only move forward: pending → running → final).
            async with gate:
                detail = await http.get(f"/api/v1/chat/sessions/{session_id}")
                detail.raise_for_status()
                rows: list[dict[str, Any]] = []
                cursor = None
                while True:
                    params = {"limit": "500", **({"cursor": cursor} if cursor else {})}
                    response = await http.get(f"/api/v1/chat/sessions/{session_id}/messages", params=params)
                    response.raise_for_status()
                    body = response.json()
                    rows += body["results"]
                    cursor = body.get("next")
                    if not cursor:
                        break
                return rows, detail.json()["snapshot"]

        fetched = await asyncio.gather(*(rows_of(client.session_id) for client in clients))
    for client, (rows, snapshot) in zip(clients, fetched, strict=True):
        judge(client, rows, snapshot, verdict)
    return verdict


def judge(client: Client, rows: list[dict[str, Any]], snapshot: dict[str, Any], verdict: Verdict) -> None:
    users = Counter(row["message_id"] for row in rows if row["role"] == "user")
    status = {row["message_id"]: row["status"] for row in rows if row["role"] == "user"}
    pending = {item["message_id"] for item in snapshot["pending"]}
    if snapshot["active_message_id"]:
        pending.add(snapshot["active_message_id"])
    busy = bool(snapshot["running"] or pending)
    if busy:
        verdict.not_idle.append(f"{client.session_id}: running={snapshot['running']} pending={len(pending)}")
    verdict.stored_twice += [f"{client.session_id} {mid}" for mid, n in users.items() if n > 1]
    for message in client.messages.values():
        mid = message.message_id
        verdict.sent += 1
        verdict.answered_live += message.answered
        stored = mid in users or mid in pending
        answered = status.get(mid) in FINAL_STATUSES
        if message.acked:
            verdict.acked += 1
            verdict.stored += stored
            verdict.answered += answered
            verdict.by_status[status.get(mid, "pending" if mid in pending else "missing")] += 1
            if not (stored and answered):
                where = status.get(mid) or ("pending" if mid in pending else "not stored")
                # Still queued or running in a session at work: the drain was too short, not a loss.
                waiting = stored and busy and mid in pending
                (verdict.unfinished if waiting else verdict.lost).append(
                    f"{client.session_id} {mid}: {where}"
                )
        elif stored:
            verdict.unacked_stored += 1
            if not answered:
                verdict.unacked_unanswered.append(
                    f"{client.session_id} {mid}: {status.get(mid) or 'pending'}"
                )


# ------------------------------------------------------------------------------------ the report


def windows(faults: list[Fault], t0: float, end: float, samples: list[tuple[float, float]]) -> list[str]:
    """p50/p99 first delta per phase (between faults), and in the minute before and after each fault."""

    def line(label: str, start: float, stop: float) -> str:
        values = [latency for sent, latency in samples if start <= sent < stop]
        if not values:
            return f"| {label} | {start - t0:.0f}–{stop - t0:.0f} s | 0 | – | – |"
        return (
            f"| {label} | {start - t0:.0f}–{stop - t0:.0f} s | {len(values)} | {pct(values, 0.5):.0f} | "
            f"{pct(values, 0.99):.0f} |"
        )

    out = ["| window | time | turns | first delta p50 (ms) | p99 (ms) |", "|---|---|---|---|---|"]
    edges = [t0] + [f.started for f in faults] + [end]
    names = ["start"] + [f.name for f in faults]
    for index in range(len(edges) - 1):
        start = edges[index] if index == 0 else faults[index - 1].back
        out.append(
            line(f"after {names[index]}" if index else "before the first fault", start, edges[index + 1])
        )
    for fault in faults:
        out.append(line(f"60 s before: {fault.name}", max(t0, fault.started - 60), fault.started))
        out.append(line(f"60 s after: {fault.name} (from back)", fault.back, min(end, fault.back + 60)))
    return out


def report(
    verdict: Verdict, tally: Tally, faults: list[Fault], t0: float, end: float, servers: Servers
) -> int:
    duplicates = (
        len(verdict.stored_twice)
        + len(tally.duplicate_seqs)
        + len(tally.duplicate_starts)
        + len(tally.duplicate_results)
    )
    t = tally
    lines = [
        f"- messages sent: {verdict.sent} (resends of the same id: {t.resent})",
        f"- acknowledged: {verdict.acked} (by `duplicate_message_id` to a resend: {t.acked_by_duplicate})",
        f"- stored (acknowledged ones, read back over REST): {verdict.stored}",
        f"- answered (acknowledged ones with a final status): {verdict.answered} — "
        f"{dict(sorted(verdict.by_status.items()))}; seen answered live: {verdict.answered_live}",
        f"- **lost: {len(verdict.lost)}**; unfinished (queued or running when the drain ended): "
        f"{len(verdict.unfinished)}",
        f"- **duplicates: {duplicates}** (message stored twice {len(verdict.stored_twice)}, event seq twice "
        f"on a client {len(t.duplicate_seqs)}, turn started twice {len(t.duplicate_starts)}, result twice "
        f"{len(t.duplicate_results)})",
        f"- never acknowledged but stored: {verdict.unacked_stored} (of them unanswered: "
        f"{len(verdict.unacked_unanswered)}); sessions not idle at the end: {len(verdict.not_idle)}",
        f"- refused for now (unavailable/owner_unavailable): {t.refused_for_now}; connects {t.connects}, "
        f"failed connects {dict(t.connect_failures)}; closes by code {dict(t.closes)}",
        f"- resyncs {t.resyncs}, stuck reconnects {t.stuck_reconnects}, stale mirrors {t.stale_mirror}, "
        f"histories read {t.outcome_reads}, frames {t.frames}",
        f"- error frames: {dict(t.errors)}",
    ]
    print("\n## Soak figures")
    print("\n".join(lines))
    print()
    print("\n".join(windows(faults, t0, end, tally.first_delta)))
    print()
    print("\n".join(servers.error_lines()))
    for label, items in (
        ("lost", verdict.lost),
        ("unfinished", verdict.unfinished),
        ("stored twice", verdict.stored_twice),
        ("seq twice", tally.duplicate_seqs),
        ("started twice", tally.duplicate_starts),
        ("result twice", tally.duplicate_results),
        ("not acknowledged, stored, unanswered", verdict.unacked_unanswered),
        ("not idle", verdict.not_idle),
    ):
        if items:
            print(f"\n{label} ({len(items)}), e.g.:\n  " + "\n  ".join(items[:10]))
    return 0 if not verdict.lost and not verdict.unfinished and not duplicates else 1


# ------------------------------------------------------------------------------------ main


async def chat(
    args: argparse.Namespace, servers: Servers, redis: OwnRedis, key: str, session_ids: list[str]
) -> int:
    tally = Tally()
    clients = [
        Client(i, sid, servers.ports, key, tally, think=args.think, seed=args.seed * 100_003 + i)
        for i, sid in enumerate(session_ids)
    ]
    chat_seconds = max(30.0, args.minutes * 60 - 150)
    faults = [Fault("Redis restarted"), Fault("server B SIGKILLed"), Fault("Redis restarted again")]
    t0 = time.monotonic()
    stop_at = t0 + chat_seconds
    deadline = stop_at + args.drain
    print(f"chat phase {chat_seconds:.0f} s, then a drain of at most {args.drain:.0f} s", flush=True)
    injector = asyncio.create_task(
        inject(
            faults,
            [0.2 * chat_seconds, 0.45 * chat_seconds, 0.7 * chat_seconds],
            redis,
            servers,
            t0,
            args.redis_down,
        )
    )

    async def staggered(client: Client) -> None:
        await asyncio.sleep(client.rng.uniform(0, 5))
        await client.run(deadline)

    runs = asyncio.gather(*(staggered(client) for client in clients))
    await asyncio.sleep(max(0.0, stop_at - time.monotonic()))
    for client in clients:
        client.stop_sending.set()
    await injector
    print(f"  [{time.monotonic() - t0:6.1f} s] sending stopped; draining", flush=True)
    await runs
    end = time.monotonic()
    waiting = sum(1 for client in clients if client.unsettled())
    print(f"  [{end - t0:6.1f} s] drained ({waiting} client(s) still waiting for an answer)", flush=True)
    if not servers.alive(0) or not servers.alive(1):
        print("a server process died on its own during the soak", flush=True)
    verdict = await read_back(servers.ports[0], key, clients)
    if args.trace:
        write_trace(Path(args.trace), clients, verdict, tally, faults)
    return report(verdict, tally, faults, t0, stop_at, servers)


def write_trace(
    path: Path, clients: list[Client], verdict: Verdict, tally: Tally, faults: list[Fault]
) -> None:
    troubled = verdict.lost + verdict.stored_twice + tally.duplicate_seqs + tally.duplicate_starts
    troubled += tally.duplicate_results + verdict.unfinished + verdict.not_idle + verdict.unacked_unanswered
    ids = {line.split(" ", 1)[0].rstrip(":") for line in troubled}
    with path.open("w") as out:
        for fault in faults:
            out.write(f"{fault.started:.3f} FAULT {fault.name}; back {fault.back:.3f}\n")
        for client in clients:
            if client.session_id in ids:
                out.write(f"\n### client {client.index} session {client.session_id}\n")
                out.write("\n".join(client.trace) + "\n")
    print(f"traces of {len(ids)} session(s) in {path}", flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="the whole run, about (default 10)")
    parser.add_argument("--sessions", type=int, default=200, help="sessions, one client each (default 200)")
    parser.add_argument("--think", type=float, default=30.0, help="mean seconds between a client's actions")
    parser.add_argument("--chunks", type=int, default=12, help="deltas per model reply (default 12)")
    parser.add_argument("--delay", type=float, default=0.08, help="seconds between deltas (default 0.08)")
    parser.add_argument("--drain", type=float, default=120.0, help="at most this long to answer what is left")
    parser.add_argument("--redis-down", type=float, default=2.0, help="seconds Redis stays away per restart")
    parser.add_argument(
        "--redis-port", type=int, default=0, help="port of the soak's own Redis (default: free)"
    )
    parser.add_argument(
        "--lease", type=float, default=0.0, help="AGENTSITE_SESSION_LEASE_SECONDS (default: the server's)"
    )
    parser.add_argument(
        "--postgres",
        default="postgres://postgres@127.0.0.1:5432/postgres",
        help="an admin URL; a fresh database is created next to it and dropped at the end",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--keep", action="store_true", help="keep the database and the logs' folder (for a post-mortem)"
    )
    parser.add_argument("--trace", default="", help="write what each troubled session's client saw here")
    return parser.parse_args(argv)


def main() -> int:
    args = parse()
    started = time.monotonic()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="agentsite-soak-"))
    redis = OwnRedis(args.redis_port or ws_load.free_port(), workdir / "redis.log")
    redis.start()
    servers: Servers | None = None
    try:
        if args.keep:
            import psycopg

            name = f"agentsite_soak_{os.getpid()}"
            with psycopg.connect(
                args.postgres.replace("postgres://", "postgresql://", 1), autocommit=True
            ) as c:
                c.execute(f'CREATE DATABASE "{name}"')
            kept = nullcontext(args.postgres.rsplit("/", 1)[0] + f"/{name}")
            print(f"keeping database {name} and {workdir}", flush=True)
        with kept if args.keep else fresh_database(args.postgres) as database_url:
            settings = argparse.Namespace(
                delay=args.delay,
                max_turns=max(args.sessions, 32),
                chunks=args.chunks,
                database_url=database_url,
                redis_url=redis.url,
            )
            env = ws_load.agentsite_env(settings, workdir / "data")
            env.update(AGENTSITE_USER_MAX_CONCURRENT_TURNS="0", AGENTSITE_USER_MAX_SESSIONS="0")
            if args.lease:
                env["AGENTSITE_SESSION_LEASE_SECONDS"] = str(args.lease)
            ws_load.manage(env, "migrate", "--noinput")
            user = "soak"
            key = ws_load.manage(env, "create_api_key", "--user", user, "--create-user").strip()
            session_ids = create_sessions_in_db(env, user, args.sessions)
            servers = Servers(env, workdir)
            servers.start(0)
            servers.start(1)
            print(
                f"servers A :{servers.ports[0]} and B :{servers.ports[1]}, Redis :{redis.port}, "
                f"{args.sessions} sessions, setup {time.monotonic() - started:.0f} s",
                flush=True,
            )
            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            status = asyncio.run(chat(args, servers, redis, key, session_ids))
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
            used = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
            print(
                f"\nclients' CPU {used:.0f} s; total {time.monotonic() - started:.0f} s; "
                f"load average at end {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            servers.stop()
            return status
    finally:
        if servers is not None:
            servers.stop()
        redis.kill()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
