"""Assistant text → safe HTML for the portal: markdown-it-py, then nh3 with an explicit allow-list.

Model output is untrusted input (a prompt injection can make a model write anything), so the HTML is
sanitised on the server and never trusted because of where it came from:

- markdown-it-py renders CommonMark plus tables and strikethrough with raw HTML *off*: ``<script>``
  or ``<iframe>`` typed in the text show up as text, they never become elements. Single newlines
  become ``<br>``, as in every chat UI (model output relies on them).
- Images become plain links to the image: an ``<img>`` would be fetched as soon as the page shows it,
  which lets injected text send data to any server by URL without a click.
- nh3 (ammonia) then keeps only the tags and attributes listed below, only http/https/mailto URLs
  (plus relative ones), keeps a ``language-xxx`` class on ``<code>`` for the highlighter, and gives
  every link ``rel="noopener noreferrer nofollow"`` and ``target="_blank"`` (leaving the page would
  interrupt the live chat).
- A table column's alignment is a class (``align-left|center|right``), not a ``style`` attribute: the
  portal's Content-Security-Policy allows no inline styles (docs/protocol.md §6.5).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

__all__ = ["ALLOWED_TAGS", "render_markdown"]

ALLOWED_TAGS = frozenset(
    {
        *("p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "hr", "br"),
        *("ul", "ol", "li", "pre", "code"),
        *("table", "thead", "tbody", "tr", "th", "td"),
        *("a", "em", "strong", "del", "s"),
    }
)
_ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "ol": {"start"},
    "th": {"class"},
    "td": {"class"},
}
# Dropped together with their content (the rest of a disallowed tag's text is kept as text).
_DROP_WITH_CONTENT = {"script", "style", "iframe", "object", "embed", "template"}
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")
_ALIGN_CLASS = re.compile(r"align-(left|center|right)")


def _linkify_available() -> bool:
    """Bare URLs become links only when the optional linkify-it-py is installed."""
    try:
        import linkify_it  # noqa: F401
    except ImportError:
        return False
    return True


def _render_image_as_link(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """``![alt](url)`` → ``<a href="url">alt</a>`` so that no image loads by itself."""
    token = tokens[idx]
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    src = str(token.attrGet("src") or "")
    label = escapeHtml(alt or src or "image")
    return f'<a href="{escapeHtml(src)}">{label}</a>'


def _render_cell_with_align_class(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """``<th style="text-align:right">`` → ``<th class="align-right">``."""
    token = tokens[idx]
    style = str(token.attrGet("style") or "")
    if style.startswith("text-align:"):
        token.attrs.pop("style", None)
        token.attrSet("class", "align-" + style.removeprefix("text-align:").strip())
    return renderer.renderToken(tokens, idx, options, env)


def _build_parser() -> MarkdownIt:
    linkify = _linkify_available()
    parser = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": linkify})
    parser.enable(["table", "strikethrough", *(["linkify"] if linkify else [])])
    parser.add_render_rule("image", _render_image_as_link)
    parser.add_render_rule("th_open", _render_cell_with_align_class)
    parser.add_render_rule("td_open", _render_cell_with_align_class)
    return parser


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """Keep only ``language-xxx`` classes on ``<code>`` and ``align-xxx`` ones on cells; every other
    allowed attribute as is."""
    if attribute == "class":
        wanted = _LANGUAGE_CLASS if tag == "code" else _ALIGN_CLASS
        kept = [name for name in value.split() if wanted.fullmatch(name)]
        return " ".join(kept) or None
    return value


def _build_cleaner() -> Any:
    return nh3.Cleaner(
        tags=set(ALLOWED_TAGS),
        clean_content_tags=_DROP_WITH_CONTENT,
        attributes=_ALLOWED_ATTRIBUTES,
        attribute_filter=_keep_attribute,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


_PARSER = _build_parser()
_CLEANER = _build_cleaner()

# Text in which Markdown finds nothing but paragraphs and line breaks: letters, digits, spaces, newlines and
# punctuation without a meaning in CommonMark, its tables, strikethrough or linkify (no `.` before a
# non-space: `example.com` may be a link), no line with spaces around it (indented code, hard breaks) and
# none that starts like an ordered list (`1.`, `1)`). The parser costs ~0.3 ms per answer in Python;
# such text — most short answers — gets the same HTML without it (tests/chat/test_markdown.py compares).
_PLAIN_TEXT = re.compile(r"(?:[^\W_]|[ ,;:?!'\"()%\n]|\.(?!\S))*")
_NOT_PLAIN_LINE = re.compile(r"^(?:\s|\d+[.)])|\s$", re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n{2,}")


def _plain_paragraphs(text: str) -> str | None:
    """What markdown-it renders for plain text (see above), or None when the text is not that plain."""
    if not _PLAIN_TEXT.fullmatch(text):
        return None
    text = text.strip("\n")
    if not text or _NOT_PLAIN_LINE.search(text.replace("\n\n", "\n")):
        return None
    html = ""
    for paragraph in _PARAGRAPH_BREAK.split(text):
        lines = escapeHtml(paragraph).replace("\n", "<br />\n")  # `breaks`: a newline is a line break
        html += f"<p>{lines}</p>\n"
    return html


def render_markdown(text: str) -> str:
    """Render untrusted Markdown (assistant output) to HTML that is safe to insert into a page."""
    if not text:
        return ""
    html = _plain_paragraphs(text)
    return str(_CLEANER.clean(html if html is not None else _PARSER.render(text)))
