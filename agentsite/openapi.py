"""The OpenAPI document's shared parts (docs/protocol.md §2), written once for every app's views.

- `Error`: the one error body, `{"error": {"code", "message", "fields"?}}` (agentsite/errors.py writes it);
  `errors({404: "...", 409: "..."})` gives a view's own error answers with that body.
- `page_of(Item)` and `PAGE_PARAMETERS`: the paginated list envelope `{results, next}` and `limit`/`cursor`.
- `add_common_responses`: a postprocessing hook that gives every operation the errors that any of them can
  answer whatever the view does (authentication, CSRF, body parsing, throttling, an unavailable database),
  so a view never lists them itself and a new endpoint has them without trying.
- `PydanticRequestExtension`: request bodies validated by a pydantic model (chat/inputs.py, cron/specs.py)
  are described by that model, in its validation form: one rule for what is accepted and what is documented.
  (Registered by being defined: every API module imports this one, so it is there before any schema is built,
  and nothing else pays for drf-spectacular's imports.)
"""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.contrib.pydantic import PydanticExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema_field, inline_serializer
from rest_framework import serializers

from agentsite.pagination import CursorPage
from agentsite.query import FLAG_FALSE, FLAG_TRUE


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="A stable snake_case code, e.g. `invalid`, `not_found`.")
    message = serializers.CharField(help_text="A sentence for people.")
    # `fields` is also Serializer.fields (a property); DRF collects declared fields before it (metaclass).
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Validation errors (400): field name or dotted path → its problems.",
    )


class ErrorSerializer(serializers.Serializer):
    """Every error answer of the API (docs/protocol.md §2)."""

    error = ErrorDetailSerializer()

    class Meta:
        ref_name = "Error"


def errors(described: dict[int, str]) -> dict[int, OpenApiResponse]:
    """A view's own error answers: status → a sentence naming its codes (`"not_found: no such session"`)."""
    return {status: OpenApiResponse(ErrorSerializer, description=text) for status, text in described.items()}


def page_of(item: type[Any], name: str | None = None) -> serializers.Serializer:
    """The envelope of a paginated list: `{"results": [item, ...], "next": "<cursor>" | null}`; `item` is a
    serializer or a pydantic model."""
    item_name = name or item.__name__.removesuffix("Serializer")
    if issubclass(item, serializers.BaseSerializer):
        results: serializers.Field = item(many=True)
    else:
        field = extend_schema_field(item)(type(f"{item_name}Field", (serializers.JSONField,), {}))
        results = serializers.ListField(child=field())
    return inline_serializer(
        f"{item_name}Page",
        {
            "results": results,
            "next": serializers.CharField(
                allow_null=True, help_text="The `cursor` of the next page; null on the last one."
            ),
        },
    )


PAGE_PARAMETERS = [
    OpenApiParameter(param["name"], param["schema"], description=param["description"])
    for param in CursorPage().get_schema_operation_parameters(None)
]


def flag_parameter(name: str, description: str) -> OpenApiParameter:
    """A true/false query parameter as agentsite.query.query_flag reads it: its spellings in any case
    (a pattern: an enum would refuse `TRUE`, which the server takes), empty as if absent."""
    any_case = (
        "".join(f"[{c.upper()}{c}]" if c.isalpha() else c for c in word) for word in (*FLAG_TRUE, *FLAG_FALSE)
    )
    pattern = f"^({'|'.join(any_case)})?$"
    return OpenApiParameter(
        name, {"type": "string", "pattern": pattern}, description=f"{description} (`true|false`)"
    )


# -- errors every operation can get (a postprocessing hook: SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]) --

_ERROR_REF = {"$ref": "#/components/schemas/Error"}
_UNSAFE = {"post", "put", "patch", "delete"}
COMMON_ERRORS = {
    "401": "unauthorized: no API key or browser session, or a key that is wrong, revoked or expired.",
    "403": "forbidden: the browser session's CSRF check failed, or the caller may not do this.",
    "400": "invalid_json: the body is not JSON (or nests deeper than 64 levels); invalid: a field or a query "
    "parameter is wrong.",
    "413": "too_large: the body is larger than AGENTSITE_MAX_BODY_BYTES.",
    "415": "unsupported_media_type: the body is not `application/json`.",
    "429": "rate_limited: too many requests; `Retry-After` says when to try again.",
    "503": "unavailable: the database or Redis does not answer; try again in a moment.",
}


def _common_statuses(method: str, operation: dict[str, Any]) -> list[str]:
    authenticated = any(requirement for requirement in operation.get("security", [{}]))
    statuses = ["429"]
    if authenticated:
        statuses += ["401", "503"]
        if method in _UNSAFE:
            statuses.append("403")
    if any(parameter["in"] in {"query", "header"} for parameter in operation.get("parameters", [])):
        statuses.append("400")
    content = operation.get("requestBody", {}).get("content", {})
    if "application/json" in content:
        statuses += ["400", "413", "415"]
    return statuses


