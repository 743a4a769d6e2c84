"""The statuses a chat message row can have (`Message.status`, docs/protocol.md extensions "Messages"): one
list for the model's choices and its database constraint, the store, the live core and cron.

Django's enum type only (no settings, no app registry): the live core, plain asyncio otherwise, uses it too.
The values are what the rows hold and the API shows; the store's prepared SQL sends them as they are.
"""

from __future__ import annotations

from django.db.models import TextChoices


class MessageStatus(TextChoices):
    # A user message: pending (queued) → running → completed | cancelled | error | interrupted;
    # pending → steered (read by a running turn, then its outcome) | removed; pending → closed when the
    # session closes.
    PENDING = "pending"
    RUNNING = "running"
    STEERED = "steered"
    REMOVED = "removed"
    CLOSED = "closed"
    # How a turn (a user message) or a model step (an assistant row) ended; tool rows: completed or error.
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    # An assistant row while its model step streams (written at most once a second).
    STREAMING = "streaming"
