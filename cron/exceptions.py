"""Domain errors of the cron app; translated to HTTP statuses only at the edges (cron/api.py)."""

from __future__ import annotations

from agentsite.exceptions import DomainError


class CronError(DomainError):
    pass


class JobNotFound(CronError):
    code = "not_found"
    status = 404


class InboxItemNotFound(CronError):
    code = "not_found"
    status = 404


class DeliveryError(CronError):
    """A run could not be delivered (target session gone, closed, someone else's): run status `error`."""

    code = "delivery_failed"