def add_common_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    for methods in result.get("paths", {}).values():
        for method, operation in methods.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for status in _common_statuses(method, operation):
                responses.setdefault(
                    status,
                    {
                        "description": COMMON_ERRORS[status],
                        "content": {"application/json": {"schema": _ERROR_REF}},
                    },
                )
            operation["responses"] = dict(sorted(responses.items()))
    return result


# -- request bodies described by their pydantic models --


class PydanticRequestExtension(PydanticExtension):
    """drf-spectacular's pydantic support, with a request body in pydantic's *validation* form (what the
    server accepts: defaults make a field optional) and a PATCH body with nothing required (drf-spectacular
    names it "Patched…", as it does for serializers)."""

    priority = 1

    def get_name(self, auto_schema: Any, direction: str) -> str:
        # drf-spectacular marks a PATCH body by setting `partial` on what it was given: here the model class
        # itself, which would keep it for every later document (each POST body named "Patched…" too).
        # Take it back, and name the PATCH body here.
        if "partial" in vars(self.target):
            delattr(self.target, "partial")
        name = super().get_name(auto_schema, direction)
        return f"Patched{name}" if direction == "request" and auto_schema.method == "PATCH" else name

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        from pydantic.json_schema import model_json_schema

        mode: Literal["validation", "serialization"] = "serialization"
        if direction == "request":
            mode = "validation"
        schema = model_json_schema(self.target, ref_template="#/components/schemas/{model}", mode=mode)
        for sub_name, sub_schema in schema.pop("$defs", {}).items():
            component = ResolvedComponent(
                name=sub_name, type=ResolvedComponent.SCHEMA, object=sub_name, schema=sub_schema
            )
            auto_schema.registry.register_on_missing(component)
        if direction == "request" and auto_schema.method == "PATCH":
            schema.pop("required", None)
        return schema


# -- the document's description: what a REST document cannot hold (the WebSocket) --

API_DESCRIPTION = """\
REST API of agentsite (docs/protocol.md is the contract). Authenticate with `Authorization: Bearer <api_key>`
or a browser session (CSRF applies to unsafe methods). Every error answers
`{"error": {"code": "<snake_case>", "message": "<sentence>", "fields"?: {...}}}`. Lists are paginated with
`?limit=` (1-500, default 50) and `?cursor=` (the `next` of the previous page) and answer
`{"results": [...], "next": "<cursor>" | null}`.

## WebSocket: `/api/v1/chat/ws/{session_id}`

Not an HTTP operation, so described here (docs/protocol.md §3). Connect with `Authorization: Bearer <key>` on
the upgrade request, or `?ticket=` (from `POST /api/v1/auth/ws-ticket`: one use, 60 s) when the client
cannot set headers — both keep the key out of URLs and access logs —, the browser session cookie (from an
allowed `Origin`), or `?api_key=<key>` (still accepted, not recommended); `?since=SEQ` replays every
retained event after SEQ (or sends `resync`); `?create=1` (with `agent_name=`, `title=` as for
`POST /chat/sessions`) creates the session when the user has none with that id: a chat in one round trip.
One JSON object per text frame; frames over `AGENTSITE_WS_MAX_FRAME_BYTES` close the socket with 1009.

- The server first sends `{"type": "connected", "session_id", "snapshot", "last_seq"}`, or an `error` and a
  close: `unauthorized` (4401), `not_found` (4404), `closed` (4410), `too_many_sockets` (4429: the user has
  `AGENTSITE_USER_MAX_SOCKETS` sockets and event streams open), `invalid` (4400: a `since` that is no
  integer); with `create`, also `session_exists` (4409), `invalid` and `limit_reached` (4400).
- Client frames: `ping`; `message {content, message_id?, steer?, config?, approval_mode?, model?}` (the body
  of `POST …/messages`); `steer {message_id}`; `remove {message_id}`; `cancel`;
  `confirmation_reply {confirmation_id, approved, option_id?}`. All but `ping` count against
  `AGENTSITE_WS_RATE`: past it a frame does nothing and gets `error rate_limited` with `retry_after`.
- Server events, each with a per-session `seq`: `message_status`, `delta`, `thinking`, `tool_call`,
  `tool_result`, `delegate_update`, `confirmation_request`, `confirmation_resolved`, `final_answer`,
  `result`; without one: `pong`, `resync {snapshot, last_seq}` and `error {code, message, message_id?,
  fields?}`,
  which goes to the socket whose frame caused it. A socket whose session cannot go on is closed with 1012
  (reconnect with `?since=`).

`GET /api/v1/chat/sessions/{session_id}/events` streams the same events as Server-Sent Events.
"""


def describe_api(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    result.setdefault("info", {})["description"] = API_DESCRIPTION
    return result
