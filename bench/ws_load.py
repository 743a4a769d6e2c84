"""WebSocket load benchmark: agentsite (`manage.py serve`) against a raw `websockets` server, same run.

    .venv/bin/python bench/ws_load.py [--sessions 1,50,200] [--messages 10] [--idle 1000] [--clients 1]

For each N in --sessions it opens N sockets (one session each) and every socket sends --messages
messages one after another (the next when the previous one's `result` arrived). The demo model streams
K = --chunks deltas per reply (bench/serve_demo.py fixes the demo's reply at K words). The same load then
runs against bench/raw_server.py, which streams the identical frames. It reports delivered frames/s,
agentsite's throughput as a ratio of the raw server's, p50/p99 time to first delta and to `result`,
errors (missing result, error frame, disconnect, wrong delta count), server CPU per frame, client CPU,
and server RSS (VmRSS) during load and with --idle idle sockets. Every phase has a deadline (--timeout).

Loopback only. The load clients are separate processes (--clients, default 1; `--worker` is internal).
See bench/README.md for the method and the figures measured on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
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
ROOT = HERE.parent
PYTHON = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")

# ----------------------------------------------------------------------------------------- worker side


@dataclass
class WorkerStats:
    """What one client process saw; merged by the parent."""

    frames: int = 0
    deltas: int = 0
    results: int = 0
    ttfd: list[float] = field(default_factory=list)
    ttr: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    first_send: float = 0.0
    last_recv: float = 0.0
    cpu: float = 0.0
    connected: int = 0


async def _open(url: str, stats: WorkerStats, gate: asyncio.Semaphore) -> Any:
    """Connect and read the `connected` frame; None (and an error) when that fails."""
    from websockets.asyncio.client import connect

    async with gate:
        try:
            ws = await connect(
                url, compression=None, max_size=None, ping_interval=None, open_timeout=60, max_queue=None
            )
            first = json.loads(await asyncio.wait_for(ws.recv(), 60))
        except Exception as exc:  # any failure to connect is a reported error, not a crash
            stats.errors.append(f"connect: {type(exc).__name__}: {exc}")
            return None
    if first.get("type") != "connected":
        stats.errors.append(f"connect: first frame {first.get('type')}: {first.get('data')}")
        await ws.close()
        return None
    stats.connected += 1
    return ws


async def _converse(ws: Any, tag: str, spec: dict[str, Any], stats: WorkerStats, deadline: float) -> None:
    """Send `messages` messages in turn; time the first delta and the result of each."""
    chunks = spec["chunks"]
    for index in range(spec["messages"]):
        message_id = f"{tag}-{index}"
        sent = time.monotonic()
        if not stats.first_send or sent < stats.first_send:
            stats.first_send = sent
        try:
            await ws.send(
                json.dumps({"type": "message", "content": f"bench {index}", "message_id": message_id})
            )
            deltas = 0
            while True:
                raw = await asyncio.wait_for(ws.recv(), max(deadline - time.monotonic(), 0.001))
                now = time.monotonic()
                stats.frames += 1
                stats.last_recv = now
                if raw.startswith('{"type":"delta"'):
                    deltas += 1
                    stats.deltas += 1
                    if deltas == 1:
                        stats.ttfd.append(now - sent)
                    continue
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "error":
                    stats.errors.append(f"{message_id}: error frame {frame.get('data')}")
                elif kind == "result":
                    stats.results += 1
                    stats.ttr.append(now - sent)
                    status = (frame.get("data") or {}).get("status")
                    if status != "completed":
                        stats.errors.append(f"{message_id}: result {status}: {frame.get('data')}")
                    if deltas != chunks:
                        stats.errors.append(f"{message_id}: {deltas} deltas, expected {chunks}")
                    break
        except TimeoutError:
            stats.errors.append(f"{message_id}: no result before the phase deadline")
            return
        except Exception as exc:  # a dropped socket is a reported error
            stats.errors.append(f"{message_id}: {type(exc).__name__}: {exc}")
            return


async def _worker(spec: dict[str, Any]) -> WorkerStats:
    """Connect every socket, say ready, wait for go, run (or, idle, wait for stop), report."""
    stats = WorkerStats()
    gate = asyncio.Semaphore(64)
    sockets = await asyncio.gather(*(_open(url, stats, gate) for url in spec["urls"]))
    print(f"ready {stats.connected}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)  # "go" (load) or "stop" (idle)
    if not spec["idle"]:
        deadline = time.monotonic() + spec["timeout"]
        cpu0 = time.process_time()
        await asyncio.gather(
            *(
                _converse(ws, f"{spec['tag']}{i}", spec, stats, deadline)
                for i, ws in enumerate(sockets)
                if ws is not None
            )
        )
        stats.cpu = time.process_time() - cpu0
    await asyncio.gather(*(ws.close() for ws in sockets if ws is not None), return_exceptions=True)
    return stats


def worker_main() -> None:
    spec = json.loads(sys.stdin.readline())
    stats = asyncio.run(_worker(spec))
    print("result " + json.dumps(stats.__dict__), flush=True)


# ----------------------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int) -> float:
    """VmRSS of a process in MB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    ws_path: str  # format string with {sid}
    key: str = ""
    base_rss: float = 0.0

    def url(self, session_id: str) -> str:
        return f"ws://127.0.0.1:{self.port}" + self.ws_path.format(sid=session_id, key=self.key)


