"""Provider-path benchmark (issue 18): replies from an OpenAI-compatible model over HTTP, through the real
model client, the turn loop and the socket — agentsite against a minimal proxy of the same model, one run.

    .venv/bin/python bench/provider_load.py [--quick] [--sessions 1,50,200] [--variants new,create,reuse]
                                            [--seconds 10] [--runs 1] [--chunks 50] [--clients 2]
                                            [--close] [--profile DIR] [--no-pin] [--skip-floor]

Three processes besides the load clients:
- bench/fake_model.py, an OpenAI-compatible streaming server (aiohttp, keep-alive; `--close` closes every
  connection after its answer): K = --chunks content chunks per reply, as fast as it can;
- the floor, bench/floor_proxy.py: client → minimal aiohttp proxy → model, same frames as agentsite;
- agentsite as in production (`manage.py serve`: daphne, DEBUG off, SECRET_KEY set, SQLite), its provider
  the fake model (OPENAI_BASE_URL), `AGENTSITE_USER_MAX_CONCURRENT_TURNS=0` and the REST throttles opened
  wide (one bench user runs every chat), `AGENTSITE_MAX_CONCURRENT_TURNS` = the largest N.
The server under test is pinned to core 0 (`taskset -c 0`); the clients and the fake model to core 1.

Three workloads, each with N closed-loop clients for --seconds:
- `new`: every chat is new: `POST /api/v1/chat/sessions`, open its socket, wait for `connected`, send one
  message, read the reply to its `result`, close;
- `create`: the same in one round trip: open a socket on a new id with `?create=1`, wait for `connected`,
  send one message, read the reply, close (docs/protocol.md §3.1 extension; the floor ignores `create`);
- `reuse`: one session and socket per client (opened before the clock starts), message after message.
Figures: chunks/s (delta frames received ÷ time from the first send to the last frame), first chunk p50/p99
(from a message's send to its first delta), chat setup p50/p99 (POST + socket + `connected`; for `reuse`
the one-off setup of each client), server CPU per chunk (utime+stime of the server process ÷ deltas), the
server's peak RSS, errors (an error frame, a `result` that is not `completed`, a delta count other than K,
an HTTP error, a dropped socket, nothing by the deadline). `--runs R` repeats everything and prints the
median of each figure. The exit status is 0 only when issue 18's targets are met. bench/README.md has the
method, the figures and the profiles.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ws_load import PYTHON, ROOT, _stop, _wait_port, cpu_seconds, free_port, manage, pct, rss_mb  # noqa: E402

MODEL = "bench-model"
SERVER_CORE = "0"
LOAD_CORE = "1"

# ----------------------------------------------------------------------------------------- load clients


@dataclass
class ClientStats:
    """What one client process saw; merged by the parent."""

    deltas: int = 0
    chats: int = 0
    first_chunk: list[float] = field(default_factory=list)
    setup: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    first_send: float = 0.0
    last_recv: float = 0.0
    cpu: float = 0.0


class Chat:
    """One client's connection to the server under test (HTTP for sessions, one socket at a time)."""

    def __init__(self, http: Any, spec: dict[str, Any], stats: ClientStats) -> None:
        self.http = http
        self.spec = spec
        self.stats = stats
        self.ws: Any = None

    async def open(self) -> bool:
        """POST a session, open its socket, read `connected`; the time it took is a chat setup. `create`:
        no POST, the socket creates its session (`?create=1`, docs/protocol.md §3.1 extension)."""
        spec, stats = self.spec, self.stats
        started = time.monotonic()
        try:
            if spec["variant"] == "create":
                url = spec["ws"] + f"/api/v1/chat/ws/{uuid.uuid4()}?api_key={spec['key']}&create=1"
                self.ws = await self.http.ws_connect(url, autoping=True, compress=0, max_msg_size=0)
                first = json.loads((await self.ws.receive(timeout=60)).data)
                return self._opened(first, started)
            async with self.http.post(
                spec["base"] + "/api/v1/chat/sessions",
                json={},
                headers={"Authorization": f"Bearer {spec['key']}"},
            ) as response:
                if response.status != 200:
                    stats.errors.append(
                        f"POST session: HTTP {response.status}: {(await response.text())[:200]}"
                    )
                    return False
                session_id = (await response.json())["session_id"]
            url = spec["ws"] + f"/api/v1/chat/ws/{session_id}?api_key={spec['key']}"
            # autoping: daphne pings a socket every 20 s; aiohttp answers and never hands the ping over
            self.ws = await self.http.ws_connect(url, autoping=True, compress=0, max_msg_size=0)
            first = json.loads((await self.ws.receive(timeout=60)).data)
        except Exception as exc:  # a failure to open is a reported error, not a crash
            stats.errors.append(f"open: {type(exc).__name__}: {exc}")
            return False
        return self._opened(first, started)

    def _opened(self, first: dict[str, Any], started: float) -> bool:
        if first.get("type") != "connected":
            self.stats.errors.append(f"open: first frame {first.get('type')}: {first.get('data')}")
            return False
        self.stats.setup.append(time.monotonic() - started)
        return True

    async def ask(self, message_id: str, deadline: float) -> bool:
        """One message; its reply read to `result`. False when the socket cannot go on."""
        import aiohttp

        stats = self.stats
        sent = time.monotonic()
        if not stats.first_send or sent < stats.first_send:
            stats.first_send = sent
        deltas = 0
        try:
            await self.ws.send_str(
                json.dumps({"type": "message", "content": "bench", "message_id": message_id})
            )
            while True:
                frame = await self.ws.receive(timeout=max(deadline - time.monotonic(), 0.001))
                if frame.type != aiohttp.WSMsgType.TEXT:
                    stats.errors.append(f"{message_id}: socket {frame.type.name} {frame.data} {frame.extra}")
                    return False
                now = time.monotonic()
                stats.last_recv = now
                raw = frame.data
                if raw.startswith('{"type":"delta"'):
                    deltas += 1
                    if deltas == 1:
                        stats.first_chunk.append(now - sent)
                    continue
                event = json.loads(raw)
                kind = event.get("type")
                if kind == "error":
                    stats.errors.append(f"{message_id}: error frame {event.get('data')}")
                elif kind == "result":
                    stats.deltas += deltas
                    stats.chats += 1
                    status = (event.get("data") or {}).get("status")
                    if status != "completed":
                        stats.errors.append(f"{message_id}: result {status}: {event.get('data')}")
                    elif deltas != self.spec["chunks"]:
                        stats.errors.append(f"{message_id}: {deltas} deltas, expected {self.spec['chunks']}")
                    return True
        except TimeoutError:
            stats.errors.append(f"{message_id}: no result before the deadline")
            return False
        except Exception as exc:  # a dropped socket is a reported error
            stats.errors.append(f"{message_id}: {type(exc).__name__}: {exc}")
            return False

    async def close(self) -> None:
        if self.ws is not None:
            ws, self.ws = self.ws, None
            await ws.close()


