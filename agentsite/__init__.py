from agentsite.lean_imports import skip_unused_optional_imports

__version__ = "0.1.0"

skip_unused_optional_imports()
