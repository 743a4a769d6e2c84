"""The speed tricks of agentsite/internals.py still find what they use of their libraries, as they assume it.

One test per private name (agentsite/private_names.py): it is still there, takes the parameters the trick
passes (exactly those, for a method the trick overrides), and the library's own function that must use it
still does. A failure names the package, its installed version and the trick. If one fails after an
upgrade, do not silence it: read the trick, check what the library changed, and adapt the trick (or drop it
and measure again, bench/); AGENTSITE_STOCK_STACK=1 runs without the tricks meanwhile (docs/deployment.md).
"""

from __future__ import annotations

import ast
import asyncio
import functools
import importlib
import inspect
import types
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from channels.consumer import AsyncConsumer

from agentsite import internals
from agentsite.private_names import PRIVATE_NAMES, TRICKS, PrivateName
from tests.support.stack import daphne_socket, speed_layer_only

pytestmark = speed_layer_only

LIBRARIES = ("asgiref", "autobahn", "channels", "daphne", "django", "openai", "txaio")


# -- checking one name ----------------------------------------------------------------------------------


def _resolve(path: str) -> Any:
    """ "module", "module:Class" or "module:Class.attribute" → the object."""
    module_name, _, attributes = path.partition(":")
    found: Any = importlib.import_module(module_name)
    for attribute in filter(None, attributes.split(".")):
        found = getattr(found, attribute)
    return found


def _names_used_by(code: types.CodeType) -> set[str]:
    """The names a function's code refers to: globals, attributes, and strings (getattr's)."""
    names = set(code.co_names) | {c for c in code.co_consts if isinstance(c, str)}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_used_by(const)
    return names


def _daphne_factory() -> Any:
    from daphne.server import WebSocketFactory

    return WebSocketFactory(object, server=None)  # daphne's own (serve's subclass adds to it only)


def _openai_client() -> Any:
    import openai

    return openai.AsyncOpenAI(api_key="sk-static", base_url="http://127.0.0.1:9/v1", max_retries=0)


# How to make an instance of an owner whose names are set per instance ("instance" entries).
INSTANCES: dict[str, Callable[[], Any]] = {
    "daphne.ws_protocol:WebSocketProtocol": daphne_socket,
    "daphne.server:WebSocketFactory": _daphne_factory,
    "openai._base_client:BaseClient": _openai_client,
    "openai:AsyncOpenAI": _openai_client,
}


def _shape(parameters: list[inspect.Parameter]) -> str:
    return f"({', '.join(str(p) for p in parameters)})"


def _problem(entry: PrivateName) -> str | None:
    """What no longer holds of `entry` in the installed package, or None."""
    try:
        owner = _resolve(entry.owner)
    except (ImportError, AttributeError) as exc:
        return f"cannot be looked up: {entry.owner.replace(':', '.')} is gone ({exc})"
    if entry.kind == "attribute" and not hasattr(owner, entry.name):
        return "is gone"
    if entry.kind == "instance" and not hasattr(INSTANCES[entry.owner](), entry.name):
        return f"is no longer set on a {entry.owner.split(':')[-1]} once made"
    if entry.kind == "field" and entry.name not in getattr(owner, "model_fields", {}):
        return f"is no longer a field of {entry.owner.split(':')[-1]}"
    if entry.parameters is not None:
        actual = [
            p for p in inspect.signature(getattr(owner, entry.name)).parameters.values() if p.name != "self"
        ]
        expected = list(entry.parameters)
        names = [p.name for p in actual]
        if entry.overridden and names != expected:
            return f"is now called with {_shape(actual)}; the trick's override takes ({', '.join(expected)})"
        rest = actual[len(expected) :]
        optional = all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in rest)
        if names[: len(expected)] != expected or not optional:
            return f"now takes {_shape(actual)}; the trick passes ({', '.join(expected)})"
    if entry.used_by:
        try:
            user = inspect.unwrap(_resolve(entry.used_by))
        except (ImportError, AttributeError):
            return f"is no longer used: {entry.used_by.replace(':', '.')} is gone"
        if entry.name not in _names_used_by(user.__code__):
            return f"is no longer used by {entry.used_by.replace(':', '.')}, as the trick assumes"
    return None


