"""Oracle reader: what a default Django deployment reads as the account name.

Served by Django's own development server stack (django.core.servers.basehttp,
which `manage.py runserver` uses and which is built on wsgiref.simple_server).

  /up/login       DRF APIView (default parsers), AuthTokenSerializer(data=request.data)
  /up/form-login  django.contrib.auth.forms.AuthenticationForm(request, data=request.POST)
  /up/hdr-login   request.META.get("HTTP_X_LOGIN"), cleaned by forms.CharField().clean

Each answers {"account": "<the username passed to authenticate()>"} when
authentication was reached, else {"account": null, "why": "..."}.  The
username is recorded by RecordingBackend, the only entry of
AUTHENTICATION_BACKENDS, which returns None (no such user), so nothing needs a
database.
"""

import json
import socketserver
import sys
import threading

import django
from django.conf import settings

_recorded = threading.local()


class RecordingBackend:
    """Records the username Django hands to authentication; finds no user."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        calls = getattr(_recorded, "calls", None)
        if calls is not None:
            calls.append(username)
        return None

    def get_user(self, user_id):
        return None


settings.configure(
    DEBUG=False,
    SECRET_KEY="oracle-reader-not-secret",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=[
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "rest_framework",
        "rest_framework.authtoken",
    ],
    # startproject's middleware (less messages/clickjacking, which do not read
    # requests).  The views below are CSRF-exempt.
    MIDDLEWARE=[
        "django.middleware.security.SecurityMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
    ],
    # No database: the recording backend never touches one, and cookie-backed
    # sessions keep the session middleware off it too.
    DATABASES={},
    SESSION_ENGINE="django.contrib.sessions.backends.signed_cookies",
    AUTHENTICATION_BACKENDS=[__name__ + ".RecordingBackend"],
    USE_TZ=True,
)
django.setup()

from django import forms  # noqa: E402
from django.contrib.auth import authenticate  # noqa: E402
from django.contrib.auth.forms import AuthenticationForm  # noqa: E402
from django.core.exceptions import ValidationError  # noqa: E402
from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402
from rest_framework.authtoken.serializers import AuthTokenSerializer  # noqa: E402
from rest_framework.exceptions import APIException  # noqa: E402
from rest_framework.views import APIView  # noqa: E402


def _answer(status, account, why=None):
    body = {"account": account}
    if why is not None:
        body["why"] = why
    return HttpResponse(
        json.dumps(body, ensure_ascii=True),
        status=status,
        content_type="application/json",
    )


def _reading():
    _recorded.calls = []


def _result(why_if_not_reached, status=400):
    calls, _recorded.calls = _recorded.calls, None
    if not calls:
        return _answer(status, None, why_if_not_reached)
    username = calls[0]
    if not isinstance(username, str):
        return _answer(200, None, "username is a %s: %r" % (type(username).__name__, username))
    return _answer(200, username)


def _errors(errors):
    return "; ".join(
        "%s: %s" % (field, " ".join(str(m) for m in msgs))
        for field, msgs in errors.items()
    )


class DrfLogin(APIView):
    """DRF's token sign-in: AuthTokenSerializer validated from request.data."""

    def post(self, request):
        _reading()
        try:
            serializer = AuthTokenSerializer(data=request.data, context={"request": request})
            serializer.is_valid()
        except APIException as exc:
            # e.g. ParseError (400) for malformed JSON, UnsupportedMediaType (415)
            _recorded.calls = None
            return _answer(exc.status_code, None, "%s: %s" % (type(exc).__name__, exc.detail))
        return _result(_errors(serializer.errors))

    def handle_exception(self, exc):
        # Errors DRF raises outside post() (authentication, 405, ...) still
        # answer in the reader's format.
        response = super().handle_exception(exc)
        _recorded.calls = None
        why = "%s: %s" % (type(exc).__name__, getattr(exc, "detail", exc))
        return _answer(response.status_code, None, why)


@csrf_exempt
def form_login(request):
    _reading()
    try:
        form = AuthenticationForm(request, data=request.POST)
        form.is_valid()
    except Exception as exc:  # e.g. TooManyFieldsSent, RequestDataTooBig
        _recorded.calls = None
        return _answer(400, None, "%s: %s" % (type(exc).__name__, exc))
    return _result(_errors(form.errors))


@csrf_exempt
def hdr_login(request):
    _reading()
    value = request.META.get("HTTP_X_LOGIN")
    if value is None:
        _recorded.calls = None
        return _answer(400, None, "no x-login header")
    try:
        username = forms.CharField().clean(value)
    except ValidationError as exc:
        _recorded.calls = None
        return _answer(400, None, "ValidationError: %s" % " ".join(exc.messages))
    authenticate(request, username=username, password=None)
    return _result("authenticate() not reached")


urlpatterns = [
    path("up/login", DrfLogin.as_view()),
    path("up/form-login", form_login),
    path("up/hdr-login", hdr_login),
]


def main(argv):
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: serve PORT", file=sys.stderr)
        return 2
    port = int(argv[1])
    # What runserver does (django.core.servers.basehttp.run, threading=True),
    # split so that "ready" is printed once the socket listens.
    server_cls = type("WSGIServer", (socketserver.ThreadingMixIn, WSGIServer), {})
    server_cls.daemon_threads = True
    httpd = server_cls(("127.0.0.1", port), WSGIRequestHandler, ipv6=False)
    httpd.set_app(get_wsgi_application())
    print("ready", flush=True)
    httpd.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
