"""What the speed tricks (agentsite/internals.py, and agentsite/db.py's hot-path SQL) use of their libraries
that the libraries do not promise.

One entry per name: which trick uses it, the package whose upgrade may change it, where it lives, and
what the trick relies on — the parameters it passes (or, for a method it overrides, exactly the ones the
library passes it), and the library's own function that must still use the name for the trick to hold
(e.g. daphne's `Server.run` must still look up the module's `WebSocketFactory`, which `serve` replaces).
tests/test_internals.py checks every entry against the installed packages, one test each, and checks
that every such name internals.py uses is listed here. Plain data: importing this imports no library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TRICKS = {
    1: "the database thread (agentsite/db.py)",
    2: "the lean chat socket (LeanWebsocketConsumer)",
    3: "closing sockets with the codes the contract names (serve's daphne factory)",
    4: "one thread hop per HTTP request (OneHopASGIHandler)",
    5: "no debug work on a socket's handshake (autobahn's pformat)",
    6: "the streamed chat request of a provider, built once (SdkStreamRequest)",
    7: "a burst of frames in one write (write_text_frames)",
    8: "the hot-path SQL helpers of agentsite/db.py (insert_row, update_rows, select_row; on both stacks)",
}


@dataclass(frozen=True)
class PrivateName:
    trick: int
    package: str  # the distribution whose version decides it
    owner: str  # "module" or "module:Class" (or "module:Class.attribute")
    name: str
    # "attribute": the owner has it; "instance": an instance of the owner has it once made (and, for a
    # protocol, connected); "shared": set or read by the trick where the library sets or reads it (only
    # `used_by` is checked); "field": a field of a pydantic model the trick builds.
    kind: Literal["attribute", "instance", "shared", "field"] = "attribute"
    parameters: tuple[str, ...] | None = None  # of a callable, without `self`, in order
    overridden: bool = False  # the trick overrides it: the library calls ours with exactly `parameters`
    used_by: str = ""  # "module:Class.function" (or "module:function") that must still use the name

    def __str__(self) -> str:
        return f"{self.owner.replace(':', '.')}.{self.name}"


_ASGIREF_SYNC = "asgiref.sync"
_AUTOBAHN = "autobahn.websocket.protocol:WebSocketProtocol"
_DAPHNE_PROTOCOL = "daphne.ws_protocol:WebSocketProtocol"
_DAPHNE_FACTORY = "daphne.server:WebSocketFactory"
_ASGI_HANDLER = "django.core.handlers.asgi:ASGIHandler"
_OPENAI_CLIENT = "openai._base_client:BaseClient"

PRIVATE_NAMES: tuple[PrivateName, ...] = (
    # 1. the database thread: asgiref's shared thread, and the signs by which asgiref would pick another
    PrivateName(
        1,
        "asgiref",
        f"{_ASGIREF_SYNC}:SyncToAsync",
        "single_thread_executor",
        used_by=f"{_ASGIREF_SYNC}:SyncToAsync.__call__",
    ),
    PrivateName(
        1,
        "asgiref",
        f"{_ASGIREF_SYNC}:SyncToAsync",
        "threadlocal",
        used_by=f"{_ASGIREF_SYNC}:AsyncToSync.__call__",
    ),
    PrivateName(
        1,
        "asgiref",
        f"{_ASGIREF_SYNC}:SyncToAsync.threadlocal",
        "main_event_loop",
        kind="shared",
        used_by=f"{_ASGIREF_SYNC}:AsyncToSync.__call__",
    ),
    PrivateName(
        1,
        "asgiref",
        f"{_ASGIREF_SYNC}:SyncToAsync.threadlocal",
        "main_event_loop_pid",
        kind="shared",
        used_by=f"{_ASGIREF_SYNC}:AsyncToSync.__call__",
    ),
    PrivateName(
        1,
        "asgiref",
        f"{_ASGIREF_SYNC}:SyncToAsync",
        "thread_sensitive_context",
        used_by=f"{_ASGIREF_SYNC}:SyncToAsync.__call__",
    ),
    PrivateName(
        1,
        "asgiref",
        f"{_ASGIREF_SYNC}:AsyncToSync",
        "executors",
        used_by=f"{_ASGIREF_SYNC}:SyncToAsync.__call__",
    ),
    PrivateName(
        1,
        "asgiref",
        f"{_ASGIREF_SYNC}:AsyncToSync.executors",
        "current",
        kind="shared",
        used_by=f"{_ASGIREF_SYNC}:SyncToAsync.__call__",
    ),
    PrivateName(
        1,
        "asgiref",
        f"{_ASGIREF_SYNC}:AsyncToSync",
        "loop_thread_executors",
        used_by=f"{_ASGIREF_SYNC}:SyncToAsync.__call__",
    ),
    # 2. the lean chat socket: Channels' consumer entry point, replaced
    PrivateName(
        2, "channels", "channels.utils", "await_many_dispatch", parameters=("consumer_callables", "dispatch")
    ),
    PrivateName(2, "channels", "channels.consumer", "get_handler_name", parameters=("message",)),
    PrivateName(
        2,
        "channels",
        "channels.consumer:AsyncConsumer",
        "__call__",
        parameters=("scope", "receive", "send"),
        overridden=True,
    ),
    PrivateName(
        2, "channels", "channels.consumer:AsyncConsumer", "dispatch", parameters=("message",), overridden=True
    ),
    PrivateName(
        2,
        "channels",
        "channels.generic.websocket:AsyncWebsocketConsumer",
        "websocket_disconnect",
        parameters=("message",),
        overridden=True,
    ),
    PrivateName(
        2,
        "channels",
        "channels.consumer:AsyncConsumer",
        "base_send",
        kind="shared",
        used_by="channels.consumer:AsyncConsumer.send",
    ),
    # 3. closing sockets with the codes the contract names
    PrivateName(3, "daphne", "daphne.server", "WebSocketFactory", used_by="daphne.server:Server.run"),
    PrivateName(
        3,
        "daphne",
        _DAPHNE_PROTOCOL,
        "serverClose",
        parameters=("code",),
        overridden=True,
        used_by=f"{_DAPHNE_PROTOCOL}.handle_reply",
    ),
    PrivateName(
        3, "autobahn", _DAPHNE_PROTOCOL, "sendCloseFrame", parameters=("code", "reasonUtf8", "isReply")
    ),
    PrivateName(3, "autobahn", _DAPHNE_FACTORY, "resetProtocolOptions", parameters=(), overridden=True),
    PrivateName(
        3, "autobahn", _DAPHNE_FACTORY, "failByDrop", kind="instance", used_by=f"{_AUTOBAHN}._fail_connection"
    ),
    # 4. one thread hop per HTTP request
    PrivateName(
        4, "django", "django.core.handlers.base:BaseHandler", "load_middleware", parameters=("is_async",)
    ),
    PrivateName(
        4, "django", "django.core.handlers.base:BaseHandler", "get_response", parameters=("request",)
    ),
    PrivateName(4, "django", _ASGI_HANDLER, "read_body", parameters=("receive",)),
    PrivateName(4, "django", _ASGI_HANDLER, "create_request", parameters=("scope", "body_file")),
    PrivateName(4, "django", _ASGI_HANDLER, "send_response", parameters=("response", "send")),
    PrivateName(4, "django", _ASGI_HANDLER, "listen_for_disconnect", parameters=("receive",)),
    PrivateName(4, "django", _ASGI_HANDLER, "chunk_size"),
    PrivateName(4, "django", "django.core.handlers.asgi", "get_script_prefix", parameters=("scope",)),
    PrivateName(
        4,
        "django",
        "django.http:HttpResponseBase",
        "_handler_class",
        kind="shared",
        used_by=f"{_ASGI_HANDLER}.run_get_response",
    ),
    # 5. no debug work on a socket's handshake
    PrivateName(
        5, "autobahn", "autobahn.websocket.protocol", "pformat", used_by=f"{_AUTOBAHN}._connectionMade"
    ),
    # 6. the streamed chat request of a provider, built once
    PrivateName(6, "openai", _OPENAI_CLIENT, "_build_request", parameters=("options", "retries_taken")),
    PrivateName(6, "openai", _OPENAI_CLIENT, "_should_retry", parameters=("response",)),
    PrivateName(
        6,
        "openai",
        _OPENAI_CLIENT,
        "_calculate_retry_timeout",
        parameters=("remaining_retries", "options", "response_headers"),
    ),
    PrivateName(6, "openai", _OPENAI_CLIENT, "_make_status_error_from_response", parameters=("response",)),
    PrivateName(6, "openai", _OPENAI_CLIENT, "_idempotency_key", parameters=()),
    PrivateName(
        6,
        "openai",
        _OPENAI_CLIENT,
        "_idempotency_header",
        kind="instance",
        used_by=f"{_OPENAI_CLIENT}._build_headers",
    ),
    PrivateName(
        6, "openai", "openai._base_client:AsyncAPIClient", "_prepare_options", parameters=("options",)
    ),
    PrivateName(6, "openai", "openai._base_client", "timeout_exceptions", parameters=()),
    PrivateName(6, "openai", "openai._base_client", "request_exceptions", parameters=()),
    PrivateName(6, "openai", "openai._models:FinalRequestOptions", "construct"),
    PrivateName(6, "openai", "openai._models:FinalRequestOptions", "method", kind="field"),
    PrivateName(6, "openai", "openai._models:FinalRequestOptions", "url", kind="field"),
    PrivateName(6, "openai", "openai._models:FinalRequestOptions", "json_data", kind="field"),
    PrivateName(6, "openai", "openai:AsyncOpenAI", "custom_auth"),
    PrivateName(6, "openai", "openai:AsyncOpenAI", "_client", kind="instance"),
    # 7. a burst of frames in one write: daphne's `send`, and the settings under which autobahn writes a
    # frame as it is
    PrivateName(
        7,
        "daphne",
        "daphne.server:Server",
        "handle_reply",
        parameters=("protocol", "message"),
        used_by="daphne.server:Server.create_application",
    ),
    PrivateName(7, "autobahn", _DAPHNE_PROTOCOL, "STATE_OPEN"),
    PrivateName(
        7, "autobahn", _DAPHNE_PROTOCOL, "state", kind="instance", used_by=f"{_AUTOBAHN}.sendMessage"
    ),
    PrivateName(
        7, "autobahn", _DAPHNE_PROTOCOL, "transport", kind="instance", used_by=f"{_AUTOBAHN}.sendData"
    ),
    PrivateName(
        7, "autobahn", _DAPHNE_PROTOCOL, "factory", kind="instance", used_by=f"{_AUTOBAHN}.sendFrame"
    ),
    PrivateName(
        7,
        "autobahn",
        _DAPHNE_PROTOCOL,
        "_perMessageCompress",
        kind="instance",
        used_by=f"{_AUTOBAHN}.sendMessage",
    ),
    PrivateName(
        7, "autobahn", _DAPHNE_PROTOCOL, "send_queue", kind="instance", used_by=f"{_AUTOBAHN}.sendData"
    ),
    PrivateName(
        7,
        "autobahn",
        _DAPHNE_PROTOCOL,
        "autoFragmentSize",
        kind="instance",
        used_by=f"{_AUTOBAHN}.sendMessage",
    ),
    PrivateName(
        7, "autobahn", _DAPHNE_PROTOCOL, "logFrames", kind="instance", used_by=f"{_AUTOBAHN}.sendFrame"
    ),
    PrivateName(
        7, "autobahn", _DAPHNE_PROTOCOL, "logOctets", kind="instance", used_by=f"{_AUTOBAHN}.sendData"
    ),
    PrivateName(
        7, "autobahn", _DAPHNE_PROTOCOL, "trackedTimings", kind="instance", used_by=f"{_AUTOBAHN}.sendMessage"
    ),
    PrivateName(
        7,
        "autobahn",
        _DAPHNE_PROTOCOL,
        "maxMessagePayloadSize",
        kind="instance",
        used_by=f"{_AUTOBAHN}.sendMessage",
    ),
    PrivateName(
        7, "autobahn", _DAPHNE_FACTORY, "maskServerFrames", kind="instance", used_by=f"{_AUTOBAHN}.sendFrame"
    ),
    # 8. SQL without the ORM's query building: what the ORM's compiler does to each column it reads (not a
    # trick of internals.py, and not switched off: plain Django otherwise, on both stacks)
    PrivateName(8, "django", "django.db.models:Field", "get_col", parameters=("alias",)),
    PrivateName(8, "django", "django.db.models:Field", "get_default", parameters=()),
    PrivateName(
        8,
        "django",
        "django.db.backends.base.operations:BaseDatabaseOperations",
        "get_db_converters",
        parameters=("expression",),
    ),
    PrivateName(
        8, "django", "django.db.models.expressions:Col", "get_db_converters", parameters=("connection",)
    ),
)
