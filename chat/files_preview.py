"""What the portal's workspace panel shows of a file (`GET …/files/{path}?preview=1`).

Bounded: at most PREVIEW_BYTES are read. Text comes back as text (with a language for the highlighter),
Markdown also rendered and sanitised on the server (chat/markdown.py, the same rules as answers), images
as a kind only (the browser loads their bytes from the file's URL), anything else as `binary`.
"""

from __future__ import annotations

import codecs
import mimetypes
import posixpath
from typing import IO, Any

from chat.markdown import render_markdown

PREVIEW_BYTES = 256 * 1024
_SNIFF = 8192
LANGUAGES = {
    ".py": "python",
    ".js": "js",
    ".mjs": "js",
    ".ts": "ts",
    ".tsx": "tsx",
    ".jsx": "jsx",
    ".json": "json",
    ".sh": "sh",
    ".bash": "sh",
    ".go": "go",
    ".rs": "rust",
    ".sql": "sql",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".java": "java",
    ".cs": "cs",
    ".html": "html",
    ".css": "css",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
}
MARKDOWN = frozenset({".md", ".markdown"})


def preview(handle: IO[bytes], *, name: str, path: str) -> dict[str, Any]:
    data = handle.read(PREVIEW_BYTES + 1)
    truncated = len(data) > PREVIEW_BYTES
    data = data[:PREVIEW_BYTES]
    suffix = posixpath.splitext(name)[1].lower()
    kind, _ = mimetypes.guess_type(name)
    body: dict[str, Any] = {"path": path, "name": name, "truncated": truncated}
    if kind and kind.startswith("image/"):
        return {**body, "kind": "image", "content_type": kind}
    text = _text(data, complete=not truncated)
    if text is None:
        return {**body, "kind": "binary", "content_type": kind or "application/octet-stream"}
    if suffix in MARKDOWN:
        return {**body, "kind": "markdown", "content": text, "html": render_markdown(text)}
    return {**body, "kind": "text", "content": text, "language": LANGUAGES.get(suffix)}


def _text(data: bytes, *, complete: bool) -> str | None:
    """UTF-8 text, or None for binary content; a character cut by the size cap is dropped."""
    if b"\x00" in data[:_SNIFF]:
        return None
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        return None
