"""agentsite settings: one module, driven by environment variables (see README.md for the table).

Defaults give the embedded single-process setup (SQLite in AGENTSITE_DATA_DIR, in-memory channel
layer). DATABASE_URL / REDIS_URL switch to Postgres / channels-redis for the scaled setup.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from agentsite.datadir import private_data_dir
from agentsite.env import (
    env_bool,
    env_choice,
    env_fernet_keys,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_rate,
    env_str,
    parse_rate,
)
from agentsite.stack import STOCK_STACK

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
DATA_DIR = Path(env_str("AGENTSITE_DATA_DIR", str(BASE_DIR / "var"))).resolve()
WORKSPACES_DIR = DATA_DIR / "workspaces"
HOMES_DIR = DATA_DIR / "homes"
SQLITE_PATH = DATA_DIR / "agentsite.sqlite3"
# Readable by the server's own user only (docs/protocol.md §6.3): umask 077 from here on, and what earlier
# versions left open is closed.
private_data_dir(
    DATA_DIR,
    files=[
        SQLITE_PATH,
        *(SQLITE_PATH.with_name(SQLITE_PATH.name + suffix) for suffix in ("-wal", "-shm", "-journal")),
        DATA_DIR / "secret_key",
    ],
    folders=[WORKSPACES_DIR, HOMES_DIR, DATA_DIR / "runners"],
)


def _secret_key() -> str:
    """SECRET_KEY, or one generated into the data directory on first run (docs/deployment.md)."""
    configured = env_str("SECRET_KEY")
    if configured:
        return configured
    key_file = DATA_DIR / "secret_key"
    try:  # created 0600 in one step: never readable by others, not even for a moment
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        kept = key_file.read_text().strip()
        if not kept:
            raise ImproperlyConfigured(
                f"{key_file} is empty: delete it to generate a new secret key, or set SECRET_KEY."
            ) from None
        return kept
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(50))
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
# Old keys that still verify signatures, and whose derived key still decrypts stored secrets
# (security/encryption.py) while no AGENTSITE_SECRETS_KEY is set.
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", [])
# Unset: the loopback names serve listens on by default (debug or not); a public deployment names its own.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
AGENTSITE_ALLOWED_ORIGINS = env_list("AGENTSITE_ALLOWED_ORIGINS", [])
CSRF_TRUSTED_ORIGINS = AGENTSITE_ALLOWED_ORIGINS

AGENTSITE_AUTH = env_choice("AGENTSITE_AUTH", "required", ("required", "open"))
if AGENTSITE_AUTH == "open" and not DEBUG:
    raise ImproperlyConfigured(
        "AGENTSITE_AUTH=open is for development only and is refused when DEBUG is false."
    )

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served by the app itself, no CDN
    "channels",
    "axes",  # login lockout (accounts/lockout.py)
    "agentsite",  # project configuration and the framework kernel
    "security",  # outbound guard, encryption, rate limits
    "audit",
    "accounts",
    "agents",
    "chat",
    "acp",
    "mcpservers",
    "cron",
    "portal",
]

MIDDLEWARE = [
    # Headers of every response, static files included (docs/protocol.md §6.5).
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "agentsite.middleware.PermissionsPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "agentsite.middleware.BodySizeLimitMiddleware",
    "agentsite.middleware.DatabaseUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "audit.context.AuditContextMiddleware",
    "security.ratelimit.AnonymousRateLimitMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # In place of axes.middleware.AxesMiddleware (accounts/lockout.py says why; check axes.W002 silenced).
    "accounts.lockout.LoginLockoutMiddleware",
    # A page's 404 is the portal's own page, in development too (not Django's list of URL patterns).
    "agentsite.middleware.OwnNotFoundPageMiddleware",
]

ROOT_URLCONF = "agentsite.urls"
ASGI_APPLICATION = "agentsite.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# Under ASGI every request runs in a thread of its own, so persistent connections would pile up: Django
# closes them after each use and pools them on Postgres (psycopg's pool). Our async code keeps one
# connection open in its shared database thread (agentsite/db.py).
CONN_MAX_AGE = env_int("AGENTSITE_CONN_MAX_AGE", 0, minimum=0)
DB_POOL_SIZE = env_int("AGENTSITE_DB_POOL_SIZE", 20, minimum=1)


def _databases() -> dict[str, Mapping[str, object]]:
    url = env_str("DATABASE_URL")
    if url:
        try:
            config = dj_database_url.parse(url, conn_max_age=CONN_MAX_AGE, conn_health_checks=True)
        except ValueError as exc:
            raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
        if config.get("ENGINE") == "django.db.backends.postgresql":
            options = dict(config.get("OPTIONS") or {})
            # While the database restarts, a request answers 503 within seconds instead of hanging.
            options.setdefault("connect_timeout", 3)
            if not CONN_MAX_AGE:  # Django's pool and persistent connections exclude each other
                from psycopg_pool import ConnectionPool

                # A pooled connection is checked as it is handed out: after the database restarted, the
                # pool's old connections are replaced instead of failing the first statement on each.
                pool = {"min_size": 1, "max_size": DB_POOL_SIZE, "timeout": 5}
                options.setdefault("pool", {**pool, "check": ConnectionPool.check_connection})
            config["OPTIONS"] = options
            # One test database per run: two runs on one server (a developer's, CI's) never collide.
            config.setdefault(
                "TEST", {"NAME": env_str("AGENTSITE_TEST_DB_NAME", f"test_agentsite_{os.getpid()}")}
            )
        return {"default": config}
    return {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": SQLITE_PATH,
            "CONN_MAX_AGE": CONN_MAX_AGE,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": {
                # WAL lets readers go on while a writer commits; IMMEDIATE takes the write lock at BEGIN so
                # concurrent writers wait (busy timeout) instead of failing with "database is locked".
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
            # Tests use a file too (Django's default is a shared-cache in-memory database, where locks are
            # per table: a reader in one thread makes a writer in another fail at once, "table is locked").
            "TEST": {"NAME": DATA_DIR / f"test_agentsite_{os.getpid()}.sqlite3"},
        }
    }


DATABASES = _databases()
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")

# Rate limits are counted in the cache (security/ratelimit.py): in Redis when REDIS_URL is set, so that
# they hold across processes. The prefix keeps apart deployments (and test servers) that share one Redis
# database — its cache keys, its sessions' keys and its channel-layer names (chat/live/cluster/keys.py):
# it names this deployment's database unless AGENTSITE_CACHE_PREFIX does.
_DB = DATABASES["default"]
CACHE_PREFIX = (
    env_str("AGENTSITE_CACHE_PREFIX")
    or "agentsite-"
    + hashlib.sha256(
        f"{_DB.get('ENGINE')}|{_DB.get('HOST', '')}|{_DB.get('PORT', '')}|{_DB.get('NAME')}".encode()
    ).hexdigest()[:12]
)
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # Groups and process channels of this deployment only (chat/live/cluster/keys.py).
            "CONFIG": {"hosts": [{"address": REDIS_URL}], "prefix": f"{CACHE_PREFIX}."},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": CACHE_PREFIX,
            # A Redis that does not answer must not hold requests up: limits are then not counted.
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "agentsite",
            "KEY_PREFIX": CACHE_PREFIX,
        }
    }

# Rate limits (docs/protocol.md §6.2): N/PERIOD (s, min, h, day; "5/15min"), or "off".
AGENTSITE_RATE_USER = env_rate("AGENTSITE_RATE_USER", "1200/min")
AGENTSITE_RATE_ANON = env_rate("AGENTSITE_RATE_ANON", "120/min")
AGENTSITE_RATE_FAILED_KEYS = env_rate("AGENTSITE_RATE_FAILED_KEYS", "30/min")
# Login lockout (accounts/lockout.py): failures per (username, address), and per address across usernames
# (within the same window; 0: no address lock); login attempts (POSTs of the login pages) per address.
AGENTSITE_RATE_LOGIN = env_rate("AGENTSITE_RATE_LOGIN", "5/15min")
AGENTSITE_LOGIN_ADDRESS_FAILURES = env_int("AGENTSITE_LOGIN_ADDRESS_FAILURES", 30, minimum=0)
AGENTSITE_RATE_LOGIN_ADDRESS = env_rate("AGENTSITE_RATE_LOGIN_ADDRESS", "30/min")
# Proxies whose X-Forwarded-For names the client (addresses or CIDR networks); none (the default): the peer
# is the client and no X-Forwarded-For is believed. Behind nginx on the same machine: 127.0.0.1.
AGENTSITE_TRUSTED_PROXIES = env_networks("AGENTSITE_TRUSTED_PROXIES")

# Login lockout with django-axes (accounts/lockout.py): failures kept in the database (every process sees
# them), counted per (username, address) and per address by accounts.lockout.LockoutHandler.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = parse_rate(AGENTSITE_RATE_LOGIN) is not None
AXES_HANDLER = "accounts.lockout.LockoutHandler"
AXES_FAILURE_LIMIT = "accounts.lockout.failure_limit"
AXES_COOLOFF_TIME = "accounts.lockout.cool_off"
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_CLIENT_IP_CALLABLE = "accounts.lockout.client_ip"
AXES_RESET_ON_SUCCESS = True
# Attempts while locked are refused without being counted: the lock ends when the window passes.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_DISABLE_ACCESS_LOG = True  # successful logins are not axes' business (and would grow a table)
AXES_VERBOSE = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "portal:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

AGENTSITE_MAX_BODY_BYTES = env_int("AGENTSITE_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = AGENTSITE_MAX_BODY_BYTES
# A file uploaded into a session's workspace (PUT …/files/{path}, chat/files_api.py) may be this large.
AGENTSITE_MAX_UPLOAD_BYTES = env_int("AGENTSITE_MAX_UPLOAD_BYTES", 25 * 1024 * 1024, minimum=1024)
# A WebSocket ticket (POST /api/v1/auth/ws-ticket, accounts/tickets.py) opens one socket within this time.
AGENTSITE_WS_TICKET_SECONDS = env_int("AGENTSITE_WS_TICKET_SECONDS", 60, minimum=1)
# Disk quotas (docs/protocol.md §6.6, agents/tools/quota.py): one workspace, and all of a user's workspaces
# together (MB on disk; 0 means no limit).
AGENTSITE_WORKSPACE_QUOTA_MB = env_int("AGENTSITE_WORKSPACE_QUOTA_MB", 1024, minimum=0)
AGENTSITE_USER_DISK_QUOTA_MB = env_int("AGENTSITE_USER_DISK_QUOTA_MB", 5120, minimum=0)
AGENTSITE_WS_MAX_FRAME_BYTES = env_int("AGENTSITE_WS_MAX_FRAME_BYTES", 1024 * 1024, minimum=1024)
# HTTP requests whose middleware and view run at once (each in a thread of its own); the others wait.
AGENTSITE_REQUEST_THREADS = env_int("AGENTSITE_REQUEST_THREADS", 32, minimum=1)
# 1: the speed layer off, the libraries' plain path on (agentsite/stack.py reads the variable itself, at
# import: agentsite/__init__.py needs it before settings; docs/deployment.md says when to use it).
AGENTSITE_STOCK_STACK = STOCK_STACK
AGENTSITE_MAX_CONCURRENT_TURNS = env_int("AGENTSITE_MAX_CONCURRENT_TURNS", 32, minimum=1)
# Fair share and limits per user (docs/protocol.md §6.4); 0 means no limit.
AGENTSITE_USER_MAX_CONCURRENT_TURNS = env_int("AGENTSITE_USER_MAX_CONCURRENT_TURNS", 4, minimum=0)
AGENTSITE_USER_DAILY_TOKENS = env_int("AGENTSITE_USER_DAILY_TOKENS", 0, minimum=0)
AGENTSITE_USER_MAX_SESSIONS = env_int("AGENTSITE_USER_MAX_SESSIONS", 1000, minimum=0)
AGENTSITE_USER_MAX_CRON_JOBS = env_int("AGENTSITE_USER_MAX_CRON_JOBS", 100, minimum=0)
# Sockets, frames and queues per user (docs/protocol.md §6.6); 0 (or the rate "off") means no limit.
AGENTSITE_USER_MAX_SOCKETS = env_int("AGENTSITE_USER_MAX_SOCKETS", 50, minimum=0)
AGENTSITE_WS_RATE = env_rate("AGENTSITE_WS_RATE", "120/min")
AGENTSITE_WS_BURST = env_int("AGENTSITE_WS_BURST", 30, minimum=1)
AGENTSITE_SESSION_MAX_PENDING = env_int("AGENTSITE_SESSION_MAX_PENDING", 50, minimum=0)
AGENTSITE_USER_MAX_PENDING = env_int("AGENTSITE_USER_MAX_PENDING", 200, minimum=0)
AGENTSITE_MAX_TOOL_STEPS = env_int("AGENTSITE_MAX_TOOL_STEPS", 20, minimum=1)
AGENTSITE_CONFIRMATION_TIMEOUT = env_float("AGENTSITE_CONFIRMATION_TIMEOUT", 300.0, minimum=0.1)
AGENTSITE_SESSION_LEASE_SECONDS = env_float("AGENTSITE_SESSION_LEASE_SECONDS", 10.0, minimum=1.0)
AGENTSITE_EVENT_RETENTION = env_int("AGENTSITE_EVENT_RETENTION", 2000, minimum=100)
# ... and at most this much of them (bytes, roughly: chat/live/events.py), beyond the running and last run.
AGENTSITE_EVENT_RETENTION_BYTES = env_int("AGENTSITE_EVENT_RETENTION_BYTES", 256 * 1024, minimum=16 * 1024)
AGENTSITE_DEMO_DELAY = env_float("AGENTSITE_DEMO_DELAY", 0.03, minimum=0.0)
AGENTSITE_REQUIRE_SERVICES = env_bool("AGENTSITE_REQUIRE_SERVICES", False)
# Under an ASGI server with lifespan support: run the cron scheduler in the server process too.
AGENTSITE_EMBEDDED_SCHEDULER = env_bool("AGENTSITE_EMBEDDED_SCHEDULER", True)

# Where tools' processes run (docs/protocol.md §6.1, agents/sandbox/).
AGENTSITE_SANDBOX = env_choice("AGENTSITE_SANDBOX", "auto", ("auto", "bwrap", "none"))
AGENTSITE_SANDBOX_CPU_SECONDS = env_int("AGENTSITE_SANDBOX_CPU_SECONDS", 600, minimum=0)
# The memory of one call's processes together, and the size of its private /tmp (docs/deployment.md "Memory").
AGENTSITE_SANDBOX_MEMORY_MB = env_int("AGENTSITE_SANDBOX_MEMORY_MB", 2048, minimum=0)
AGENTSITE_SANDBOX_TMP_MB = env_int("AGENTSITE_SANDBOX_TMP_MB", 256, minimum=0)
AGENTSITE_SANDBOX_PROCESSES = env_int("AGENTSITE_SANDBOX_PROCESSES", 256, minimum=0)
AGENTSITE_SANDBOX_FILE_SIZE_MB = env_int("AGENTSITE_SANDBOX_FILE_SIZE_MB", 1024, minimum=0)
# MCP servers (mcpservers/): a chat session's connection to a server closes after this long without a call.
AGENTSITE_MCP_IDLE_SECONDS = env_float("AGENTSITE_MCP_IDLE_SECONDS", 600.0, minimum=0.1)
# ... and may take this long (or its own timeout_seconds, when longer) to start and list its tools.
AGENTSITE_MCP_START_SECONDS = env_float("AGENTSITE_MCP_START_SECONDS", 60.0, minimum=0.1)
# The OS user sandboxes run as; a root server runs them as nobody (process limits do not hold for root).
AGENTSITE_SANDBOX_UID = env_int(
    "AGENTSITE_SANDBOX_UID", 65534 if os.geteuid() == 0 else os.geteuid(), minimum=0
)
# Secrets at rest (docs/protocol.md §6.3, security/encryption.py): the first key encrypts, all decrypt;
# none set: a key derived from SECRET_KEY.
AGENTSITE_SECRETS_KEYS = env_fernet_keys("AGENTSITE_SECRETS_KEY")
# Provider URLs (security/outbound.py): link-local and metadata addresses are always refused; this also
# refuses loopback and private ranges.
AGENTSITE_PROVIDER_DENY_PRIVATE = env_bool("AGENTSITE_PROVIDER_DENY_PRIVATE", False)
# The audit trail (docs/protocol.md §6.4, audit/): entries older than this many days are deleted by
# the scheduler once an hour; 0 keeps them for ever.
AGENTSITE_AUDIT_RETENTION_DAYS = env_int("AGENTSITE_AUDIT_RETENTION_DAYS", 90, minimum=0)
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
AGENTSITE_DEFAULT_MODEL = env_str("AGENTSITE_DEFAULT_MODEL")

REST_FRAMEWORK = {
    # Per user (AGENTSITE_RATE_USER); per address for requests without credentials, AGENTSITE_RATE_ANON,
    # in security.ratelimit.AnonymousRateLimitMiddleware.
    "DEFAULT_THROTTLE_CLASSES": ["security.ratelimit.UserRateThrottle"],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiKeyAuthentication",
        "accounts.authentication.CsrfSessionAuthentication",
        "accounts.authentication.OpenModeAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["agentsite.parsers.JsonParser"],
    "DEFAULT_PAGINATION_CLASS": "agentsite.pagination.CursorPage",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "agentsite.errors.exception_handler",
    "DEFAULT_METADATA_CLASS": "agentsite.metadata.Metadata",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "PATH_CONVERTER_OVERRIDES": {"workspacepath": str},  # agentsite/urls.py
    "TITLE": "agentsite API",
    # The description (with the WebSocket protocol) is written by agentsite.openapi.describe_api.
    "VERSION": "1",
    # 3.1: JSON Schema proper (`"type": ["string", "null"]`), as the pydantic models of bodies write it.
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # Separate request and response components where they differ (write-only `api_key`, read-only times).
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agentsite.openapi.add_common_responses",
        "agentsite.openapi.describe_api",
    ],
    # Choice sets that several components share (a session's status: Session and SessionDetail).
    "ENUM_NAME_OVERRIDES": {"SessionStatusEnum": "chat.models.Session.Status"},
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Open mode is a development switch, not something API clients should see in the document.
    "AUTHENTICATION_WHITELIST": [
        "accounts.authentication.ApiKeyAuthentication",
        "accounts.authentication.CsrfSessionAuthentication",
    ],
}

# /api/v1/docs/ and /api/v1/schema/ for logged-in users and API keys only, unless this is true.
AGENTSITE_PUBLIC_API_DOCS = env_bool("AGENTSITE_PUBLIC_API_DOCS", False)

# Browser hardening (docs/protocol.md §6.5). No inline script anywhere: scripts come from static/js (a
# script that must be inline carries the request's nonce, {{ csp_nonce }}); styles from static/css.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Device features no page of ours uses. (The clipboard stays: the chat copies answers, and reading it
# asks the user anyway.)
AGENTSITE_PERMISSIONS_POLICY = (
    "accelerometer=(), camera=(), display-capture=(), geolocation=(), gyroscope=(), "
    "hid=(), magnetometer=(), microphone=(), midi=(), payment=(), serial=(), usb=(), "
    "xr-spatial-tracking=()"
)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# axes.W002 asks for axes' middleware, which accounts.lockout.LoginLockoutMiddleware replaces.
SILENCED_SYSTEM_CHECKS = ["axes.W002", *env_list("AGENTSITE_SILENCED_CHECKS", [])]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # A 4xx is one line, never a traceback (agentsite/logfilters.py; django.security.*: on the handler).
    "filters": {"client_errors": {"()": "agentsite.logfilters.ClientErrorsWithoutTraceback"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["client_errors"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
    "loggers": {
        "django.request": {"filters": ["client_errors"]},
        "daphne": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
        "axes": {"level": "WARNING"},  # failed logins and lockouts; not every successful one
    },
}
