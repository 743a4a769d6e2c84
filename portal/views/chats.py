"""Portal chat pages: the session list, a new (draft) chat and the chat view (static/js/chat/ does the rest).

Writes (messages, rename, archive, delete, files) go through the REST API and the socket from the browser,
so the portal has no second code path for them. "New chat" stores nothing: the draft page creates its
session with the first message it sends (static/js/chat/main.js), so empty chats never pile up.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.http import require_GET

from agents.models import Agent
from agents.services import model_choice_for, models_allowed
from chat.exceptions import ChatError
from chat.inputs import MAX_CONTENT_CHARS
from chat.models import Session
from chat.services import session_get_for_user, session_list_for_user
from portal.access import AuthenticatedHttpRequest

SIDEBAR_SESSIONS = 100
APPROVAL_MODES = (
    ("ask", "Ask first"),
    ("full_access", "Full access"),
    ("read_only", "Read only"),
)


def _sidebar(request: AuthenticatedHttpRequest) -> QuerySet[Session]:
    """Recent activity first; archived chats are behind the list's switch (fetched from the API)."""
    recent = session_list_for_user(user=request.user).filter(archived_at__isnull=True)
    return recent.order_by("-updated_at", "-id")[:SIDEBAR_SESSIONS]


def _models(agent_name: str) -> dict[str, Any]:
    """The header's model picker: the models the agent may use (the one it uses by default first)."""
    agent = Agent.objects.select_related("provider").filter(name=agent_name).first()
    choice = model_choice_for(agent=agent)
    models = [name for name in models_allowed(agent=agent, choice=choice) if name and name != "*"]
    return {"models": models, "default_model": choice.model}


def _chat_context(
    request: AuthenticatedHttpRequest, agent_name: str, session: Session | None
) -> dict[str, Any]:
    return {
        "session": session,
        "agent_name": agent_name,
        "sessions": _sidebar(request),
        "approval_modes": APPROVAL_MODES,
        "max_upload": settings.AGENTSITE_MAX_UPLOAD_BYTES,
        # What a message may hold, checked by the composer before it sends (docs/protocol.md §3.2 and
        # the frame limit AGENTSITE_WS_MAX_FRAME_BYTES): a longer text stays in the composer.
        "max_content": MAX_CONTENT_CHARS,
        "max_frame": settings.AGENTSITE_WS_MAX_FRAME_BYTES,
        "nav": "chats",
        **_models(agent_name),
    }


@login_required
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    context = {"sessions": _sidebar(request), "agents": Agent.objects.order_by("name"), "nav": "chats"}
    return render(request, "chat/home.html", context)


@login_required
@require_GET
def new_chat(request: AuthenticatedHttpRequest) -> HttpResponse:
    agent_name = request.GET.get("agent") or "default"
    if agent_name != "default" and not Agent.objects.filter(name=agent_name).exists():
        raise Http404(f"Agent {agent_name} not found")
    return render(request, "chat/chat.html", _chat_context(request, agent_name, None))


@login_required
def chat(request: AuthenticatedHttpRequest, session_id: str) -> HttpResponse:
    try:
        session = session_get_for_user(user=request.user, session_id=session_id)
    except ChatError:
        raise Http404("Session not found") from None
    return render(request, "chat/chat.html", _chat_context(request, session.agent_name, session))


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages without an icon link (the API docs, the admin)."""
    return redirect(static("favicon.svg"), permanent=True)
