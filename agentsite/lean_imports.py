"""Optional imports a server has no use for, kept out of every process (agentsite/__init__.py runs this).

Two libraries import a package "if it is installed" when they are imported, for something agentsite never
uses: Django REST framework imports `requests` (with urllib3, charset_normalizer, idna, certifi) for its
test client `RequestsClient`, and autobahn imports `click` to colour its own debug log lines. Both are
installed here only as dependencies of other packages (the test tools, the MCP SDK's server side), and
together they cost every server process ~5 MB (bench/README.md: 1,000 idle sockets). So those two
libraries are imported once as if the packages were absent; afterwards the packages import normally for
whoever needs them (tests/test_startup_imports.py checks both).
"""

from __future__ import annotations

import importlib
import sys

# (library module that tries the import, the optional package it tries)
UNUSED_OPTIONAL_IMPORTS = (("rest_framework.compat", "requests"), ("autobahn.util", "click"))


def skip_unused_optional_imports() -> None:
    absent = [package for _, package in UNUSED_OPTIONAL_IMPORTS if package not in sys.modules]
    for package in absent:
        sys.modules[package] = None  # type: ignore[assignment]  # `import package` raises ImportError
    try:
        for module, _ in UNUSED_OPTIONAL_IMPORTS:
            importlib.import_module(module)
    finally:
        for package in absent:
            if sys.modules.get(package, False) is None:
                del sys.modules[package]
