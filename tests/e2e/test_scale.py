"""Several real server processes on Postgres + Redis (docs/architecture.md "Processes", issue 8).

Each test starts its own `manage.py serve` processes on one database and one Redis, so any socket may
land on any process. They run in the service-backed pass of `make test` (marker `scaled`), and fail
there, rather than skip, when Postgres or Redis is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest
import websockets

from agentsite.dev.fake_llm import Reply, remote_requests, script_remote
from tests.support.fake_llm_fixtures import FakeLLMProcess
from tests.support.server import RunningServer, ServerEnv, free_port, serve, server_env

pytestmark = pytest.mark.scaled

WITHIN = 20
# Session ids are unique per run: events of a session live on in Redis (the replay store) across runs.
_RUN = uuid.uuid4().hex[:8]
SID_SPREAD, SID_ORPHAN, SID_FENCED, SID_WORKERS = (
    f"{name}-{_RUN}" for name in ("spread", "orphan", "fenced", "workers")
)
LEASE = "1.5"


@pytest.fixture
def scaled(tmp_path, fake_llm_process: FakeLLMProcess) -> Iterator[tuple[ServerEnv, str, str]]:
    if not os.environ.get("DATABASE_URL", "").startswith(
        ("postgres://", "postgresql://")
    ) or not os.environ.get("REDIS_URL"):
        pytest.fail(
            "the scaled tests need DATABASE_URL=postgres://… and REDIS_URL (make test-services sets them)"
        )
    llm = fake_llm_process.base_url
    model_env = {"OPENAI_BASE_URL": llm, "OPENAI_API_KEY": "sk-fake", "AGENTSITE_DEFAULT_MODEL": "fake-model"}
    with server_env(tmp_path, AGENTSITE_SESSION_LEASE_SECONDS=LEASE, **model_env) as env:
        key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
        yield env, key, llm


@contextmanager
def two_servers(env: ServerEnv) -> Iterator[tuple[RunningServer, RunningServer]]:
    with ExitStack() as stack:
        a = stack.enter_context(serve(env, kill=True))
        b = stack.enter_context(serve(env, kill=True))
        yield a, b


def ws_url(server: RunningServer, session_id: str, key: str, since: int | None = None) -> str:
    url = f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}"
    return url if since is None else f"{url}&since={since}"


async def until(ws: Any, kind: str, status: str | None = None) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(WITHIN):
        while True:
            frame = json.loads(await ws.recv())
            seen.append(frame)
            got = frame.get("status") or frame.get("data", {}).get("status")
            if frame["type"] == kind and (status is None or got == status):
                return seen


async def create_session(server: RunningServer, key: str, session_id: str) -> None:
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        response = await http.post("/api/v1/chat/sessions", json={"session_id": session_id})
        assert response.status_code == 200, response.text


async def test_a_socket_on_any_process_sees_every_event_and_commands_reach_the_owner(scaled):
    env, key, llm = scaled
    script_remote(llm, default=Reply(text="one two three four five six seven eight", chunk_delay=0.01))
    with two_servers(env) as (a, b):
        await create_session(a, key, SID_SPREAD)
        async with websockets.connect(ws_url(a, SID_SPREAD, key)) as on_a:
            assert json.loads(await on_a.recv())["type"] == "connected"  # a takes the session
            async with websockets.connect(ws_url(b, SID_SPREAD, key)) as on_b:
                connected = json.loads(await on_b.recv())
                assert connected["type"] == "connected" and connected["snapshot"]["running"] is False
                # a command sent to b runs on a, the owner
                await on_b.send(json.dumps({"type": "message", "message_id": "m1", "content": "hello"}))
                seen_b = await until(on_b, "result")
                seen_a = await until(on_a, "result")
                assert [f["seq"] for f in seen_a] == [f["seq"] for f in seen_b]
                assert seen_a == seen_b
                deltas = [f["content"] for f in seen_b if f["type"] == "delta"]
                assert "".join(deltas).split() == "one two three four five six seven eight".split()
                assert seen_b[-1]["data"]["status"] == "completed"
                # an error caused by b's frame goes back to b only
                await on_b.send(json.dumps({"type": "steer", "message_id": "nope"}))
                error = json.loads(await asyncio.wait_for(on_b.recv(), WITHIN))
                assert error["type"] == "error" and error["data"]["code"] == "no_longer_pending"
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(on_a.recv(), 0.5)
                # the snapshot read through b is the owner's
                async with httpx.AsyncClient(
                    base_url=b.base_url, headers={"Authorization": f"Bearer {key}"}
                ) as http:
                    body = (await http.get(f"/api/v1/chat/sessions/{SID_SPREAD}")).json()
                    assert body["snapshot"]["running"] is False
                    history = (await http.get(f"/api/v1/chat/sessions/{SID_SPREAD}/messages")).json()[
                        "results"
                    ]
                    assert [m["role"] for m in history] == ["user", "assistant"]
            # a client reconnecting to the other process with since= misses nothing
            last = seen_a[2]["seq"]
            async with websockets.connect(ws_url(b, SID_SPREAD, key, since=last)) as again:
                assert json.loads(await again.recv())["type"] == "connected"
                replay = [json.loads(await asyncio.wait_for(again.recv(), WITHIN)) for _ in seen_a[3:]]
                assert replay == seen_a[3:]
        # deleting the session through one process closes its sockets on every process
        async with (
            websockets.connect(ws_url(a, SID_SPREAD, key)) as on_a,
            websockets.connect(ws_url(b, SID_SPREAD, key)) as on_b,
        ):
            for ws in (on_a, on_b):
                assert json.loads(await ws.recv())["type"] == "connected"
            async with httpx.AsyncClient(
                base_url=b.base_url, headers={"Authorization": f"Bearer {key}"}
            ) as http:
                assert (await http.delete(f"/api/v1/chat/sessions/{SID_SPREAD}")).status_code == 200
            for ws in (on_a, on_b):
                error = json.loads(await asyncio.wait_for(ws.recv(), WITHIN))
                assert error["type"] == "error" and error["data"]["code"] == "closed"
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await asyncio.wait_for(ws.recv(), WITHIN)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 4410


async def test_when_the_owner_dies_another_process_takes_over_with_the_queue_intact_and_paused(scaled):
    env, key, llm = scaled
    script_remote(llm, Reply(text="never finished", delay=120), default=Reply(text="fine"))
    with two_servers(env) as (a, b):
        await create_session(a, key, SID_ORPHAN)
        async with websockets.connect(ws_url(a, SID_ORPHAN, key)) as on_a:
            assert json.loads(await on_a.recv())["type"] == "connected"
            await on_a.send(json.dumps({"type": "message", "message_id": "A", "content": "A"}))
            await until(on_a, "message_status", "started")
            async with asyncio.timeout(WITHIN):
                while not remote_requests(llm):
                    await asyncio.sleep(0.1)
            os.killpg(a.process.pid, signal.SIGKILL)  # the owner dies mid-turn
            a.process.wait(timeout=10)
        # sent to b while the dead owner's lease has not expired: stored, not lost
        async with httpx.AsyncClient(
            base_url=b.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=WITHIN
        ) as http:
            for message_id in ("B", "C"):
                response = await http.post(
                    f"/api/v1/chat/sessions/{SID_ORPHAN}/messages",
                    json={"message_id": message_id, "content": message_id},
                )
                assert response.status_code == 202, response.text
            async with asyncio.timeout(WITHIN):
                while True:  # b (request or watchdog) takes the session over once the lease expired
                    snapshot = (
                        (await http.get(f"/api/v1/chat/sessions/{SID_ORPHAN}")).json().get("snapshot", {})
                    )
                    if snapshot.get("paused"):
                        break
                    await asyncio.sleep(0.3)
            assert snapshot["running"] is False
            assert [p["message_id"] for p in snapshot["pending"]] == ["B", "C"]
            history = (await http.get(f"/api/v1/chat/sessions/{SID_ORPHAN}/messages")).json()["results"]
            assert [(m["message_id"], m["status"]) for m in history] == [("A", "interrupted")]
            async with websockets.connect(ws_url(b, SID_ORPHAN, key)) as on_b:
                assert json.loads(await on_b.recv())["snapshot"]["paused"] is True
                await on_b.send(json.dumps({"type": "steer", "message_id": "B"}))  # "send now"
                frames = await until(on_b, "result")
                frames += await until(on_b, "result")
                story = [
                    (f["message_id"], f.get("status") or f["data"]["status"])
                    for f in frames
                    if f["type"] in {"message_status", "result"}
                ]
                assert story == [("B", "started"), ("B", "completed"), ("C", "started"), ("C", "completed")]


async def test_an_old_owner_that_comes_back_after_losing_its_lease_changes_nothing(scaled):
    env, key, llm = scaled
    script_remote(llm, Reply(text="late words from the old owner", delay=4), default=Reply(text="new owner"))
    with two_servers(env) as (a, b):
        await create_session(a, key, SID_FENCED)
        async with websockets.connect(ws_url(a, SID_FENCED, key)) as on_a:
            assert json.loads(await on_a.recv())["type"] == "connected"
            await on_a.send(json.dumps({"type": "message", "message_id": "A", "content": "A"}))
            await until(on_a, "message_status", "started")
            os.killpg(a.process.pid, signal.SIGSTOP)  # a freezes while it owns the session
            try:
                async with asyncio.timeout(WITHIN):
                    while True:  # b takes over once a's lease expired
                        try:
                            async with websockets.connect(ws_url(b, SID_FENCED, key)) as probe:
                                snap = json.loads(await probe.recv())
                                if snap.get("type") == "connected" and snap["snapshot"]["paused"]:
                                    break
                        except (OSError, websockets.WebSocketException):
                            pass
                        await asyncio.sleep(0.3)
                async with websockets.connect(ws_url(b, SID_FENCED, key)) as on_b:
                    assert json.loads(await on_b.recv())["type"] == "connected"
                    os.killpg(a.process.pid, signal.SIGCONT)  # a wakes up; its model reply arrives
                    await asyncio.sleep(5)
                    leaked = []
                    try:
                        while True:
                            leaked.append(json.loads(await asyncio.wait_for(on_b.recv(), 0.3)))
                    except TimeoutError:
                        pass
                    assert leaked == [], "the old owner published after losing its lease"
            finally:
                os.killpg(a.process.pid, signal.SIGCONT)
        async with httpx.AsyncClient(base_url=b.base_url, headers={"Authorization": f"Bearer {key}"}) as http:
            history = (await http.get(f"/api/v1/chat/sessions/{SID_FENCED}/messages")).json()["results"]
            assert [(m["message_id"], m["role"], m["status"]) for m in history] == [
                ("A", "user", "interrupted")
            ]


async def test_serve_workers_runs_several_processes_on_one_port(scaled):
    env, key, llm = scaled
    port = free_port()
    import subprocess
    import sys
    import time

    from tests.support.server import ROOT

    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "2"],
        cwd=ROOT,
        env=env.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + WITHIN
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve --workers did not answer"
            await asyncio.sleep(0.2)
        children = subprocess.run(
            ["pgrep", "-P", str(process.pid)], capture_output=True, text=True
        ).stdout.split()
        assert len(children) == 2
        server = RunningServer(process=process, port=port, log_path=env.data_dir / "unused.log")  # type: ignore[arg-type]
        await create_session(server, key, SID_WORKERS)
        for _ in range(3):  # new connections land on either worker; each sees the session
            async with websockets.connect(ws_url(server, SID_WORKERS, key)) as ws:
                assert json.loads(await ws.recv())["type"] == "connected"
                await ws.send(json.dumps({"type": "message", "content": "hi"}))
                assert (await until(ws, "result"))[-1]["data"]["status"] == "completed"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


async def test_a_job_run_by_a_separate_runscheduler_streams_to_sockets_on_a_server(scaled):
    """`runscheduler` on its own: the run goes through the session's owner, so watchers see it live."""
    import subprocess
    import sys
    from datetime import UTC, datetime, timedelta

    from tests.support.server import ROOT

    env, key, llm = scaled
    script_remote(llm, default=Reply(text="scheduled answer in several words"))
    session_id = f"cron-{_RUN}"
    with serve(env, kill=True, args=("--no-scheduler",)) as server:
        await create_session(server, key, session_id)
        scheduler = subprocess.Popen(
            [sys.executable, "manage.py", "runscheduler", "--interval", "0.2"],
            cwd=ROOT,
            env=env.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            async with websockets.connect(ws_url(server, session_id, key)) as ws:
                assert json.loads(await ws.recv())["type"] == "connected"  # the server owns the session
                job = {
                    "name": "soon",
                    "schedule": {
                        "type": "once",
                        "run_at": (datetime.now(UTC) + timedelta(seconds=2)).isoformat(),
                    },
                    "task_type": "agent",
                    "request": {
                        "input": [
                            {"role": "user", "type": "message", "content": [{"type": "text", "text": "go"}]}
                        ]
                    },
                    "dispatch": {
                        "type": "channel",
                        "channel": "console",
                        "target": {"session_id": session_id},
                    },
                }
                async with httpx.AsyncClient(
                    base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}
                ) as http:
                    created = await http.post("/api/v1/cron/jobs", json=job)
                    assert created.status_code == 200, created.text
                    frames = await until(ws, "result")
                    deltas = "".join(f["content"] for f in frames if f["type"] == "delta")
                    assert deltas.split() == "scheduled answer in several words".split()
                    assert frames[-1]["data"]["status"] == "completed"
                    async with asyncio.timeout(WITHIN):
                        while True:
                            runs = (
                                await http.get(f"/api/v1/cron/jobs/{created.json()['id']}/history")
                            ).json()["results"]
                            if runs and runs[0]["status"] != "running":
                                break
                            await asyncio.sleep(0.2)
                    assert (
                        runs[0]["status"] == "success"
                        and runs[0]["response"] == "scheduled answer in several words"
                    )
        finally:
            os.killpg(scheduler.pid, signal.SIGTERM)
            scheduler.wait(timeout=20)


async def test_a_mirror_keeps_receiving_after_the_relay_grace_period(scaled):
    """Owners relay live events only to sessions that others mirror; the mirrors' keep-alives hold that."""
    env, key, llm = scaled
    script_remote(llm, default=Reply(text="still here after a while"))
    session_id = f"quiet-{_RUN}"
    with two_servers(env) as (a, b):
        await create_session(a, key, session_id)
        async with websockets.connect(ws_url(a, session_id, key)) as on_a:
            assert json.loads(await on_a.recv())["type"] == "connected"  # a owns it
            async with websockets.connect(ws_url(b, session_id, key)) as on_b:
                assert json.loads(await on_b.recv())["type"] == "connected"
                await asyncio.sleep(3 * float(LEASE) + 2)  # longer than the relay grace (3 leases)
                await on_a.send(json.dumps({"type": "message", "content": "after a pause"}))
                seen_b = await until(on_b, "result")
                assert "".join(f["content"] for f in seen_b if f["type"] == "delta").split() == [
                    "still",
                    "here",
                    "after",
                    "a",
                    "while",
                ]