def _message(entry: PrivateName, problem: str) -> str:
    return (
        f"{entry.package} {version(entry.package)}: {entry} {problem}. Trick {entry.trick} of "
        f"agentsite/internals.py, {TRICKS[entry.trick]}, relies on it: read the trick, see what "
        f"{entry.package} changed, and adapt the trick or drop it (bench/ measures it). Until then "
        "AGENTSITE_STOCK_STACK=1 runs without the tricks (docs/deployment.md)."
    )


@pytest.mark.parametrize("entry", PRIVATE_NAMES, ids=lambda entry: f"trick{entry.trick}-{entry}")
def test_a_private_name_a_trick_uses_is_still_there_as_the_trick_assumes(entry: PrivateName) -> None:
    problem = _problem(entry)
    if problem is not None:
        pytest.fail(_message(entry, problem), pytrace=False)


def test_the_check_says_which_package_version_and_trick_when_a_name_is_gone_or_changed() -> None:
    gone = PrivateName(1, "asgiref", "asgiref.sync:SyncToAsync", "no_such_thing")
    assert _problem(gone) == "is gone"
    message = _message(gone, "is gone")
    assert message.startswith(
        f"asgiref {version('asgiref')}: asgiref.sync.SyncToAsync.no_such_thing is gone."
    )
    assert "Trick 1 of agentsite/internals.py, the database thread" in message
    assert "AGENTSITE_STOCK_STACK=1" in message

    handler = "django.core.handlers.asgi:ASGIHandler"
    more = PrivateName(4, "django", handler, "read_body", parameters=("receive", "limit"))
    assert _problem(more) == "now takes (receive); the trick passes (receive, limit)"
    overridden = PrivateName(
        3, "daphne", "daphne.ws_protocol:WebSocketProtocol", "serverClose", (), ("reason",), True
    )
    assert _problem(overridden) == "is now called with (code=None); the trick's override takes (reason)"
    unused = PrivateName(
        5, "autobahn", "autobahn.websocket.protocol", "pformat", used_by=f"{handler}.read_body"
    )
    assert (
        _problem(unused)
        == "is no longer used by django.core.handlers.asgi.ASGIHandler.read_body, as the trick assumes"
    )
    moved = PrivateName(6, "openai", "openai._no_such_module:BaseClient", "_build_request")
    assert (_problem(moved) or "").startswith(
        "cannot be looked up: openai._no_such_module.BaseClient is gone"
    )
    unset = PrivateName(
        7, "autobahn", "daphne.ws_protocol:WebSocketProtocol", "_noSuchSetting", kind="instance"
    )
    assert _problem(unset) == "is no longer set on a WebSocketProtocol once made"


# -- the list is complete ----------------------------------------------------------------------------------

# Documented API of the libraries that internals.py also uses (the list holds the others).
DOCUMENTED = frozenset(
    {
        "request_started",  # django.core.signals
        "request_finished",
        "send",  # a Signal's
        "asend",
        "get_global_log_level",  # txaio
        "scope",  # a Channels consumer's
        "channel_layer",
        "disconnect",
        "get",  # a ContextVar's (the standard library's)
        "submit",  # an Executor's
    }
)


