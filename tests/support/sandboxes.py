"""Sandboxes and workspaces for tests of what tools start (agents/sandbox/).

`sandbox_of(mode)` builds the site's sandbox for a mode; a host without a working bubblewrap skips
the bubblewrap tests, unless AGENTSITE_REQUIRE_SERVICES is set (CI installs bubblewrap), where it fails.
`sandbox_workspace()` makes a workspace the way the server does (under the data dir, owned by the
sandbox's user), since a sandbox cannot bind a folder its user cannot reach (pytest's tmp_path is 0700).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agents.sandbox import Limits, Sandbox
from agents.sandbox.site import hand_over, make_sandbox, passage_to
from tests.conftest import services_required

_cache: dict[tuple[str, Limits | None], Sandbox] = {}


def sandbox_of(mode: str, limits: Limits | None = None) -> Sandbox:
    key = (mode, limits)
    if key not in _cache:
        try:
            _cache[key] = make_sandbox(mode, limits=limits)
        except ImproperlyConfigured as exc:
            if services_required():
                raise
            pytest.skip(f"no bubblewrap sandbox on this host: {exc}")
    return _cache[key]


@contextmanager
def sandbox_workspace() -> Iterator[Path]:
    folder = Path(settings.WORKSPACES_DIR) / f"test-{uuid.uuid4().hex}"
    passage_to(folder.parent)
    folder.mkdir()
    hand_over(folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def workspace_of(session_id: str) -> Path:
    """The workspace of a stored session, where the server puts it."""
    from agents.sandbox.site import workspace_dir
    from chat.models import Session

    user_id = Session.objects.values_list("user_id", flat=True).get(id=session_id)
    return workspace_dir(user_id=user_id, session_id=session_id)