async def _client_loop(
    index: int, http: Any, spec: dict[str, Any], stats: ClientStats, go: asyncio.Event
) -> None:
    tag = f"{spec['tag']}c{index}"
    chat = Chat(http, spec, stats)
    if spec["variant"] == "reuse" and not await chat.open():
        return
    await go.wait()
    end = spec["go_at"] + spec["seconds"]
    deadline = end + spec["timeout"]
    count = 0
    try:
        while time.monotonic() < end:
            if spec["variant"] != "reuse":
                if not await chat.open():
                    await asyncio.sleep(0.05)
                    continue
            count += 1
            ok = await chat.ask(f"{tag}m{count}", deadline)
            if spec["variant"] != "reuse" or not ok:
                await chat.close()
                if not ok and spec["variant"] == "reuse":
                    return
    finally:
        await chat.close()


async def _client(spec: dict[str, Any]) -> ClientStats:
    import aiohttp

    stats = ClientStats()
    go = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as http:
        tasks = [
            asyncio.create_task(_client_loop(index, http, spec, stats, go))
            for index in range(spec["clients"])
        ]
        if spec["variant"] == "reuse":
            while len(stats.setup) + len(stats.errors) < spec["clients"]:
                await asyncio.sleep(0.01)
        print("ready", flush=True)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        spec["go_at"] = float(line.split()[1])
        cpu0 = time.process_time()
        go.set()
        await asyncio.gather(*tasks)
        stats.cpu = time.process_time() - cpu0
    return stats


