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


class TooManySockets(ChatError):
    """The user has AGENTSITE_USER_MAX_SOCKETS sockets and SSE streams open (docs/protocol.md §6.6): a socket
    gets this `error` and close 4429, an SSE request 429."""

    code = "too_many_sockets"
    status = 429

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"Too many open connections: this account has {limit} chat sockets and event streams open"
            " (AGENTSITE_USER_MAX_SOCKETS). Close some (other tabs, clients), then reconnect."
        )
        self.limit = limit
