"""Access rules shared by the portal pages."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

View = Callable[..., HttpResponse]


class AuthenticatedHttpRequest(HttpRequest):
    """The request a `login_required` view gets: `user` is an account, never AnonymousUser.

    Annotation only (Django builds plain HttpRequests); it lets the type checker pass `request.user`
    to services that take a User without a cast in every view.
    """

    user: User


def staff_required(view: View) -> View:
    """Site configuration pages: log in first, then staff only (403 for others, not a login loop)."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied("Only staff can change the site configuration.")
        return view(request, *args, **kwargs)

    return wrapped
