"""Tests whose subject is a trick of the speed layer (agentsite/internals.py and its friends) run only with
it: on the stock stack (AGENTSITE_STOCK_STACK=1, `make test-stock`) the trick is not there to test."""

from __future__ import annotations

from typing import Any

import pytest

from agentsite.stack import STOCK_STACK

speed_layer_only = pytest.mark.skipif(
    STOCK_STACK,
    reason="its subject is a trick of the speed layer, off on the stock stack (agentsite/stack.py)",
)


def daphne_socket(factory: Any = None) -> Any:
    """A daphne WebSocket protocol as `factory` (daphne's own by default) makes it, connected to a fake
    transport (its `value()` is what went on the wire), open."""
    from daphne.server import WebSocketFactory
    from twisted.internet.testing import StringTransport

    protocol = (factory or WebSocketFactory(object, server=None)).buildProtocol(None)
    protocol.transport = StringTransport()
    protocol._connectionMade()
    protocol.state = protocol.STATE_OPEN
    return protocol
