"""The names this deployment uses in a Redis that others may share.

Several deployments (or test servers) may point at one Redis database. Session ids are chosen by clients
(`POST /chat/sessions {session_id}`, create-on-connect), so two deployments can hold sessions with the
same id: every Redis key of a session and every channel-layer name (settings: CHANNEL_LAYERS' `prefix`)
carries the deployment's prefix, settings.CACHE_PREFIX (its database, unless AGENTSITE_CACHE_PREFIX names
it). One deployment never reads another's leases, fences, events, watchers or turn slots, nor reaches its
processes.
"""

from __future__ import annotations

from django.conf import settings


def deployment_key(kind: str, name: object, deployment: str | None = None) -> str:
    """`agentsite:<deployment>:<kind>:<name>`; the deployment is this one's unless named."""
    return f"agentsite:{settings.CACHE_PREFIX if deployment is None else deployment}:{kind}:{name}"


def owner_key(session_id: str) -> str:
    """The session's lease: "<process id>|<fencing token>" (chat/live/cluster/ownership.py)."""
    return deployment_key("owner", session_id)


def fence_key(session_id: str) -> str:
    """The session's newest fencing token."""
    return deployment_key("fence", session_id)


def stream_key(session_id: str) -> str:
    """The session's replay stream (chat/live/cluster/relay.py)."""
    return deployment_key("events", session_id)


def floor_key(session_id: str) -> str:
    """The seq before the first event of the session's replay stream."""
    return deployment_key("events-floor", session_id)
