"""The baseline: a minimal `websockets` server that streams the same frames agentsite does.

Per `{"type":"message"}` frame it sends `message_status started`, K `delta`s, `final_answer` and `result`,
with the same fields, key order and encoding as agentsite (see common.py), pacing the deltas like the demo
model (AGENTSITE_DEMO_DELAY). No auth, no database, no queue: the cost floor of putting these frames on a
socket from Python on this machine. Compression is off, as with daphne.

Usage: python bench/raw_server.py --port P [--chunks 50] [--delay 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from typing import Any

from common import dumps, reply_pieces
from websockets.asyncio.server import ServerConnection, serve


class Streamer:
    """Per-connection state: the seq counter and the reply to stream."""

    def __init__(self, pieces: list[str], delay: float) -> None:
        self.pieces = pieces
        self.text = "".join(pieces)
        self.delay = delay

    async def handle(self, ws: ServerConnection) -> None:
        session_id = ws.request.path.rsplit("/", 1)[-1].split("?")[0] if ws.request else ""
        await ws.send(dumps({"type": "connected", "session_id": session_id, "snapshot": {}, "last_seq": 0}))
        seq = 0
        async for raw in ws:
            data: dict[str, Any] = json.loads(raw)
            if data.get("type") != "message":
                continue
            seq = await self.stream(ws, str(data.get("message_id") or "m"), seq)

    async def stream(self, ws: ServerConnection, message_id: str, seq: int) -> int:
        seq += 1
        status = {"type": "message_status", "message_id": message_id, "status": "started"}
        await ws.send(dumps({**status, "seq": seq}))
        for piece in self.pieces:
            if self.delay:
                await asyncio.sleep(self.delay)
            seq += 1
            await ws.send(dumps({"type": "delta", "content": piece, "message_id": message_id, "seq": seq}))
        seq += 1
        final = {"type": "final_answer", "message_id": message_id, "content": self.text, "is_final": True}
        await ws.send(dumps({**final, "seq": seq}))
        seq += 1
        count = len(self.pieces)
        usage = {"prompt_tokens": 10, "completion_tokens": count, "total_tokens": 10 + count}
        data = {"status": "completed", "final_content": self.text, "stop_reason": "stop", "usage": usage}
        await ws.send(dumps({"type": "result", "message_id": message_id, "data": data, "seq": seq}))
        return seq


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    streamer = Streamer(reply_pieces(args.chunks), args.delay)
    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set_result, None)
    options = {"compression": None, "max_queue": None, "ping_interval": None}
    async with serve(streamer.handle, args.host, args.port, **options):
        print(f"raw server on ws://{args.host}:{args.port}/", flush=True)
        await stop


if __name__ == "__main__":
    asyncio.run(main())
