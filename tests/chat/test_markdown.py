"""Markdown rendering of untrusted assistant text: the formatting survives, nothing executable does."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat import markdown
from chat.markdown import ALLOWED_TAGS, render_markdown


class _Elements(HTMLParser):
    """Every start tag of a fragment with its attributes, as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return parser.found


def tags(html: str) -> list[str]:
    return [tag for tag, _ in elements(html)]


def hrefs(html: str) -> list[str | None]:
    return [attrs.get("href") for tag, attrs in elements(html) if tag == "a"]


def assert_inert(html: str) -> None:
    """No tag outside the allow-list, no event handler, no script-capable URL."""
    for tag, attrs in elements(html):
        assert tag in ALLOWED_TAGS, tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            lowered = (value or "").replace(" ", "").lower()
            assert not lowered.startswith(("javascript:", "data:", "vbscript:")), (tag, name, value)


# --- formatting ------------------------------------------------------------------------------------


def test_table_renders_with_header_body_and_alignment() -> None:
    html = render_markdown("| name | qty |\n|:-----|----:|\n| tea  | 2   |\n")

    assert tags(html) == ["table", "thead", "tr", "th", "th", "tbody", "tr", "td", "td"]
    assert '<th class="align-right">qty</th>' in html
    assert '<td class="align-left">tea</td>' in html
    assert "style=" not in html  # the portal's CSP allows no inline styles


def test_fenced_code_keeps_its_language_class_and_escapes_its_content() -> None:
    html = render_markdown('```python\nif a < b:\n    print("<b>")\n```')

    assert html.startswith('<pre><code class="language-python">')
    assert "if a &lt; b:" in html
    assert "&lt;b&gt;" in html
    assert tags(html) == ["pre", "code"]


def test_fence_info_that_tries_to_break_out_of_the_class_is_dropped() -> None:
    html = render_markdown('```"><script>alert(1)</script>\nx\n```')

    assert tags(html) == ["pre", "code"]
    assert elements(html)[1] == ("code", {})


def test_headings_lists_quotes_emphasis_and_strikethrough() -> None:
    text = "# Title\n\n3. one\n4. two\n\n- a\n\n> quoted\n\n*em* **strong** ~~gone~~ `code`\n\n---"

    html = render_markdown(text)

    expected = ["h1", "ol", "li", "li", "ul", "li", "blockquote", "p", "p", "em", "strong", "s", "code", "hr"]
    assert tags(html) == expected
    assert '<ol start="3">' in html


def test_single_newline_becomes_a_line_break() -> None:
    assert render_markdown("line one\nline two") == "<p>line one<br>\nline two</p>\n"


def test_links_get_rel_and_a_new_tab() -> None:
    html = render_markdown('[docs](https://example.com/a?b=1&c=2 "The docs")')

    assert elements(html) == [
        ("p", {}),
        (
            "a",
            {
                "href": "https://example.com/a?b=1&c=2",
                "title": "The docs",
                "target": "_blank",
                "rel": "noopener noreferrer nofollow",
            },
        ),
    ]


@pytest.mark.parametrize("url", ["http://example.com/", "https://example.com/", "mailto:someone@example.com"])
def test_http_https_and_mailto_links_are_kept(url: str) -> None:
    assert hrefs(render_markdown(f"[x]({url})")) == [url]


def test_plain_text_is_escaped() -> None:
    assert render_markdown('5 < 6 & 7 > 3 "quoted"') == '<p>5 &lt; 6 &amp; 7 &gt; 3 "quoted"</p>\n'


def test_empty_text_renders_nothing() -> None:
    assert render_markdown("") == ""


# --- what must never run ---------------------------------------------------------------------------


def test_script_tag_is_not_an_element() -> None:
    html = render_markdown("Hello <script>alert(document.cookie)</script>\n\n<script>\nalert(1)\n</script>")

    assert "script" not in tags(html)
    assert "<script" not in html.lower()
    assert_inert(html)


