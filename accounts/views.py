"""Account pages: first-run setup, login, logout, password change (templates: templates/registration/)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.lockout import LOCKED, RATE_LIMITED, lockout_response, lockout_seconds, login_rate_wait
from accounts.services import setup_needed, user_create_first_admin


class SetupForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    password = forms.CharField(widget=forms.PasswordInput, strip=False)
    password_again = forms.CharField(widget=forms.PasswordInput, strip=False, label="Password (again)")

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("password") != data.get("password_again"):
            raise forms.ValidationError("The two passwords differ.")
        if data.get("password"):
            validate_password(str(data["password"]))
        return data


@require_http_methods(["GET", "POST"])
def setup(request: HttpRequest) -> HttpResponse:
    """Create the first (admin) account. Once there is an account, the page sends visitors to log in."""
    if not setup_needed():
        return redirect("login")
    form = SetupForm(request.POST or None)
    if request.method == "POST":
        # docs/protocol.md §6.2, §6.6 (accounts/lockout.py): no password is checked here, so no failed
        # login either (a form that fails its own validation is none); only the per-address rate applies.
        wait = login_rate_wait(request)
        if wait:
            return lockout_response(
                request,
                username=request.POST.get("username", ""),
                seconds=wait,
                reason=RATE_LIMITED,
                template="registration/setup.html",
                context={"form": form},
            )
        if form.is_valid():
            try:
                user = user_create_first_admin(
                    username=form.cleaned_data["username"],
                    password=form.cleaned_data["password"],
                    email=form.cleaned_data["email"],
                )
            except PermissionError:
                return redirect("login")
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            return redirect("portal:home")
    return render(request, "registration/setup.html", {"form": form})


class LoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def dispatch(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
        if setup_needed():
            return redirect("setup")
        return super().dispatch(request, *args, **kwargs)


class LogoutView(auth_views.LogoutView):
    pass


class PasswordChangeView(auth_views.PasswordChangeView):
    """Any user changes their own password (the old one first, the validators of AUTH_PASSWORD_VALIDATORS).
    Django keeps this browser logged in (update_session_auth_hash); the user's other logins end, their
    sockets too (accounts/credentials.py, docs/protocol.md §6.2).

    The old password is guessed no faster than a login's (accounts/lockout.py): a wrong one counts as a
    failed login of the user from this address (audited, and locking the pair as five failed logins
    do), and while the pair or the address is locked, or past the per-address login rate, the form
    answers 429 with the wait."""

    template_name = "registration/password_change.html"

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.user.get_username()
        locked = lockout_seconds(request, username)
        wait = locked or login_rate_wait(request)
        if wait:
            return lockout_response(
                request,
                username=username,
                seconds=wait,
                reason=LOCKED if locked else RATE_LIMITED,
                template=self.template_name,
                context={"form": self.get_form()},
            )
        return super().post(request, *args, **kwargs)  # type: ignore[no-any-return]

    def form_invalid(self, form: Any) -> HttpResponse:
        if form.data.get("old_password") and "old_password" in form.errors:
            credentials = {"username": self.request.user.get_username()}
            user_login_failed.send(sender=__name__, credentials=credentials, request=self.request)
        return super().form_invalid(form)  # type: ignore[no-any-return]


class PasswordChangeDoneView(auth_views.PasswordChangeDoneView):
    template_name = "registration/password_change_done.html"
