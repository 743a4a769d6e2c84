"""Logins, failed logins and logouts (docs/protocol.md §6.4), from Django's own signals: every way in — the
portal's login page, `/setup/`, the admin's login — sends them.

A failed login names the username that was tried (never the password: Django has cleansed it already) and,
when that account exists, the account as the entry's object; its `user` is null (nobody is signed in).
`locked_out` says that the attempt was refused without checking the password (accounts/lockout.py,
docs/protocol.md §6.2, §6.6): its username was locked from its address, or its address was; `rate_limited`
that its address sent too many login attempts (`login_refused`: the first refusal of each window).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed

from audit.actions import LOGIN, LOGIN_FAILED, LOGOUT
from audit.context import actor_of, client_address
from audit.services import audit_record


def connect() -> None:
    user_logged_in.connect(_logged_in, dispatch_uid="audit-login")
    user_login_failed.connect(_login_failed, dispatch_uid="audit-login-failed")
    user_logged_out.connect(_logged_out, dispatch_uid="audit-logout")


def _logged_in(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    audit_record(
        LOGIN,
        object_type="user",
        object_id=user.pk,
        summary=f"{user.get_username()} logged in",
        details={"path": getattr(request, "path", None)},
        actor=actor_of(user, client_address(request)),
    )


def _login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    model = get_user_model()
    tried = str(credentials.get(model.USERNAME_FIELD) or credentials.get("username") or "")
    _record_failure(request, tried, locked_out=refused_unchecked(request), rate_limited=False)


def refused_unchecked(request: Any) -> bool:
    """Whether axes refused this login attempt without checking the password (locked out). axes sets
    `axes_failures_since_start` when it counted an attempt's failure: that attempt was checked (and may
    just have reached the limit); a refused one was never checked. Here, not in lockout.py, because
    the failed login's entry needs it and lockout.py records through this module, not the other way round."""
    return bool(getattr(request, "axes_locked_out", False)) and (
        getattr(request, "axes_failures_since_start", 0) is None
    )


def login_refused(request: Any, username: str) -> None:
    """A login attempt refused unread because its address sent too many (accounts/lockout.py)."""
    _record_failure(request, username, locked_out=True, rate_limited=True)


def _record_failure(request: Any, tried: str, *, locked_out: bool, rate_limited: bool) -> None:
    model = get_user_model()
    tried = tried[:150]
    account = (
        model._default_manager.filter(**{model.USERNAME_FIELD: tried}).values_list("pk", flat=True).first()
    )
    audit_record(
        LOGIN_FAILED,
        object_type="user" if account is not None else "",
        object_id=account if account is not None else "",
        summary=f"failed login as {tried!r}",
        details={
            "username": tried,
            "path": getattr(request, "path", None),
            "locked_out": locked_out,
            "rate_limited": rate_limited,
        },
        actor=actor_of(None, client_address(request)),
    )


def _logged_out(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    if user is None:
        return  # nobody was logged in: nothing happened
    audit_record(
        LOGOUT,
        object_type="user",
        object_id=user.pk,
        summary=f"{user.get_username()} logged out",
        details={"path": getattr(request, "path", None)},
        actor=actor_of(user, client_address(request)),
    )
