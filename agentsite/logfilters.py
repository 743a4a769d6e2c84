"""What the log keeps of a request a client got wrong: one line, never a traceback.

Django logs a `PermissionDenied` (403) and a `SuspiciousOperation` (400) with the exception attached
(`django.request`, `django.security.*`), so every ordinary refusal wrote a full traceback. A 4xx is the
client's business, not the server's: its record keeps its message and loses the traceback. A 5xx keeps
its traceback. Configured in settings' LOGGING (docs/deployment.md "Logs").
"""

from __future__ import annotations

import logging


class ClientErrorsWithoutTraceback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500 and record.exc_info:
            record.exc_info = None
            record.exc_text = None
        return True
