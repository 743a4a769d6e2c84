"""Domain errors of the cron app; translated to HTTP statuses only at the edges (cron/api.py)."""

from __future__ import annotations


class CronError(Exception):
    code = "error"
    status = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class JobNotFound(CronError):
    code = "not_found"
    status = 404


class InboxItemNotFound(CronError):
    code = "not_found"
    status = 404


class DeliveryError(CronError):
    """A run could not be delivered (target session gone, closed, someone else's): run status `error`."""

    code = "delivery_failed"
