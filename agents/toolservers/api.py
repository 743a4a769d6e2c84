"""REST for tool servers per agent (docs/protocol.md §2 "ACP runners", "MCP servers"): the list, and one
server's read, create-or-replace (`PUT`) and delete.

Site configuration: readable by every user (secret values masked), writable by staff; every write is in
the audit trail (each app `track`s its model, audit/tracking.py). An app subclasses the two
views with its store, its serializers and its words, and describes them with `list_schema` and
`detail_schema`.
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.authentication import request_user
from agents.api import AGENT_NOT_FOUND, STAFF_ONLY, AgentConfigApi
from agents.models import Agent
from agents.toolservers.models import ToolServer
from agents.toolservers.services import SecretKeepError, ToolServerStore
from agentsite.errors import ApiError
from agentsite.openapi import errors
from agentsite.validation import invalid


# Each app's views name their store (its `noun` is the URL's name for one) and input serializer; the list
# and detail views also what their schema says (`operation`, the operation ids' prefix, `answer` and, for
# the detail, `example`), described when the app's class is made. (A comment: a docstring here would
# become the description of every operation in the document.)
class ToolServerApi(AgentConfigApi):
    store: ToolServerStore[Any]
    input_serializer: type[serializers.Serializer]
    operation: str
    answer: type[serializers.Serializer]

    @property
    def kind(self) -> str:
        return self.store.noun

    def _server(self, agent: Agent, name: str) -> ToolServer:
        found: ToolServer | None = self.store.get(agent=agent, name=name)
        if found is None:
            raise self._not_found(agent, name)
        return found

    def _not_found(self, agent: Agent, name: str) -> ApiError:
        return ApiError(404, "not_found", f"{self.store.label} {name} not found for agent {agent.name}.")


class ToolServerListApi(ToolServerApi):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        extend_schema_view(**list_schema(cls.operation, cls.answer))(cls)

    def get(self, request: Request, name: str) -> Response:
        return Response({f"{self.kind}s": self.store.list(agent=self._agent(name))})


class ToolServerDetailApi(ToolServerApi):
    example: tuple[str, dict[str, Any]]  # a PUT body, and what it shows

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        store, request = cls.store, cls.input_serializer
        schema = detail_schema(
            cls.operation,
            noun=store.noun,
            what=store.label,
            answer=cls.answer,
            request=request,
            example=cls.example,
        )
        extend_schema_view(**schema)(cls)

    def get(self, request: Request, name: str, **server: str) -> Response:
        return Response(self._server(self._agent(name), server[self.kind]).to_dict())  # type: ignore[attr-defined]

    def put(self, request: Request, name: str, **server: str) -> Response:
        agent = self._agent(name)
        named = self._named(self.kind, server[self.kind])
        data = self.input_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            stored = self.store.upsert(agent=agent, name=named, data=data.validated_data)
        except SecretKeepError as exc:
            raise invalid({exc.field: [str(exc)]}) from None
        return Response(stored.to_dict())

    def delete(self, request: Request, name: str, **server: str) -> Response:
        agent = self._agent(name)
        if not self.store.delete(agent=agent, name=server[self.kind]):
            raise self._not_found(agent, server[self.kind])
        return Response(status=204)


class ToolServerTestApi(ToolServerApi):
    """Start the server apart from any chat and ask it what its protocol's Test asks (`probe`, the dotted
    path of a function (agent, server, user) → answer, imported on first use: it may load an SDK). Staff
    only: it starts a process."""

    probe: str
    test_description: str | None = None  # the operation's description (else the view's docstring)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        responses = {200: cls.answer, **not_found(cls.store.label), **errors({403: STAFF_ONLY})}
        post = extend_schema(
            operation_id=f"{cls.operation}_test",
            request=None,
            description=cls.test_description,
            responses=responses,
        )
        extend_schema_view(post=post)(cls)

    def post(self, request: Request, name: str, **server: str) -> Response:
        agent = self._agent(name)
        found = self._server(agent, server[self.kind])
        return Response(import_string(self.probe)(agent=agent, server=found, user=request_user(request)))


def not_found(what: str) -> dict[int, Any]:
    """The 404 of a server's URL (`what`: its label, "Runner", "MCP server")."""
    return errors({404: f"not_found: no such agent, or no such {_lower(what)} of it"})


def _lower(label: str) -> str:
    """A label within a sentence: "Runner" → "runner", "MCP server" stays."""
    return label if label[:2].isupper() else label[:1].lower() + label[1:]


def list_schema(operation: str, answer: type[serializers.Serializer]) -> dict[str, Any]:
    """`extend_schema_view` arguments of a list view (`operation`: the operation ids' prefix)."""
    return {
        "get": extend_schema(operation_id=f"{operation}_list", responses={200: answer, **AGENT_NOT_FOUND})
    }


def detail_schema(
    operation: str,
    *,
    noun: str,
    what: str,
    answer: type[serializers.Serializer],
    request: type[serializers.Serializer],
    example: tuple[str, dict[str, Any]],
) -> dict[str, Any]:
    """`extend_schema_view` arguments of a detail view (`noun`: how its description names one, `what`: its
    label, for the 404)."""
    missing = not_found(what)
    return {
        "get": extend_schema(operation_id=f"{operation}_retrieve", responses={200: answer, **missing}),
        "put": extend_schema(
            operation_id=f"{operation}_put",
            examples=[OpenApiExample(example[0], example[1], request_only=True)],
            description=f"Creates or replaces the {noun}; a {noun} name is 1-64 of `[A-Za-z0-9_-]`.",
            request=request,
            responses={
                200: answer,
                **AGENT_NOT_FOUND,
                **errors({400: "invalid: `fields` names each problem", 403: STAFF_ONLY}),
            },
        ),
        "delete": extend_schema(
            operation_id=f"{operation}_delete", responses={204: None, **missing, **errors({403: STAFF_ONLY})}
        ),
    }
