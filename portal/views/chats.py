"""Portal chat pages: the session list and the chat view (the socket does the rest, static/js/chat.js).

Writes (rename, close, messages) go through the REST API and the socket from the browser, so the portal
has no second code path for them.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agents.models import Agent
from chat.exceptions import ChatError
from chat.services import session_create, session_get_for_user, session_list_for_user
from portal.access import AuthenticatedHttpRequest

SIDEBAR_SESSIONS = 100


@login_required
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    sessions = session_list_for_user(user=request.user)[:SIDEBAR_SESSIONS]
    context = {"sessions": sessions, "agents": Agent.objects.order_by("name"), "nav": "chats"}
    return render(request, "chat/home.html", context)


@login_required
@require_POST
def new_chat(request: AuthenticatedHttpRequest) -> HttpResponse:
    agent_name = request.POST.get("agent_name") or "default"
    try:
        session = session_create(user=request.user, agent_name=agent_name)
    except ChatError as exc:
        raise Http404(exc.message) from None
    return redirect("portal:chat", session_id=session.id)


@login_required
def chat(request: AuthenticatedHttpRequest, session_id: str) -> HttpResponse:
    try:
        session = session_get_for_user(user=request.user, session_id=session_id)
    except ChatError:
        raise Http404("Session not found") from None
    sessions = session_list_for_user(user=request.user)[:SIDEBAR_SESSIONS]
    return render(request, "chat/chat.html", {"session": session, "sessions": sessions, "nav": "chats"})
