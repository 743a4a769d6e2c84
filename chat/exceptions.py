"""Domain errors of the chat app (kinds of agentsite.exceptions.DomainError); translated only at the edges."""

from __future__ import annotations

from agentsite.exceptions import DomainError


class ChatError(DomainError):
    pass


class SessionNotFound(ChatError):
    code = "not_found"
    status = 404


class SessionClosed(ChatError):
    code = "session_closed"
    status = 409


class SessionExists(ChatError):
    code = "session_exists"
    status = 409


class AgentNotFound(ChatError):
    code = "not_found"
    status = 404
