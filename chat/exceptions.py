"""Domain errors of the chat app; translated to HTTP statuses / error frames only at the edges."""

from __future__ import annotations


class ChatError(Exception):
    code = "error"
    status = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


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
