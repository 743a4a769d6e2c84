from agentsite.lean_imports import skip_unused_optional_imports
from agentsite.stack import STOCK_STACK

__version__ = "0.1.0"

if not STOCK_STACK:  # the stock stack imports what the libraries import (agentsite/stack.py)
    skip_unused_optional_imports()