def _wait_port(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not listen within 60 s:\n{log.read_text(errors='replace')}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


@contextmanager
def raw_server(args: argparse.Namespace, workdir: Path) -> Iterator[Server]:
    port = free_port()
    log = workdir / "raw.log"
    command = [PYTHON, str(HERE / "raw_server.py"), "--port", str(port), "--chunks", str(args.chunks)]
    command += ["--delay", str(args.delay)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=HERE, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_port(process, port, log)
        server = Server("raw", process, port, "/ws/{sid}")
        time.sleep(0.3)
        server.base_rss = rss_mb(process.pid)
        yield server
    finally:
        _stop(process)


def agentsite_env(args: argparse.Namespace, data_dir: Path) -> dict[str, str]:
    """A production-like environment (DEBUG off) with its own data dir; services only when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "OPENAI_", "AGENTSITE_"))}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    env.update(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="false",
        LOG_LEVEL="WARNING",
        AGENTSITE_DATA_DIR=str(data_dir),
        AGENTSITE_DEMO_DELAY=str(args.delay),
        AGENTSITE_MAX_CONCURRENT_TURNS=str(args.max_turns),
        # One bench user drives every session: no per-user share, session cap or budget.
        AGENTSITE_USER_MAX_CONCURRENT_TURNS="0",
        AGENTSITE_USER_MAX_SESSIONS="0",
        AGENTSITE_USER_DAILY_TOKENS="0",
        BENCH_DEMO_CHUNKS=str(args.chunks),
        # One bench user creates hundreds of sessions at once: the load, not the per-user rate, is measured.
        AGENTSITE_RATE_USER="off",
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


def manage(env: dict[str, str], *command: str) -> str:
    done = subprocess.run(
        [PYTHON, "manage.py", *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@contextmanager
def agentsite_server(args: argparse.Namespace, workdir: Path, name: str) -> Iterator[Server]:
    data_dir = workdir / name
    env = agentsite_env(args, data_dir)
    manage(env, "migrate", "--noinput")
    key = manage(env, "create_api_key", "--user", f"bench-{secrets.token_hex(3)}", "--create-user").strip()
    port = free_port()
    log = data_dir / "serve.log"
    command = [PYTHON, str(HERE / "serve_demo.py"), "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_port(process, port, log)
        server = Server(name, process, port, "/api/v1/chat/ws/{sid}?api_key={key}", key=key)
        asyncio.run(create_sessions(server, 1))  # warm up: URL resolution, DB connection, imports
        server.base_rss = rss_mb(process.pid)
        yield server
    finally:
        _stop(process)
        lines = log.read_text(errors="replace").splitlines()
        errors = [line for line in lines if "Traceback" in line or "ERROR" in line]
        if errors:
            print(f"  ! {name} server log has {len(errors)} error line(s), e.g.:", flush=True)
            first = lines.index(errors[0])
            print("\n".join(f"      {line}" for line in lines[first : first + 12]), flush=True)


async def create_sessions(server: Server, count: int) -> list[str]:
    """POST /api/v1/chat/sessions `count` times (20 at a time); the raw server needs no sessions."""
    if server.name == "raw":
        return [f"raw-{secrets.token_hex(6)}" for _ in range(count)]
    import httpx

    gate = asyncio.Semaphore(20)
    headers = {"Authorization": f"Bearer {server.key}"}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{server.port}", headers=headers, timeout=60
    ) as client:

        async def one() -> str:
            async with gate:
                response = await client.post("/api/v1/chat/sessions", json={})
                response.raise_for_status()
                return str(response.json()["session_id"])

        return list(await asyncio.gather(*(one() for _ in range(count))))


# ----------------------------------------------------------------------------------------- phases


@dataclass
class PhaseResult:
    server: str
    sessions: int
    messages: int
    frames: int
    deltas: int
    results: int
    expected: int
    seconds: float
    ttfd: list[float]
    ttr: list[float]
    errors: list[str]
    server_cpu: float
    client_cpu: list[float]
    rss_peak: float
    rss_after: float

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0


def pct(values: list[float], q: float) -> float:
    """The q-quantile in ms (nearest rank); nan when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))
    return ordered[index] * 1000


