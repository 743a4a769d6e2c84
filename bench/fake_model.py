"""A fake OpenAI-compatible model server for bench/provider_load.py (aiohttp).

    .venv/bin/python bench/fake_model.py --port P [--chunks 50] [--delay 0] [--close]

`POST /v1/chat/completions` with `"stream": true` answers like OpenAI's chat-completions stream: a first
chunk with the role, K content chunks (the same words as bench/common.py), a chunk with
`finish_reason: stop`, a usage chunk and `data: [DONE]`. With `--delay 0` the whole body is built once and
written in one go (as fast as it can: the model is never the bottleneck); with a delay, chunk by chunk.
Without `"stream": true` it answers one JSON completion. `GET /v1/models` lists the model.

Connections are kept alive, as real providers do (HTTP/1.1 keep-alive); `--close` closes each one after
its answer (every reply then pays a new TCP connection).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import reply_pieces

MODEL = "bench-model"


def sse(payload: dict[str, object] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def chunk(delta: dict[str, str], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def stream_pieces(chunks: int) -> list[bytes]:
    """The SSE events of one streamed reply, in order."""
    usage = {"prompt_tokens": 20, "completion_tokens": chunks, "total_tokens": 20 + chunks}
    pieces = [sse(chunk({"role": "assistant", "content": ""}))]
    pieces += [sse(chunk({"content": word})) for word in reply_pieces(chunks)]
    pieces.append(sse(chunk({}, "stop")))
    pieces.append(sse({**chunk({}), "choices": [], "usage": usage}))
    pieces.append(sse("[DONE]"))
    return pieces


def make_app(chunks: int, delay: float, close: bool) -> web.Application:
    pieces = stream_pieces(chunks)
    body = b"".join(pieces)
    text = "".join(reply_pieces(chunks))
    completion = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1700000000,
            "model": MODEL,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": chunks, "total_tokens": 20 + chunks},
        }
    ).encode()

    async def completions(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        streamed = b'"stream":true' in raw or b'"stream": true' in raw
        if not streamed:
            answer = web.Response(body=completion, content_type="application/json")
            if close:
                answer.force_close()
            return answer
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        if close:
            response.force_close()
        await response.prepare(request)
        if delay <= 0:
            await response.write(body)
        else:
            for piece in pieces:
                await response.write(piece)
                await asyncio.sleep(delay)
        await response.write_eof()
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between chunks (0: one write)")
    parser.add_argument("--close", action="store_true", help="close each connection after its answer")
    args = parser.parse_args()
    web.run_app(
        make_app(args.chunks, args.delay, args.close),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
        backlog=4096,
    )


if __name__ == "__main__":
    main()
