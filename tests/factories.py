"""Factories for test data, and a small JSON client. Plain functions: the data is simple."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model

from accounts.services import api_key_create
from chat.models import Session


def user(username: str, *, is_staff: bool = False, password: str = "pw-for-tests-123") -> Any:
    User = get_user_model()
    obj = User.objects.create_user(username=username, password=password, is_staff=is_staff)
    return obj


def api_key(owner: Any, name: str = "test") -> str:
    _, secret = api_key_create(user=owner, name=name)
    return secret


def session(
    owner: Any, *, session_id: str | None = None, agent_name: str = "default", title: str = ""
) -> Session:
    from chat.services import session_create

    return session_create(user=owner, agent_name=agent_name, title=title, session_id=session_id)


class JsonClient:
    def __init__(self, client: Any, key: str | None):
        self.client = client
        self.headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}

    def _call(self, method: str, path: str, body: Any = None, raw: str | None = None) -> Any:
        kwargs: dict[str, Any] = dict(self.headers)
        if raw is not None:
            kwargs.update(data=raw, content_type="application/json")
        elif body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return getattr(self.client, method)(path, **kwargs)

    def get(self, path: str) -> Any:
        return self._call("get", path)

    def post(self, path: str, body: Any = None, *, raw: str | None = None) -> Any:
        return self._call("post", path, body if body is not None else ({} if raw is None else None), raw)

    def put(self, path: str, body: Any = None) -> Any:
        return self._call("put", path, body)

    def patch(self, path: str, body: Any = None, *, raw: str | None = None) -> Any:
        return self._call("patch", path, body, raw)

    def delete(self, path: str) -> Any:
        return self._call("delete", path)
