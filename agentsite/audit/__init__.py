"""The audit trail (docs/protocol.md §6.4): who did what, when and from where, kept for staff.

One table (:class:`~agentsite.audit.models.AuditEntry`), written in the same transaction as the change it
records wherever there is one:

- :mod:`agentsite.audit.services`: `audit_record` (one entry), `audit_prune` (the retention), and
  `TurnAudit`, the sink a chat turn's tools and approvals write through (agents/tools/base.py `AuditSink`);
- :mod:`agentsite.audit.context`: who is acting and from which address (the request or socket at hand);
- :mod:`agentsite.audit.tracking`: every write of site configuration as a diff, secrets masked;
- :mod:`agentsite.audit.logins`: logins, failed logins and logouts (Django's signals);
- :mod:`agentsite.audit.limits`: per-user limits a user ran into, once per window (not one entry per refusal);
- :mod:`agentsite.audit.api` and :mod:`agentsite.audit.admin`: reading it (REST for staff, read-only admin).

Nothing here imports models at package import time: apps import it before Django is ready.
"""