async def _spawn_workers(
    urls: list[str], args: argparse.Namespace, idle: bool, tag: str, messages: int = 0
) -> list[Any]:
    count = max(1, min(args.clients, len(urls)))
    workers = []
    for index in range(count):
        process = await asyncio.create_subprocess_exec(
            PYTHON, __file__, "--worker", stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=2**26
        )
        spec = {
            "urls": urls[index::count],
            "messages": messages,
            "chunks": args.chunks,
            "timeout": args.timeout,
            "idle": idle,
            "tag": f"{tag}w{index}s",
        }
        assert process.stdin is not None
        process.stdin.write((json.dumps(spec) + "\n").encode())
        await process.stdin.drain()
        workers.append(process)
    return workers


async def _read_ready(workers: list[Any], seconds: float) -> int:
    connected = 0
    for process in workers:
        line = (await asyncio.wait_for(process.stdout.readline(), seconds)).decode()
        if not line.startswith("ready"):
            raise RuntimeError(f"load client failed to start: {line!r}")
        connected += int(line.split()[1])
    return connected


async def _tell(workers: list[Any], word: str) -> None:
    for process in workers:
        process.stdin.write(f"{word}\n".encode())
        await process.stdin.drain()


async def _collect(workers: list[Any]) -> list[WorkerStats]:
    stats = []
    for process in workers:
        line = (await process.stdout.readline()).decode()
        await process.wait()
        if not line.startswith("result "):
            raise RuntimeError(f"load client died: {line!r}")
        stats.append(WorkerStats(**json.loads(line[len("result ") :])))
    return stats


async def _sample_rss(pid: int, done: asyncio.Event) -> float:
    peak = 0.0
    while not done.is_set():
        peak = max(peak, rss_mb(pid))
        try:
            await asyncio.wait_for(done.wait(), 0.2)
        except TimeoutError:
            pass
    return max(peak, rss_mb(pid))


