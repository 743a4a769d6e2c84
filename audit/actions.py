"""What an audit entry records (its `action`), as plain constants: Django-free code (a turn, its tools)
names them too. Each is described in docs/protocol.md (extensions, "Audit trail")."""

from __future__ import annotations

LOGIN = "auth.login"
LOGIN_FAILED = "auth.login_failed"
LOGOUT = "auth.logout"
KEY_CREATE = "key.create"
KEY_REVOKE = "key.revoke"
CONFIG_CREATE = "config.create"
CONFIG_UPDATE = "config.update"
CONFIG_DELETE = "config.delete"
APPROVAL_DECIDE = "approval.decide"
COMMAND_RUN = "command.run"
RUNNER_START = "runner.start"
SESSION_DELETE = "session.delete"
CRON_JOB_CREATE = "cron.job_create"
CRON_JOB_UPDATE = "cron.job_update"
CRON_JOB_DELETE = "cron.job_delete"
CRON_RUN = "cron.run"
AUDIT_PRUNE = "audit.prune"
QUOTA_EXCEEDED = "quota.exceeded"
LIMIT_HIT = "limit.hit"
ACTIONS = (
    LOGIN,
    LOGIN_FAILED,
    LOGOUT,
    KEY_CREATE,
    KEY_REVOKE,
    CONFIG_CREATE,
    CONFIG_UPDATE,
    CONFIG_DELETE,
    APPROVAL_DECIDE,
    COMMAND_RUN,
    RUNNER_START,
    SESSION_DELETE,
    CRON_JOB_CREATE,
    CRON_JOB_UPDATE,
    CRON_JOB_DELETE,
    CRON_RUN,
    AUDIT_PRUNE,
    QUOTA_EXCEEDED,
    LIMIT_HIT,
)
