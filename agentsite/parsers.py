"""REST bodies are decoded by agentsite/jsonio.py, as socket frames are (one JSON decoding point)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from agentsite import jsonio


class JsonParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return jsonio.loads(stream.read())
        except jsonio.InvalidJson as exc:
            raise ParseError(str(exc)) from None
