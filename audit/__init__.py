"""The audit trail (docs/protocol.md §6.4): who did what, when and from where, kept for staff.

One table (:class:`~audit.models.AuditEntry`), written in the same transaction as the change it
records wherever there is one:

- :mod:`audit.services`: `audit_record` (one entry), `audit_prune` (the retention), and
  `TurnAudit`, the sink a chat turn's tools and approvals write through (agents/tools/base.py `AuditSink`);
- :mod:`audit.context`: who is acting and from which address (the request or socket at hand);
- :mod:`audit.tracking`: every write of site configuration as a diff, secrets masked;
- :mod:`audit.limits`: per-user limits a user ran into, once per window (not one entry per refusal);
- :mod:`audit.api` and :mod:`audit.admin`: reading it (REST for staff, read-only admin).

It imports only agentsite's kernel and security/ (the client address); the apps above record into it —
logins, failed logins and logouts from accounts/logins.py (docs/architecture.md).

Nothing here imports models at package import time: apps import it before Django is ready.
"""