def client_main() -> None:
    spec = json.loads(sys.stdin.readline())
    stats = asyncio.run(_client(spec))
    print("result " + json.dumps(stats.__dict__), flush=True)


# ----------------------------------------------------------------------------------------- processes


def pinned(core: str, command: list[str], args: argparse.Namespace) -> list[str]:
    if args.no_pin or not shutil.which("taskset"):
        return command
    return ["taskset", "-c", core, *command]


@dataclass
class Target:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    key: str = ""
    base_rss: float = 0.0


def _start(
    command: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


@contextmanager
def fake_model(args: argparse.Namespace, workdir: Path) -> Iterator[int]:
    port = free_port()
    log = workdir / "model.log"
    command = [PYTHON, str(HERE / "fake_model.py"), "--port", str(port), "--chunks", str(args.chunks)]
    command += ["--delay", str(args.model_delay), *(["--close"] if args.close else [])]
    process = _start(pinned(LOAD_CORE, command, args), log)
    try:
        _wait_port(process, port, log)
        yield port
    finally:
        _stop(process)


@contextmanager
def floor_server(args: argparse.Namespace, workdir: Path, model_port: int) -> Iterator[Target]:
    port = free_port()
    log = workdir / "floor.log"
    command = [PYTHON, str(HERE / "floor_proxy.py"), "--port", str(port)]
    command += ["--model-url", f"http://127.0.0.1:{model_port}/v1", "--model", MODEL]
    process = _start(pinned(SERVER_CORE, command, args), log)
    try:
        _wait_port(process, port, log)
        target = Target("floor", process, port, key="none")
        asyncio.run(warm_up(target, args))
        target.base_rss = rss_mb(process.pid)
        yield target
    finally:
        _stop(process)


def agentsite_env(args: argparse.Namespace, data_dir: Path, model_port: int) -> dict[str, str]:
    """Production settings (DEBUG off, a SECRET_KEY) with the fake model as the provider."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "OPENAI_", "AGENTSITE_"))}
    for name in ("DATABASE_URL", "REDIS_URL"):
        env.pop(name, None)
    env.update(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="false",
        LOG_LEVEL="WARNING",
        AGENTSITE_DATA_DIR=str(data_dir),
        OPENAI_BASE_URL=f"http://127.0.0.1:{model_port}/v1",
        OPENAI_API_KEY="sk-bench",
        AGENTSITE_DEFAULT_MODEL=MODEL,
        AGENTSITE_MAX_CONCURRENT_TURNS=str(max(args.sessions)),
        # One bench user runs every chat: its fair share, its open-chat cap and the REST throttles would
        # measure the limits, not the path (docs/protocol.md §6.2, §6.4).
        AGENTSITE_USER_MAX_CONCURRENT_TURNS="0",
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
    for item in args.server_env:
        name, _, value = item.partition("=")
        env[name] = value
    return env


@contextmanager
def agentsite_server(args: argparse.Namespace, workdir: Path, model_port: int) -> Iterator[Target]:
    data_dir = workdir / f"agentsite-{secrets.token_hex(3)}"
    env = agentsite_env(args, data_dir, model_port)
    manage(env, "migrate", "--noinput")
    key = manage(env, "create_api_key", "--user", "bench", "--create-user").strip()
    port = free_port()
    log = workdir / "agentsite.log"
    command = [PYTHON, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)]
    process = _start(pinned(SERVER_CORE, command, args), log, env=env)
    try:
        _wait_port(process, port, log)
        target = Target("agentsite", process, port, key=key)
        asyncio.run(warm_up(target, args))  # imports (the openai SDK), the provider's client, the URLconf
        target.base_rss = rss_mb(process.pid)
        yield target
    finally:
        _stop(process)
        lines = log.read_text(errors="replace").splitlines()
        errors = [line for line in lines if "Traceback" in line or "ERROR" in line]
        if errors:
            print(f"  ! agentsite server log has {len(errors)} error line(s), e.g.:", flush=True)
            first = lines.index(errors[0])
            print("\n".join(f"      {line}" for line in lines[first : first + 14]), flush=True)


async def warm_up(target: Target, args: argparse.Namespace) -> None:
    import aiohttp

    stats = ClientStats()
    spec = _spec(target, args, "new", 1, "warm")
    async with aiohttp.ClientSession() as http:
        for index in range(3):
            chat = Chat(http, spec, stats)
            if await chat.open():
                await chat.ask(f"warm{index}", time.monotonic() + 30)
            await chat.close()
    if stats.errors:
        raise RuntimeError(f"{target.name} failed its warm-up: {stats.errors[:3]}")


def _spec(target: Target, args: argparse.Namespace, variant: str, clients: int, tag: str) -> dict[str, Any]:
    return {
        "base": f"http://127.0.0.1:{target.port}",
        "ws": f"ws://127.0.0.1:{target.port}",
        "key": target.key,
        "variant": variant,
        "clients": clients,
        "seconds": args.seconds,
        "timeout": args.timeout,
        "chunks": args.chunks,
        "tag": tag,
        "go_at": 0.0,
    }


# ----------------------------------------------------------------------------------------- phases


@dataclass
class Phase:
    server: str
    variant: str
    sessions: int
    deltas: int
    chats: int
    seconds: float
    first_chunk: list[float]
    setup: list[float]
    errors: list[str]
    server_cpu: float
    client_cpu: list[float]
    rss_peak: float
    rss_at_go: float = 0.0  # every client connected (reuse: session and socket open), before the load

    @property
    def chunks_per_second(self) -> float:
        return self.deltas / self.seconds if self.seconds > 0 else 0.0

    @property
    def us_per_chunk(self) -> float:
        return self.server_cpu / self.deltas * 1e6 if self.deltas else float("nan")


async def _sample_rss(pid: int, done: asyncio.Event) -> float:
    peak = 0.0
    while not done.is_set():
        peak = max(peak, rss_mb(pid))
        try:
            await asyncio.wait_for(done.wait(), 0.2)
        except TimeoutError:
            pass
    return max(peak, rss_mb(pid))


def _profiler(
    target: Target, variant: str, sessions: int, args: argparse.Namespace
) -> subprocess.Popen[bytes] | None:
    if not args.profile or target.name != "agentsite":
        return None
    spy = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    out = Path(args.profile) / f"{target.name}-{variant}-{sessions}-run{args.run}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = os.environ.get("BENCH_PYSPY_FLAGS", "--gil").split()
    command = [spy, "record", "--pid", str(target.process.pid), "--format", "raw", "--rate", "250", *flags]
    command += ["--nonblocking", "-o", str(out)]
    process = subprocess.Popen(
        pinned(LOAD_CORE, command, args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    time.sleep(0.5)
    return process


async def run_phase(target: Target, variant: str, sessions: int, args: argparse.Namespace) -> Phase:
    count = max(1, min(args.clients, sessions))
    workers = []
    for index in range(count):
        share = sessions // count + (1 if index < sessions % count else 0)
        process = await asyncio.create_subprocess_exec(
            *pinned(LOAD_CORE, [PYTHON, __file__, "--client"], args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            limit=2**26,
        )
        spec = _spec(target, args, variant, share, f"{target.name[0]}{variant[0]}{sessions}w{index}")
        assert process.stdin is not None
        process.stdin.write((json.dumps(spec) + "\n").encode())
        await process.stdin.drain()
        workers.append(process)
    for process in workers:
        line = (await asyncio.wait_for(process.stdout.readline(), args.timeout)).decode()
        if not line.startswith("ready"):
            raise RuntimeError(f"load client failed to start: {line!r}")
    pid = target.process.pid
    profiler = _profiler(target, variant, sessions, args)
    done = asyncio.Event()
    sampler = asyncio.create_task(_sample_rss(pid, done))
    rss_at_go = rss_mb(pid)
    cpu0 = cpu_seconds(pid)
    go_at = time.monotonic() + 0.05
    for process in workers:
        process.stdin.write(f"go {go_at}\n".encode())
        await process.stdin.drain()
    stats = []
    for process in workers:
        line = (await process.stdout.readline()).decode()
        await process.wait()
        if not line.startswith("result "):
            raise RuntimeError(f"load client died: {line!r}")
        stats.append(ClientStats(**json.loads(line[len("result ") :])))
    server_cpu = cpu_seconds(pid) - cpu0
    done.set()
    rss_peak = await sampler
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(timeout=60)
    first = min((s.first_send for s in stats if s.first_send), default=0.0)
    last = max((s.last_recv for s in stats), default=0.0)
    return Phase(
        server=target.name,
        variant=variant,
        sessions=sessions,
        deltas=sum(s.deltas for s in stats),
        chats=sum(s.chats for s in stats),
        seconds=max(last - first, 0.0),
        first_chunk=[v for s in stats for v in s.first_chunk],
        setup=[v for s in stats for v in s.setup],
        errors=[e for s in stats for e in s.errors],
        server_cpu=server_cpu,
        client_cpu=[s.cpu for s in stats],
        rss_peak=rss_peak,
        rss_at_go=rss_at_go,
    )


def describe(phase: Phase) -> str:
    busy = phase.server_cpu / phase.seconds * 100 if phase.seconds else float("nan")
    clients = ", ".join(f"{c / phase.seconds * 100:.0f}%" for c in phase.client_cpu) if phase.seconds else "-"
    return (
        f"  {phase.server:9} {phase.variant:5} N={phase.sessions:<4} "
        f"{phase.chunks_per_second:>8,.0f} chunks/s  "
        f"first chunk p50 {pct(phase.first_chunk, 0.5):6.1f} p99 {pct(phase.first_chunk, 0.99):6.1f} ms  "
        f"setup p50 {pct(phase.setup, 0.5):6.1f} p99 {pct(phase.setup, 0.99):6.1f} ms  "
        f"{phase.us_per_chunk:6.1f} µs/chunk (server CPU {busy:.0f}%)  "
        f"RSS {phase.rss_at_go:.0f} MB at start, {phase.rss_peak:.0f} MB peak  "
        f"chats {phase.chats}  errors {len(phase.errors)}  clients {clients}"
    )


def run_target(target: Target, args: argparse.Namespace, phases: list[Phase]) -> None:
    print(f"# {target.name} (pid {target.process.pid}, base RSS {target.base_rss:.0f} MB)", flush=True)
    for variant in args.variants:
        for sessions in args.sessions:
            phase = asyncio.run(run_phase(target, variant, sessions, args))
            phases.append(phase)
            print(describe(phase), flush=True)
            for error in phase.errors[:5]:
                print(f"      {error}", flush=True)


# ----------------------------------------------------------------------------------------- report


@dataclass
class Row:
    server: str
    variant: str
    sessions: int
    chunks_per_second: float
    first_p50: float
    first_p99: float
    setup_p50: float
    setup_p99: float
    us_per_chunk: float
    rss: float
    errors: int
    runs: int


def medians(phases: list[Phase]) -> list[Row]:
    groups: dict[tuple[str, str, int], list[Phase]] = {}
    for phase in phases:
        groups.setdefault((phase.server, phase.variant, phase.sessions), []).append(phase)
    rows = []
    for (server, variant, sessions), runs in groups.items():

        def med(values: list[float]) -> float:
            values = [v for v in values if v == v]  # nan: nothing measured
            return statistics.median(values) if values else float("nan")

        rows.append(
            Row(
                server=server,
                variant=variant,
                sessions=sessions,
                chunks_per_second=med([p.chunks_per_second for p in runs]),
                first_p50=med([pct(p.first_chunk, 0.5) for p in runs]),
                first_p99=med([pct(p.first_chunk, 0.99) for p in runs]),
                setup_p50=med([pct(p.setup, 0.5) for p in runs]),
                setup_p99=med([pct(p.setup, 0.99) for p in runs]),
                us_per_chunk=med([p.us_per_chunk for p in runs]),
                rss=med([p.rss_peak for p in runs]),
                errors=sum(len(p.errors) for p in runs),
                runs=len(runs),
            )
        )
    return rows


def report(phases: list[Phase], args: argparse.Namespace) -> bool:
    rows = medians(phases)
    print("\n## Summary" + (f" (median of {args.runs} runs)" if args.runs > 1 else ""))
    print(
        f"K={args.chunks} chunks/reply, {args.seconds:g} s per phase, {args.clients} client process(es), "
        f"model {'closes connections' if args.close else 'keep-alive'}, {os.cpu_count()} cores, "
        f"{'server on core 0, clients and model on core 1' if not args.no_pin else 'not pinned'}"
    )
    print(
        "| server | chats | N | chunks/s | first chunk p50 / p99 ms | chat setup p50 / p99 ms "
        "| server µs/chunk | RSS MB | errors |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.server} | {row.variant} | {row.sessions} | {row.chunks_per_second:,.0f} | "
            f"{row.first_p50:.1f} / {row.first_p99:.1f} | {row.setup_p50:.1f} / {row.setup_p99:.1f} | "
            f"{row.us_per_chunk:.1f} | {row.rss:.0f} | {row.errors} |"
        )
    ours = {(r.variant, r.sessions): r for r in rows if r.server == "agentsite"}
    verdicts: list[tuple[str, bool, str]] = []

    def target(label: str, key: tuple[str, int], ok: Any, shown: Any) -> None:
        row = ours.get(key)
        if row is not None:
            verdicts.append((label, bool(ok(row)), shown(row)))

    target(
        "N=50, one session per client: <= 40 µs/chunk",
        ("reuse", 50),
        lambda r: r.us_per_chunk <= 40,
        lambda r: f"{r.us_per_chunk:.1f} µs ({r.chunks_per_second:,.0f} chunks/s)",
    )
    for variant, how in (("new", "POST + socket"), ("create", "one round trip, ?create=1")):
        target(
            f"N=50, a new session per chat ({how}): <= 80 µs/chunk",
            (variant, 50),
            lambda r: r.us_per_chunk <= 80,
            lambda r: f"{r.us_per_chunk:.1f} µs ({r.chunks_per_second:,.0f} chunks/s)",
        )
    for variant in args.variants:
        target(
            f"N=50, {variant}: first chunk p99 <= 150 ms",
            (variant, 50),
            lambda r: r.first_p99 <= 150,
            lambda r: f"{r.first_p99:.1f} ms",
        )
    for variant in ("new", "create"):
        target(
            f"N=50, {variant}: chat setup p99 <= 60 ms",
            (variant, 50),
            lambda r: r.setup_p99 <= 60,
            lambda r: f"{r.setup_p99:.1f} ms",
        )
        target(
            f"N=200, {variant}: chat setup p99 <= 250 ms",
            (variant, 200),
            lambda r: r.setup_p99 <= 250,
            lambda r: f"{r.setup_p99:.1f} ms",
        )
    peak = [r for r in rows if r.server == "agentsite" and r.sessions == 200]
    if peak:
        worst = max(r.rss for r in peak)
        verdicts.append(("N=200: RSS <= 200 MB", worst <= 200, f"{worst:.0f} MB"))
    errors = sum(r.errors for r in rows if r.server == "agentsite")
    verdicts.append(("0 errors", errors == 0, str(errors)))
    print("\n## Targets (issue 18)")
    for label, ok, shown in verdicts:
        print(f"- {'MET   ' if ok else 'MISSED'} {label}: {shown}")
    return all(ok for _, ok, _ in verdicts)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a short run: 3 s per phase, one run")
    parser.add_argument("--sessions", default="1,50,200", help="concurrent clients N (default 1,50,200)")
    parser.add_argument(
        "--variants",
        default="new,create,reuse",
        help="new (POST + socket per chat), create (one socket per chat, ?create=1), reuse (one per client)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase (default 10)")
    parser.add_argument("--runs", type=int, default=1, help="repeat everything; medians are reported")
    parser.add_argument("--chunks", type=int, default=50, help="content chunks per reply, K (default 50)")
    parser.add_argument("--clients", type=int, default=2, help="load client processes (default 2)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="grace after a phase for its last replies"
    )
    parser.add_argument("--close", action="store_true", help="the fake model closes each connection")
    parser.add_argument("--model-delay", type=float, default=0.0, help="seconds between the model's chunks")
    parser.add_argument("--profile", default="", help="write py-spy raw stacks of agentsite's phases here")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to cores (taskset)")
    parser.add_argument("--skip-floor", action="store_true", help="agentsite only")
    parser.add_argument("--skip-agentsite", action="store_true", help="the floor only")
    parser.add_argument("--server-env", action="append", default=[], help="NAME=VALUE for agentsite")
    parser.add_argument("--json", default="", help="also write every phase's figures to this file")
    parser.add_argument(
        "--report",
        nargs="+",
        default=[],
        help="no run: the summary (medians) of --json files of earlier runs",
    )
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main()
        return 0
    if args.report:
        phases = [Phase(**item) for path in args.report for item in json.loads(Path(path).read_text())]
        args.runs = len(args.report)
        args.variants = sorted({phase.variant for phase in phases})
        args.sessions = sorted({phase.sessions for phase in phases})
        return 0 if report(phases, args) else 1
    if args.quick:
        args.seconds = min(args.seconds, 3.0)
        args.runs = 1
    args.sessions = [int(n) for n in args.sessions.split(",") if n.strip()]
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if (os.cpu_count() or 1) < 2:
        args.no_pin = True
    started = time.monotonic()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (other work on this machine skews every figure)")
    workdir = Path(tempfile.mkdtemp(prefix="agentsite-provider-bench-"))
    workdir.chmod(0o711)  # the sandbox's user passes through to the workspaces, as in production
    phases: list[Phase] = []
    try:
        with fake_model(args, workdir) as model_port:
            for run in range(1, args.runs + 1):
                args.run = run
                if args.runs > 1:
                    print(
                        f"\n## run {run} of {args.runs} (load average {os.getloadavg()[0]:.2f})", flush=True
                    )
                if not args.skip_floor:
                    with floor_server(args, workdir, model_port) as target:
                        run_target(target, args, phases)
                if not args.skip_agentsite:
                    with agentsite_server(args, workdir, model_port) as target:
                        run_target(target, args, phases)
        met = report(phases, args)
        if args.json:
            Path(args.json).write_text(json.dumps([phase.__dict__ for phase in phases]))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\ntotal {time.monotonic() - started:.0f} s, load average at end {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
