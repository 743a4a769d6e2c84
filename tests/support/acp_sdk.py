"""The official ACP SDK (`agent-client-protocol`, a test dependency) loaded beside our own `acp` app.

Both are packages named `acp`, and in-process the project's folder comes first on sys.path, so a plain
`import acp` gives the app. This module imports the SDK from site-packages under its own name while our
modules are set aside, then puts ours back; the SDK's modules keep working through the references they
hold. Runners that use the SDK run as their own processes (`python -P`, outside the project's folder),
where `import acp` finds the SDK.
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
from types import ModuleType

_SUBMODULES = ("schema", "meta", "utils", "helpers", "interfaces")


def _ours() -> dict[str, ModuleType]:
    return {name: module for name, module in sys.modules.items() if name == "acp" or name.startswith("acp.")}


def _load() -> ModuleType:
    ours = _ours()
    for name in ours:
        del sys.modules[name]
    site_packages = sysconfig.get_paths()["purelib"]
    sys.path.insert(0, site_packages)
    try:
        sdk = importlib.import_module("acp")
        for submodule in _SUBMODULES:
            importlib.import_module(f"acp.{submodule}")
    finally:
        sys.path.remove(site_packages)
        for name in _ours():
            del sys.modules[name]
        sys.modules.update(ours)
    if sdk.__file__ is not None and site_packages not in sdk.__file__:
        raise ImportError(f"expected the ACP SDK from {site_packages}, got {sdk.__file__}")
    return sdk


acp_sdk = _load()
