"""The soak's chat clients (bench/soak.py): one per session, following the contract on every error.

Each client chats over one socket at a time, on a server it picks at random for every connection, and
keeps what it needs to judge the server:

- its own mirror of the session's queue (running turn, pending ids, paused), built only from the events
  it receives, so that it can "send now" a paused queue (docs/protocol.md §3.4) and send follow-ups while
  a turn runs;
- every message it sent: when, how often, whether the server acknowledged it, whether and how often its
  turn started and ended, and the time to its first delta;
- the seq of the last event it received: an event at or below it (on the same socket or after a
  reconnect with `?since=`) is a duplicate delivery.

The contract on errors: `error` `unavailable`/`owner_unavailable` for a message → the same message (same
id) again a moment later; a socket that closes (1012 or dropped) → reconnect with `?since=<last seq>`, then
send again every message whose acknowledgement never came, unless the snapshot shows it. A resent message
that the server already holds is refused with `duplicate_message_id`: that refusal is its acknowledgement.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

RETRY_CODES = {"unavailable", "owner_unavailable"}
FINAL_STATUSES = {"completed", "cancelled", "error", "interrupted"}


@dataclass
class Tally:
    """What every client saw, summed (the soak's report reads it)."""

    resent: int = 0  # sends of a message id that had been sent before
    refused_for_now: int = 0  # `error unavailable|owner_unavailable` for a message
    acked_by_duplicate: int = 0  # a resend refused as duplicate_message_id: the first copy was stored
    connects: int = 0
    connect_failures: Counter[str] = field(default_factory=Counter)
    closes: Counter[str] = field(default_factory=Counter)  # close codes of sockets the server ended
    errors: Counter[str] = field(default_factory=Counter)  # error frames by code
    resyncs: int = 0
    stuck_reconnects: int = 0  # reconnects without ?since= because the session seemed stuck
    outcome_reads: int = 0  # stuck: the stored history read over REST for what ended unseen
    stale_mirror: int = 0  # a steer of what the client believed pending was no_longer_pending
    duplicate_seqs: list[str] = field(default_factory=list)
    duplicate_starts: list[str] = field(default_factory=list)
    duplicate_results: list[str] = field(default_factory=list)
    first_delta: list[tuple[float, float]] = field(default_factory=list)  # (sent at, seconds)
    frames: int = 0


@dataclass
class Sent:
    message_id: str
    sent_at: float
    attempts: int = 1
    acked: bool = False
    idle_at_send: bool = False  # sent while the client saw nothing running, nothing pending, not paused
    first_status: str = ""
    starts: int = 0
    results: int = 0
    answered: bool = False  # its turn (or the turn it was steered into) ended, as seen live
    first_delta: bool = False
    steer: bool = False  # sent as `message` with `steer: true` (submit and steer in one step)


class Client:
    """One session's client. `run()` until `stop_sending` is set and everything it sent is answered."""

    def __init__(self, index: int, session_id: str, ports: list[int], key: str, tally: Tally, **opts: Any):
        self.index = index
        self.session_id = session_id
        self.ports = ports
        self.key = key
        self.tally = tally
        self.think = float(opts.get("think", 3.0))
        self.rng = random.Random(opts.get("seed", index))
        self.stop_sending = asyncio.Event()
        self.messages: dict[str, Sent] = {}
        self.ws: Any = None
        self.connected = asyncio.Event()
        self.last_seq: int | None = None
        self.running: str | None = None
        self.pending: list[str] = []
        self.paused = False
        self.joined: dict[str, list[str]] = {}  # turn's message id -> messages steered into it, unanswered
        self.last_event_at = time.monotonic()
        self.counter = 0
        self.fresh_next = False  # the next connection goes without ?since= (the session seemed stuck)
        self._tasks: set[asyncio.Future[None]] = set()
        self.trace: list[str] = []  # what this client sent and got (deltas left out), for --trace

    # -- the figures ----------------------------------------------------------------------------------

    def unsettled(self) -> list[Sent]:
        """Messages sent whose fate the client does not know yet (not acknowledged, or not answered)."""
        return [m for m in self.messages.values() if not m.answered]

    # -- the connection --------------------------------------------------------------------------------

    def url(self, port: int) -> str:
        url = f"ws://127.0.0.1:{port}/api/v1/chat/ws/{self.session_id}?api_key={self.key}"
        return url if self.last_seq is None or self.fresh_next else f"{url}&since={self.last_seq}"

    async def run(self, deadline: float) -> None:
        actor = asyncio.create_task(self._act(deadline))
        try:
            while time.monotonic() < deadline:
                if self.stop_sending.is_set() and not self.unsettled():
                    break
                await self._connection(deadline)
                await asyncio.sleep(self.rng.uniform(0.2, 1.0))  # back off before reconnecting
        finally:
            actor.cancel()
            await asyncio.gather(actor, return_exceptions=True)
            if self.ws is not None:
                await self.ws.close()

    async def _connection(self, deadline: float) -> None:
        port = self.rng.choice(self.ports)
        try:
            ws = await connect(self.url(port), open_timeout=15, ping_interval=None, max_size=None)
        except Exception as exc:  # a server being killed or restarted: try again (maybe the other one)
            self.tally.connect_failures[type(exc).__name__] += 1
            return
        fresh, self.fresh_next = self.fresh_next, False
        try:
            first = json.loads(await asyncio.wait_for(ws.recv(), 20))
            if first.get("type") != "connected":
                self._error(first)
                await ws.close()
                return
            self.tally.connects += 1
            self._note(f"connected :{port} since={self.last_seq} fresh={fresh} {json.dumps(first)[:400]}")
            self._connected(first, fresh)
            self.ws = ws
            self.connected.set()
            await self._resend_unacked()
            while time.monotonic() < deadline:
                if self.stop_sending.is_set() and not self.unsettled():
                    break
                try:
                    raw = await asyncio.wait_for(ws.recv(), 2.0)
                except TimeoutError:
                    if await self._stuck():
                        break
                    continue
                self._frame(json.loads(raw))
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd is not None else "dropped"
            self.tally.closes[str(code)] += 1
            self._note(f"closed {code}")
        except (TimeoutError, OSError) as exc:
            self.tally.connect_failures[type(exc).__name__] += 1
        finally:
            self.connected.clear()
            self.ws = None
            await ws.close()

    def _connected(self, frame: dict[str, Any], fresh: bool) -> None:
        snapshot = frame["snapshot"]
        self._ack_from(snapshot)
        if self.last_seq is None or fresh:
            # A first (or fresh) connection: the snapshot is the state, later events come after last_seq.
            self._take_snapshot(snapshot, frame["last_seq"])
        # With ?since= the replay that follows brings the mirror up to date from where it was.

    def _take_snapshot(self, snapshot: dict[str, Any], last_seq: int) -> None:
        self.last_seq = last_seq
        self.running = snapshot.get("active_message_id")
        self.pending = [item["message_id"] for item in snapshot.get("pending", [])]
        self.paused = bool(snapshot.get("paused"))
        self.joined = {turn: ids for turn, ids in self.joined.items() if turn == self.running}

    def _ack_from(self, snapshot: dict[str, Any]) -> None:
        ids = {item["message_id"] for item in snapshot.get("pending", [])}
        ids.add(snapshot.get("active_message_id"))
        for message_id in ids:
            if message_id in self.messages:
                self.messages[message_id].acked = True

    async def _stuck(self) -> bool:
        """Messages wait and nothing happens for 8 s: ask the stored history which of them ended (their
        events may be gone with a killed process or a restarted Redis), then look at the session afresh."""
        if time.monotonic() - self.last_event_at < 8 or not self.unsettled():
            return False
        if self.stop_sending.is_set():  # draining: the history says what ended (one read per stall)
            await self._read_outcomes()
            if not self.unsettled():
                return True
        if self.paused and not self.running and self.pending:
            await self._send({"type": "steer", "message_id": self.pending[0]})
            self.last_event_at = time.monotonic()
            return False
        self.tally.stuck_reconnects += 1
        self.fresh_next = True
        self.last_event_at = time.monotonic()
        return True

    async def _read_outcomes(self) -> None:
        import httpx

        port = self.rng.choice(self.ports)
        headers = {"Authorization": f"Bearer {self.key}"}
        path = f"/api/v1/chat/sessions/{self.session_id}/messages"
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=20
            ) as http:
                cursor = None
                while True:
                    params = {"limit": "500", **({"cursor": cursor} if cursor else {})}
                    body = (await http.get(path, params=params)).raise_for_status().json()
                    for row in body["results"]:
                        message = self.messages.get(row["message_id"])
                        if message is not None and row["role"] == "user" and row["status"] in FINAL_STATUSES:
                            message.answered = True
                    if not (cursor := body.get("next")):
                        break
        except (httpx.HTTPError, ValueError) as exc:
            self.tally.connect_failures[f"rest {type(exc).__name__}"] += 1
        self.tally.outcome_reads += 1

    # -- what the server sends -------------------------------------------------------------------------

    def _note(self, what: str) -> None:
        self.trace.append(f"{time.monotonic():.3f} {what}")

    def _frame(self, frame: dict[str, Any]) -> None:
        self.tally.frames += 1
        if frame.get("type") != "delta":
            self._note(f"< {json.dumps(frame)[:300]}")
        kind = frame.get("type")
        seq = frame.get("seq")
        if kind == "error":
            self._error(frame)
            return
        if kind == "resync":
            self.tally.resyncs += 1
            self._ack_from(frame["snapshot"])
            self._take_snapshot(frame["snapshot"], frame["last_seq"])
            return
        if seq is None:
            return
        if self.last_seq is not None and seq <= self.last_seq:
            self.tally.duplicate_seqs.append(f"{self.session_id} seq {seq} after {self.last_seq} ({kind})")
            return
        self.last_seq = seq
        self.last_event_at = time.monotonic()
        message = self.messages.get(frame.get("message_id") or "")
        if kind == "message_status":
            self._status(frame, message)
        elif kind == "delta" and message is not None:
            message.acked = True
            if not message.first_delta:
                message.first_delta = True
                if message.idle_at_send and message.attempts == 1 and message.first_status == "started":
                    self.tally.first_delta.append((message.sent_at, time.monotonic() - message.sent_at))
        elif kind == "result":
            self._result(frame, message)

    def _status(self, frame: dict[str, Any], message: Sent | None) -> None:
        status, message_id = frame["status"], frame["message_id"]
        if message is not None:
            message.acked = True
            message.first_status = message.first_status or status
        if message_id in self.pending:
            self.pending.remove(message_id)
        if status in {"queued", "restored"}:
            self.pending.insert(min(frame.get("position", len(self.pending)), len(self.pending)), message_id)
            for ids in self.joined.values():
                if message_id in ids:
                    ids.remove(message_id)
        elif status == "started":
            self.running, self.paused = message_id, False
            if message is not None:
                message.starts += 1
                if message.starts > 1:
                    self.tally.duplicate_starts.append(f"{self.session_id} {message_id}")
        elif status == "steered":
            self.joined.setdefault(self.running or "", []).append(message_id)

    def _result(self, frame: dict[str, Any], message: Sent | None) -> None:
        status = (frame.get("data") or {}).get("status")
        turn = frame.get("message_id")
        if status in {"cancelled", "error", "interrupted"}:
            self.paused = True  # the queue pauses (docs/protocol.md §3.4)
        if turn is None:
            return  # a cancel while nothing ran
        self.running = None  # results come in order: no turn runs until the next `started`
        if turn in self.pending:  # its `started` was lost with a killed process's unrelayed events
            self.pending.remove(turn)
        if message is not None:
            message.acked = True
            message.results += 1
            message.answered = True
            if message.results > 1:
                self.tally.duplicate_results.append(f"{self.session_id} {turn} ({status})")
        for message_id in self.joined.pop(turn, []):
            if message_id in self.messages:
                self.messages[message_id].answered = True
        if self.joined.get(""):  # steered while the client did not know the running turn (after a resync)
            for message_id in self.joined.pop(""):
                if message_id in self.messages:
                    self.messages[message_id].answered = True

    def _error(self, frame: dict[str, Any]) -> None:
        data = frame.get("data") or {}
        code = data.get("code", "?")
        self.tally.errors[code] += 1
        if code == "no_longer_pending" and data.get("message_id") in self.pending:
            # The mirror was wrong (events a killed process never relayed): look at the session afresh.
            self.pending.remove(data["message_id"])
            self.tally.stale_mirror += 1
            self.fresh_next = True
            if self.ws is not None:
                task = asyncio.ensure_future(self.ws.close())
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        message = self.messages.get(data.get("message_id") or "")
        if message is None:
            return
        if code == "duplicate_message_id":
            if not message.acked:
                self.tally.acked_by_duplicate += 1
            message.acked = True
        elif code in RETRY_CODES and not message.acked:
            self.tally.refused_for_now += 1
            asyncio.get_running_loop().call_later(self.rng.uniform(0.3, 1.0), self._retry, message)

    def _retry(self, message: Sent) -> None:
        if not message.acked and self.ws is not None:
            task = asyncio.ensure_future(self._send_message(message, resend=True))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # -- what the client does --------------------------------------------------------------------------

    async def _send(self, frame: dict[str, Any]) -> bool:
        ws = self.ws
        if ws is None:
            return False
        try:
            await ws.send(json.dumps(frame))
            self._note(f"> {json.dumps(frame)}")
            return True
        except ConnectionClosed:
            return False

    async def _send_message(self, message: Sent, *, resend: bool = False) -> None:
        """The same frame every time: same id, same content, same steer flag."""
        if resend:
            message.attempts += 1
            self.tally.resent += 1
        frame: dict[str, Any] = {"type": "message", "content": f"soak {message.message_id}"}
        frame["message_id"] = message.message_id
        if message.steer:
            frame["steer"] = True
        await self._send(frame)

    async def _resend_unacked(self) -> None:
        for message in list(self.messages.values()):
            if not message.acked:
                await self._send_message(message, resend=True)

    async def _new_message(self, steer: bool = False) -> None:
        self.counter += 1
        message_id = f"s{self.index}-m{self.counter}"
        idle = not (self.running or self.pending or self.paused or steer)
        message = Sent(message_id, time.monotonic(), idle_at_send=idle, steer=steer)
        self.messages[message_id] = message
        await self._send_message(message)

    async def _act(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            await asyncio.sleep(self.rng.expovariate(1 / self.think))
            await self.connected.wait()
            if self.paused and not self.running and self.pending:
                await self._send({"type": "steer", "message_id": self.pending[0]})  # "send now"
                continue
            if self.stop_sending.is_set():
                continue
            roll = self.rng.random()
            if roll < 0.55:
                await self._new_message()
            elif roll < 0.70:  # a follow-up burst: queued behind the turn the first one starts
                await self._new_message()
                await self._new_message()
            elif roll < 0.80 and self.running:
                if self.pending:
                    await self._send({"type": "steer", "message_id": self.rng.choice(self.pending)})
                else:
                    await self._new_message(steer=True)  # submit and steer in one step
            elif roll < 0.87 and self.running:
                await self._send({"type": "cancel"})
            elif roll < 0.91 and self.ws is not None:
                await self.ws.close()  # reconnect, to either process, with ?since=
            else:
                await self._new_message()