def _library_bound_names(tree: ast.Module) -> set[str]:
    """The names internals.py binds to the libraries' modules and classes by importing them."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {a.asname or a.name for a in node.names if a.name.split(".")[0] in LIBRARIES}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            bound |= {a.asname or a.name for a in node.names}
    return bound


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def test_every_name_of_a_library_that_internals_uses_without_a_promise_is_listed() -> None:
    """Every name internals.py takes from the libraries — an `_` name anywhere (also through getattr), an
    attribute of a library's module or class, a name imported from a library's private module, and what
    its subclasses of library classes use of their bases — is in agentsite/private_names.py, or is
    documented API (DOCUMENTED above)."""
    tree = ast.parse(Path(internals.__file__).read_text())
    library = _library_bound_names(tree)
    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    ours = {n.name for n in ast.walk(tree) if isinstance(n, functions)} | _own_attributes(tree)
    ours |= {
        t.id
        for n in tree.body
        if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in ast.walk(n)
        if isinstance(t, ast.Name)
    }
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            root = _root(node)
            if isinstance(root, ast.Name) and root.id in library:
                used.add(node.attr)  # module.X, Class.X, module.Class.X
            elif node.attr.startswith("_"):
                used.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
        ):
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                used.add(str(node.args[1].value))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            if any(part.startswith("_") for part in node.module.split(".")):
                used |= {a.name for a in node.names}
        elif isinstance(node, ast.ClassDef) and any(_is_library(base, library) for base in node.bases):
            used |= _inherited_names_used(node)
    listed = {e.name for e in PRIVATE_NAMES} | {e.owner.split(":")[-1].split(".")[-1] for e in PRIVATE_NAMES}
    unlisted = {name for name in used - listed - ours - DOCUMENTED if not name.startswith("__")}
    assert unlisted == set(), (
        f"add to agentsite/private_names.py (or to DOCUMENTED, if documented): {unlisted}"
    )


def _is_library(base: ast.expr, library: set[str]) -> bool:
    root = _root(base)
    return isinstance(root, ast.Name) and root.id in library


def _own_attributes(tree: ast.Module) -> set[str]:
    """`_` attributes internals.py assigns on `self` that no library class of its classes' bases has."""
    assigned = {
        target.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }
    bases = {cls for obj in vars(internals).values() if isinstance(obj, type) for cls in obj.__mro__}
    theirs = [cls for cls in bases if cls.__module__.split(".")[0] in LIBRARIES]
    return {name for name in assigned if name.startswith("_") and not any(hasattr(c, name) for c in theirs)}


def _inherited_names_used(cls: ast.ClassDef) -> set[str]:
    """What a subclass of a library class uses of itself (`self.X`, `super().X`) that it does not define."""
    defined = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    defined |= {
        t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    used = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute):
            value = node.value
            on_self = isinstance(value, ast.Name) and value.id == "self" and node.attr not in defined
            on_super = (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super"
            )
            if on_self or on_super:
                used.add(node.attr)
    return used


# -- what the names still mean ------------------------------------------------------------------------------


def test_the_shared_database_thread_is_one_thread() -> None:
    assert SyncToAsync.single_thread_executor._max_workers == 1  # trick 1 hands it batches, in order
    assert list(inspect.signature(AsyncConsumer.__call__).parameters) == ["self", "scope", "receive", "send"]
    assert internals.channels_consumer.get_handler_name({"type": "websocket.receive"}) == "websocket_receive"


async def test_outside_a_sync_caller_asgiref_would_use_the_shared_thread() -> None:
    assert internals.asgiref_picks_another_thread(asyncio.get_running_loop()) is False


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


def _open_daphne_socket() -> tuple[Any, Any]:
    """A daphne WebSocket protocol, made by our factory as `serve` makes it, open, and its `send`."""
    protocol = daphne_socket(internals.ContractWebSocketFactory(object, server=None))
    return protocol, functools.partial(lambda proto, message: None, protocol)


def test_a_burst_of_frames_is_written_as_autobahn_writes_each_frame() -> None:
    """Trick 7: the frames of a burst, written at once, are byte for byte what autobahn's sendMessage writes
    for each (short, 16-bit and 64-bit lengths, non-ASCII text)."""
    texts = ['{"type":"delta","content":"hé"}', "x" * 126, "y" * 65_535, "z" * 70_000, "✓" * 50]
    ours, send = _open_daphne_socket()
    theirs, _ = _open_daphne_socket()

    assert internals.write_text_frames(send, texts) is True
    for text in texts:
        theirs.sendMessage(text.encode("utf-8"), False)
    assert ours.transport.value() == theirs.transport.value()


def test_a_burst_goes_frame_by_frame_where_autobahn_would_not_write_it_as_is() -> None:
    protocol, send = _open_daphne_socket()
    protocol.maxMessagePayloadSize = 10
    assert internals.write_text_frames(send, ["short", "longer than ten"]) is False
    protocol.maxMessagePayloadSize = 0
    protocol.state = protocol.STATE_CLOSING
    assert internals.write_text_frames(send, ["a", "b"]) is False
    assert internals.write_text_frames(lambda message: None, ["a", "b"]) is False  # not daphne's send
    assert protocol.transport.value() == b""