@pytest.mark.parametrize(
    "text",
    [
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt:alert(1))",
        "[click](java\tscript:alert(1))",
        "[click](&#106;avascript:alert(1))",
        "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "[click](vbscript:msgbox(1))",
        "<javascript:alert(1)>",
        '[click][ref]\n\n[ref]: javascript:alert(1) "t"',
    ],
)
def test_script_capable_link_is_neutralised(text: str) -> None:
    html = render_markdown(text)

    assert_inert(html)
    assert all(href is None or href.startswith(("http", "mailto")) for href in hrefs(html))


def test_onerror_and_other_event_handlers_never_become_attributes() -> None:
    text = "\n\n".join(
        [
            '<img src=x onerror="alert(1)">',
            '<a href="https://e.com" onclick="alert(1)">x</a>',
            '[t](https://e.com "\\" onmouseover=\\"alert(1)")',
        ]
    )

    html = render_markdown(text)

    assert "img" not in tags(html)
    assert_inert(html)


def test_raw_iframe_is_not_an_element() -> None:
    html = render_markdown(
        '<iframe src="https://evil.example/"></iframe>\n\ntext <iframe srcdoc="<script>x</script>">'
    )

    assert "iframe" not in tags(html)
    assert_inert(html)


@pytest.mark.parametrize(
    "text",
    [
        "<div style='position:fixed'>x</div>",
        "<style>body{display:none}</style>",
        "<form><input></form>",
        "<!-- c -->",
    ],
)
def test_other_raw_html_is_shown_as_text(text: str) -> None:
    html = render_markdown(text)

    assert tags(html) == ["p"]
    assert_inert(html)


def test_images_become_links_so_nothing_loads_by_itself() -> None:
    html = render_markdown(
        '![chart *of* sales](https://example.com/c.png "t") ![x](data:image/png;base64,AAAA)'
    )

    assert "img" not in tags(html)
    assert hrefs(html) == ["https://example.com/c.png", None]
    assert ">chart of sales</a>" in html
    assert_inert(html)


# --- the plain-text fast path gives the parser's HTML -----------------------------------------------

# Pieces that look plain and are not (lists, links, breaks, indentation) next to ones that are.
_PIECES = st.sampled_from(
    [
        "word",
        "Ünïcödé",
        "東京",
        "42",
        "1.",
        "1)",
        "12. item",
        "e.g.",
        "example.com",
        "a.b",
        "end.",
        " ",
        "  ",
        "    ",
        "\n",
        "\n\n",
        "\n\n\n",
        " \n",
        "\n ",
        ",",
        ";",
        ":",
        "?",
        "!",
        "'",
        '"',
        "(",
        ")",
        "%",
        "-",
        "*",
        "_",
        "#",
        "`",
        "[x](y)",
        "<b>",
        "&amp;",
        "|",
        "~~",
        "=",
        "\\",
        "\t",
        "http://x.io",
        "a@b.co",
        "\u00a0",
        "\r\n",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_plain_text_renders_as_the_parser_renders_it(text: str) -> None:
    fast = markdown._plain_paragraphs(text)
    if fast is not None:
        assert markdown._CLEANER.clean(fast) == markdown._CLEANER.clean(markdown._PARSER.render(text)), text


@pytest.mark.parametrize(
    "text",
    [
        "Hello there! It's 5 o'clock (UTC).",
        'First line.\nSecond line.\n\nA new paragraph: "quoted"?',
        "東京 ß 42%",
    ],
)
def test_typical_short_answers_take_the_fast_path(text: str) -> None:
    assert markdown._plain_paragraphs(text) is not None
    assert render_markdown(text) == markdown._CLEANER.clean(markdown._PARSER.render(text))


@pytest.mark.parametrize(
    "text", ["1. one\n2. two", "see example.com", "a  \nb", "    code", "**bold**", "a\n\n\nb", "1) x"]
)
def test_text_that_may_mean_something_takes_the_parser(text: str) -> None:
    assert markdown._plain_paragraphs(text) is None
