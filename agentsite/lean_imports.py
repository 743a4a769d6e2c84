"""Optional imports a server has no use for, kept out of every process (agentsite/__init__.py runs this).

Two libraries import packages "if they are installed" when they are imported, for things agentsite never
uses: Django REST framework imports `requests` (with urllib3, charset_normalizer, idna, certifi) for its
test client `RequestsClient`, and psycopg (~9 MB with its bundled libpq, on SQLite too) for serializer
fields of `django.contrib.postgres`; autobahn imports `click` to colour its own debug log lines. requests
and click are installed here only as dependencies of other packages (the test tools, the MCP SDK's server
side). So those two libraries are imported once as if the packages were absent (~5 MB less in every
process, ~14 MB on SQLite); afterwards the packages import normally for whoever needs them (the Postgres
backend, tests: tests/test_startup_imports.py).
"""

from __future__ import annotations

import importlib
import sys

# (library module that tries the imports, the optional packages it tries)
UNUSED_OPTIONAL_IMPORTS = (("rest_framework.compat", ("requests", "psycopg")), ("autobahn.util", ("click",)))


def skip_unused_optional_imports() -> None:
    packages = [package for _, names in UNUSED_OPTIONAL_IMPORTS for package in names]
    absent = [package for package in packages if package not in sys.modules]
    for package in absent:
        sys.modules[package] = None  # type: ignore[assignment]  # `import package` raises ImportError
    try:
        for module, _ in UNUSED_OPTIONAL_IMPORTS:
            importlib.import_module(module)
    finally:
        for package in absent:
            if sys.modules.get(package, False) is None:
                del sys.modules[package]
