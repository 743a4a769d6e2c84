"""The floor of bench/provider_load.py: a minimal aiohttp proxy of the same model, same client protocol.

    .venv/bin/python bench/floor_proxy.py --port P --model-url http://127.0.0.1:M/v1

What a client does against agentsite, it can do here, with nothing else in between: `POST
/api/v1/chat/sessions` answers a new session id; `GET /api/v1/chat/ws/{id}` opens a socket that says
`connected`, and each `message` frame is answered by streaming one model reply: `message_status started`,
one `delta` per content chunk, `final_answer`, `result` (the fields agentsite sends, same JSON encoding).
The model is called through one aiohttp client session (its connection pool kept alive across replies),
its SSE lines parsed with `json.loads`. No database, no queue, no history, no authentication: what is left
is the cost of HTTP in, HTTP out, JSON and WebSocket frames in Python — what any Python server pays.
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

import aiohttp
from aiohttp import web


def dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def make_app(model_url: str, model: str) -> web.Application:
    app = web.Application()
    endpoint = model_url.rstrip("/") + "/chat/completions"

    async def start(app: web.Application) -> None:
        app["client"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def stop(app: web.Application) -> None:
        await app["client"].close()

    async def create_session(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"session_id": str(uuid.uuid4()), "status": "open"})

    async def reply(ws: web.WebSocketResponse, state: dict[str, Any], message: dict[str, Any]) -> None:
        message_id = message.get("message_id") or uuid.uuid4().hex

        async def emit(event: dict[str, Any]) -> None:
            state["seq"] += 1
            event["seq"] = state["seq"]
            await ws.send_str(dumps(event))

        await emit({"type": "message_status", "message_id": message_id, "status": "started"})
        body = {
            "model": model,
            "messages": [{"role": "user", "content": message.get("content", "")}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        parts: list[str] = []
        usage = None
        async with app["client"].post(endpoint, json=body) as response:
            response.raise_for_status()
            async for line in response.content:
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].strip()
                if data == b"[DONE]":
                    break
                payload = json.loads(data)
                usage = payload.get("usage") or usage
                for choice in payload.get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        parts.append(content)
                        await emit({"type": "delta", "content": content, "message_id": message_id})
        text = "".join(parts)
        await emit({"type": "final_answer", "message_id": message_id, "content": text})
        data = {"status": "completed", "final_content": text, "stop_reason": "stop", "usage": usage}
        await emit({"type": "result", "message_id": message_id, "data": data})

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=False, max_msg_size=1024 * 1024)
        await ws.prepare(request)
        state = {"seq": 0}
        snapshot = {
            "running": False,
            "paused": False,
            "active_message_id": None,
            "pending": [],
            "confirmations": [],
        }
        session_id = request.match_info["session_id"]
        await ws.send_str(
            dumps({"type": "connected", "session_id": session_id, "snapshot": snapshot, "last_seq": 0})
        )
        async for frame in ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            message = json.loads(frame.data)
            if message.get("type") == "message":
                try:
                    await reply(ws, state, message)
                except Exception as exc:  # told to the client like agentsite's error frames
                    await ws.send_str(
                        dumps({"type": "error", "data": {"code": "model", "message": str(exc)}})
                    )
            elif message.get("type") == "ping":
                await ws.send_str(dumps({"type": "pong"}))
        return ws

    app.router.add_post("/api/v1/chat/sessions", create_session)
    app.router.add_get("/api/v1/chat/ws/{session_id}", socket)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-url", required=True, help="the model's base URL (…/v1)")
    parser.add_argument("--model", default="bench-model")
    args = parser.parse_args()
    web.run_app(
        make_app(args.model_url, args.model),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
        backlog=4096,
    )


if __name__ == "__main__":
    main()
