"""The speed tricks of agentsite/internals.py still find the private parts of asgiref and Channels they use.

If this fails after an upgrade, do not silence it: read agentsite/internals.py, check what the library
changed, and adapt the trick (or drop it and measure again, bench/).
"""

from __future__ import annotations

import asyncio
import inspect

from asgiref.sync import SyncToAsync
from channels.consumer import AsyncConsumer

from agentsite import internals
from tests.support.stack import speed_layer_only

pytestmark = speed_layer_only


def test_every_private_name_the_tricks_use_is_still_there() -> None:
    assert internals.missing() == []


def test_the_names_still_mean_what_the_tricks_assume() -> None:
    # The shared database thread is an executor with one worker that takes callables.
    assert SyncToAsync.single_thread_executor._max_workers == 1
    # Channels' consumer entry point still takes (scope, receive, send), which the lean consumer replaces.
    assert list(inspect.signature(AsyncConsumer.__call__).parameters) == ["self", "scope", "receive", "send"]
    assert inspect.iscoroutinefunction(internals.channels_utils.await_many_dispatch)
    assert internals.channels_consumer.get_handler_name({"type": "websocket.receive"}) == "websocket_receive"


async def test_outside_a_sync_caller_asgiref_would_use_the_shared_thread() -> None:
    assert internals.asgiref_picks_another_thread(asyncio.get_running_loop()) is False


def test_the_check_reports_what_is_gone(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        internals, "PRIVATE_NAMES", (*internals.PRIVATE_NAMES, (SyncToAsync, "no_such_thing"))
    )
    assert internals.missing() == ["SyncToAsync.no_such_thing"]


def test_the_server_may_close_with_service_restart_and_other_codes_go_through_autobahn() -> None:
    """Autobahn refuses 1012 from an application; the socket daphne gets from `serve` sends it (the fault
    tests see it on the wire, tests/faults/)."""
    sent: list[tuple[int | None, bool]] = []

    class Probe(internals.ContractWebSocketProtocol):  # type: ignore[misc]
        def __init__(self) -> None:  # no connection: only the close path is exercised
            pass

        def sendCloseFrame(self, code=None, reasonUtf8=None, isReply=False):  # type: ignore[no-untyped-def]
            sent.append((code, isReply))

    Probe().serverClose(1012)
    Probe().serverClose(4401)  # through autobahn's own check, which allows it
    assert sent == [(1012, False), (4401, False)]
    try:
        internals.daphne_ws_protocol.WebSocketProtocol.sendClose(Probe(), code=1012)
    except Exception as exc:  # what the trick exists for: autobahn still refuses it
        assert "invalid close code" in str(exc)
    else:
        raise AssertionError("autobahn now allows 1012: the trick can go")
    assert internals.ContractWebSocketFactory.protocol is internals.ContractWebSocketProtocol


def test_a_socket_handshake_formats_autobahns_options_only_for_debug_lines(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import txaio

    monkeypatch.setattr(internals.autobahn_protocol, "pformat", internals.autobahn_protocol.pformat)
    monkeypatch.setattr(internals.daphne_server, "WebSocketFactory", internals.daphne_server.WebSocketFactory)
    internals.close_websockets_by_contract()
    assert internals.autobahn_protocol.pformat({"a": 1}) == "(shown at log level debug)"
    level = txaio.get_global_log_level()
    txaio.set_global_log_level("debug")
    try:
        assert internals.autobahn_protocol.pformat({"a": 1}) == "{'a': 1}"
    finally:
        txaio.set_global_log_level(level)


def _open_daphne_socket() -> tuple[object, object]:
    """A daphne WebSocket protocol, made by our factory as `serve` makes it, open, on a fake transport."""
    import functools

    from twisted.internet.testing import StringTransport

    factory = internals.ContractWebSocketFactory(object, server=None)
    protocol = factory.buildProtocol(None)
    protocol.transport = StringTransport()
    protocol._connectionMade()
    protocol.state = protocol.STATE_OPEN
    return protocol, functools.partial(lambda proto, message: None, protocol)


def test_a_burst_of_frames_is_written_as_autobahn_writes_each_frame() -> None:
    """Trick 7: the frames of a burst, written at once, are byte for byte what autobahn's sendMessage writes
    for each (short, 16-bit and 64-bit lengths, non-ASCII text)."""
    texts = ['{"type":"delta","content":"hé"}', "x" * 126, "y" * 65_535, "z" * 70_000, "✓" * 50]
    ours, send = _open_daphne_socket()
    theirs, _ = _open_daphne_socket()

    assert internals.write_text_frames(send, texts) is True
    for text in texts:
        theirs.sendMessage(text.encode("utf-8"), False)  # type: ignore[attr-defined]
    assert ours.transport.value() == theirs.transport.value()  # type: ignore[attr-defined]


def test_a_burst_goes_frame_by_frame_where_autobahn_would_not_write_it_as_is() -> None:
    protocol, send = _open_daphne_socket()
    protocol.maxMessagePayloadSize = 10  # type: ignore[attr-defined]
    assert internals.write_text_frames(send, ["short", "longer than ten"]) is False
    protocol.maxMessagePayloadSize = 0  # type: ignore[attr-defined]
    protocol.state = protocol.STATE_CLOSING  # type: ignore[attr-defined]
    assert internals.write_text_frames(send, ["a", "b"]) is False
    assert internals.write_text_frames(lambda message: None, ["a", "b"]) is False  # not daphne's send
    assert protocol.transport.value() == b""  # type: ignore[attr-defined]