def _start_profiler(
    server: Server, sessions: int, args: argparse.Namespace
) -> subprocess.Popen[bytes] | None:
    """py-spy (collapsed stacks) on the agentsite server for this phase, with --profile DIR."""
    if not args.profile or server.name == "raw":
        return None
    spy = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    out = Path(args.profile) / f"{server.name}-{sessions}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = os.environ.get("BENCH_PYSPY_FLAGS", "--gil").split()  # --idle to see where threads wait
    command = [spy, "record", "--pid", str(server.process.pid), "--format", "raw", "--rate", "200", *flags]
    command += ["--nonblocking", "-o", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # let it attach
    return process


def _stop_profiler(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


async def load_phase(server: Server, sessions: int, args: argparse.Namespace) -> PhaseResult:
    """N sockets, M sequential messages; returns what the clients saw and what the server cost."""
    session_ids = await create_sessions(server, sessions)
    urls = [server.url(session_id) for session_id in session_ids]
    messages = args.message_counts[sessions]
    workers = await _spawn_workers(urls, args, idle=False, tag=f"{server.name}{sessions}", messages=messages)
    await _read_ready(workers, args.timeout)
    pid = server.process.pid
    cpu0 = cpu_seconds(pid)
    done = asyncio.Event()
    sampler = asyncio.create_task(_sample_rss(pid, done))
    profiler = _start_profiler(server, sessions, args)
    await _tell(workers, "go")
    stats = await _collect(workers)
    done.set()
    _stop_profiler(profiler)
    rss_peak = await sampler
    server_cpu = cpu_seconds(pid) - cpu0
    first = min((s.first_send for s in stats if s.first_send), default=0.0)
    last = max((s.last_recv for s in stats), default=0.0)
    return PhaseResult(
        server=server.name,
        sessions=sessions,
        messages=messages,
        frames=sum(s.frames for s in stats),
        deltas=sum(s.deltas for s in stats),
        results=sum(s.results for s in stats),
        expected=sessions * messages,
        seconds=max(last - first, 0.0),
        ttfd=[v for s in stats for v in s.ttfd],
        ttr=[v for s in stats for v in s.ttr],
        errors=[e for s in stats for e in s.errors],
        server_cpu=server_cpu,
        client_cpu=[s.cpu for s in stats],
        rss_peak=rss_peak,
        rss_after=rss_mb(pid),
    )


async def idle_phase(server: Server, count: int, args: argparse.Namespace) -> dict[str, Any]:
    """Open `count` sockets, one per session, that send nothing; RSS once they are all connected."""
    pid = server.process.pid
    before = rss_mb(pid)
    session_ids = await create_sessions(server, count)
    urls = [server.url(session_id) for session_id in session_ids]
    with_sessions = rss_mb(pid)
    workers = await _spawn_workers(urls, args, idle=True, tag="idle")
    connected = await _read_ready(workers, args.timeout)
    await asyncio.sleep(2)
    idle = rss_mb(pid)
    await _tell(workers, "stop")
    stats = await _collect(workers)
    return {
        "before": before,
        "sessions_created": with_sessions,
        "idle": idle,
        "connected": connected,
        "errors": sum(len(s.errors) for s in stats),
        "error_examples": [e for s in stats for e in s.errors][:3],
    }


# ----------------------------------------------------------------------------------------- report


def describe(result: PhaseResult) -> str:
    per_frame = result.server_cpu / result.frames * 1e6 if result.frames else float("nan")
    busy = result.server_cpu / result.seconds * 100 if result.seconds else float("nan")
    client = (
        ", ".join(f"{c / result.seconds * 100:.0f}%" for c in result.client_cpu) if result.seconds else "-"
    )
    return (
        f"  {result.server:9} N={result.sessions:<4} {result.fps:>9,.0f} frames/s  "
        f"first delta p50 {pct(result.ttfd, 0.5):7.1f} ms p99 {pct(result.ttfd, 0.99):7.1f} ms  "
        f"result p50 {pct(result.ttr, 0.5):7.1f} ms p99 {pct(result.ttr, 0.99):7.1f} ms  "
        f"errors {len(result.errors)}  results {result.results}/{result.expected}  "
        f"server CPU {busy:.0f}% ({per_frame:.1f} µs/frame)  client CPU {client}  "
        f"RSS peak {result.rss_peak:.1f} MB"
    )


def report(results: list[PhaseResult], idle: dict[str, dict[str, Any]], args: argparse.Namespace) -> bool:
    """Print the summary table and the verdict on issue 3's targets; True when all are met."""
    raw = {r.sessions: r for r in results if r.server == "raw"}
    ours = {r.sessions: r for r in results if r.server == "agentsite"}
    print("\n## Summary")
    print(
        f"K={args.chunks} deltas/reply, M={args.messages} messages/session, demo delay {args.delay}s, "
        f"{args.clients} client process(es), {os.cpu_count()} cores"
    )
    print(
        "| N | raw frames/s | agentsite frames/s | ratio | p50/p99 first delta (ms) | p50/p99 result (ms) "
        "| errors | server µs/frame | RSS peak (MB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n, mine in sorted(ours.items()):
        base = raw.get(n)
        ratio = mine.fps / base.fps if base and base.fps else float("nan")
        per_frame = mine.server_cpu / mine.frames * 1e6 if mine.frames else float("nan")
        print(
            f"| {n} | {base.fps if base else float('nan'):,.0f} | {mine.fps:,.0f} | {ratio:.2f} | "
            f"{pct(mine.ttfd, 0.5):.1f} / {pct(mine.ttfd, 0.99):.1f} | {pct(mine.ttr, 0.5):.1f} / "
            f"{pct(mine.ttr, 0.99):.1f} | {len(mine.errors)} | {per_frame:.1f} | {mine.rss_peak:.1f} |"
        )
    for name, figures in idle.items():
        print(
            f"idle {name}: {figures['connected']:.0f} sockets connected ({figures['errors']:.0f} errors): "
            f"RSS {figures['before']:.1f} MB before, {figures['sessions_created']:.1f} MB after creating the "
            f"sessions, {figures['idle']:.1f} MB with the sockets open"
        )
        for example in figures["error_examples"]:
            print(f"      {example}")
    verdicts = []
    if 200 in ours and 200 in raw:
        ratio = ours[200].fps / raw[200].fps if raw[200].fps else 0.0
        verdicts.append(
            (
                "200 sessions: ratio >= 0.30 and zero errors",
                ratio >= 0.30 and not ours[200].errors,
                f"{ratio:.2f}, {len(ours[200].errors)} errors",
            )
        )
    if 50 in ours:
        p99 = pct(ours[50].ttfd, 0.99)
        verdicts.append(("50 sessions: p99 first delta <= 100 ms", p99 <= 100, f"{p99:.1f} ms"))
    if "agentsite" in idle:
        figures = idle["agentsite"]
        ok = figures["idle"] < 150 and figures["connected"] >= args.idle and not figures["errors"]
        verdicts.append((f"{args.idle} idle sockets: RSS < 150 MB", ok, f"{figures['idle']:.1f} MB"))
    print("\n## Targets (issue 3)")
    for label, ok, figure in verdicts:
        print(f"- {'MET   ' if ok else 'MISSED'} {label}: {figure}")
    return all(ok for _, ok, _ in verdicts)


def show_errors(result: PhaseResult) -> None:
    for error in result.errors[:5]:
        print(f"      {error}")
    if len(result.errors) > 5:
        print(f"      ... and {len(result.errors) - 5} more")


async def run_load(server: Server, args: argparse.Namespace, results: list[PhaseResult]) -> None:
    for sessions in args.sessions:
        result = await load_phase(server, sessions, args)
        results.append(result)
        print(describe(result), flush=True)
        show_errors(result)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", default="1,50,200", help="session counts (default 1,50,200)")
    parser.add_argument(
        "--messages",
        default="100,20,10",
        help="messages per session, sent in turn: one count, or one per --sessions entry (default 100,20,10)",
    )
    parser.add_argument("--chunks", type=int, default=50, help="deltas per reply, K (default 50)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between deltas (both servers)")
    parser.add_argument("--idle", type=int, default=1000, help="idle sockets for the RSS figure (0 skips it)")
    parser.add_argument("--clients", type=int, default=2, help="load client processes (default 2)")
    parser.add_argument("--timeout", type=float, default=90.0, help="deadline of each phase in seconds")
    parser.add_argument(
        "--max-turns", type=int, default=0, help="AGENTSITE_MAX_CONCURRENT_TURNS (default max N)"
    )
    parser.add_argument("--database-url", default="", help="DATABASE_URL for agentsite (default: SQLite)")
    parser.add_argument("--redis-url", default="", help="REDIS_URL for agentsite (default: in-memory layer)")
    parser.add_argument("--profile", default="", help="write py-spy collapsed stacks of agentsite here")
    parser.add_argument("--skip-raw", action="store_true", help="do not run the raw server phases")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main()
        return 0
    args.sessions = [int(n) for n in args.sessions.split(",") if n.strip()]
    counts = [int(m) for m in args.messages.split(",") if m.strip()]
    if len(counts) not in (1, len(args.sessions)):
        parser.error("--messages takes one count, or one per --sessions entry")
    if len(counts) == 1:
        counts = counts * len(args.sessions)
    args.message_counts = dict(zip(args.sessions, counts, strict=True))
    args.max_turns = args.max_turns or max([*args.sessions, 1])
    started = time.monotonic()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (other work here skews every figure)")
    workdir = Path(tempfile.mkdtemp(prefix="agentsite-bench-"))
    results: list[PhaseResult] = []
    idle: dict[str, dict[str, Any]] = {}
    try:
        if not args.skip_raw:
            print("# raw websockets server", flush=True)
            with raw_server(args, workdir) as server:
                asyncio.run(run_load(server, args, results))
            if args.idle:
                with raw_server(args, workdir) as server:
                    idle["raw"] = asyncio.run(idle_phase(server, args.idle, args))
        print("# agentsite (manage.py serve, daphne)", flush=True)
        with agentsite_server(args, workdir, "agentsite") as server:
            print(f"  base RSS {server.base_rss:.1f} MB", flush=True)
            asyncio.run(run_load(server, args, results))
            after = rss_mb(server.process.pid)
            print(f"  RSS after the load phases (sockets closed) {after:.1f} MB", flush=True)
        if args.idle:
            with agentsite_server(args, workdir, "agentsite-idle") as server:
                idle["agentsite"] = asyncio.run(idle_phase(server, args.idle, args))
        met = report(results, idle, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(f"\ntotal {elapsed:.0f} s, load average at end {os.getloadavg()[0]:.2f}", flush=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
