"""Icons (2025-11-25) in notebook and terminal tables, from a real SDK server that declares
safe and unsafe ones; https icons fetched only when asked (mocked with ``responses``)."""

from __future__ import annotations

import base64
import io
import sys
from pathlib import Path

import pytest
import responses

import mcpsync
from mcpsync import display
from mcpsync.cli import main as cli_main

SERVER = [sys.executable, str(Path(__file__).resolve().parents[1] / "servers" / "icons_server.py")]
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
HTTPS = "https://icons.example.invalid/tool.png"

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def listed():
    with mcpsync.Session.connect(SERVER, timeout=30) as s:
        yield {"tools": s.list_tools(), "resources": s.list_resources(), "prompts": s.list_prompts(),
               "server": s.server_info}  # fmt: skip


@responses.activate
def test_terminal_rows_show_safe_icons_and_fetch_nothing(listed):
    rows = {r["name"]: r["icon"] for r in display.tool_rows(listed["tools"])}
    assert rows == {"painted": "png 16x16", "linked": HTTPS, "hostile": "", "plain": ""}
    assert display.resource_rows(listed["resources"])[0]["icon"] == "png"
    assert display.prompt_rows(listed["prompts"])[0]["icon"] == HTTPS
    assert display.icon_text(listed["server"]) == "png 1x1"
    assert len(responses.calls) == 0


@responses.activate
def test_notebook_table_inlines_data_icons_and_links_https_ones(listed):
    html = display.tools_table(listed["tools"]).html
    assert html.count("<img src='data:image/png;base64,") == 1
    assert f"<a href='{HTTPS}' target='_blank' rel='noopener noreferrer'" in html
    assert "javascript:" not in html and "plain.example" not in html and "alert" not in html
    assert len(responses.calls) == 0  # shown as a link: never fetched


@responses.activate
def test_https_icons_are_fetched_only_when_asked(listed):
    responses.get(HTTPS, body=PNG, content_type="image/png")
    html = display.tools_table(listed["tools"], fetch_icons=True).html
    assert html.count("<img src='data:image/png;base64,") == 2 and f"href='{HTTPS}'" not in html
    assert [c.request.url for c in responses.calls] == [HTTPS]


@responses.activate
@pytest.mark.parametrize(
    ("body", "kind", "status"),
    [
        (b"<svg onload='alert(1)'></svg>", "image/png", 200),  # not the PNG it says
        (b"<html>hi</html>", "text/html", 200),
        (PNG + b"\0" * (display.MAX_ICON_BYTES + 1), "image/png", 200),  # too big
        (PNG, "image/png", 302),  # redirects are not followed
    ],
)
def test_fetched_icons_are_checked(body, kind, status):
    responses.get(
        HTTPS, body=body, content_type=kind, status=status, headers={"Location": "http://x/"}
    )
    [icon] = display.safe_icons([{"src": HTTPS}])
    assert display.fetch_icon(icon) is None


def test_safe_icons_drop_what_cannot_be_shown_safely():
    png = "data:image/png;base64," + base64.b64encode(PNG).decode()
    icons = display.safe_icons([
        {"src": png, "sizes": ["48x48"]},
        {"src": "data:image/png;base64," + base64.b64encode(b"GIF89a...").decode()},  # mislabelled
        {"src": "data:text/html;base64,PHNjcmlwdD4="},
        {"src": "data:image/png,not-base64"},
        {"src": "javascript:alert(1)"},
        {"src": "http://example.com/i.png"},
        {"src": "https://example.com/i.png'><script>"},
        {"src": "file:///etc/passwd"},
        {"src": "data:image/svg+xml;base64," + base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").decode(),
         "sizes": ["any"], "theme": "dark"},
    ])  # fmt: skip
    assert [(i.kind, i.mime_type) for i in icons] == [
        ("data", "image/png"),
        ("data", "image/svg+xml"),
    ]
    assert display.best_icon(icons, theme="light").mime_type == "image/png"
    svg = display.icon_html(icons[1:])
    assert svg.startswith("<img src='data:image/svg+xml;base64,")  # an <img>: SVG scripts never run


def test_cli_tools_shows_the_icon_column():
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["tools", "--", *SERVER], stdout=out, stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    assert "ICON" in text and "png 16x16" in text and HTTPS in text
    assert "javascript" not in text


def test_cli_inspect_shows_the_server_icon_and_tool_icons():
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["inspect", "--", *SERVER], stdout=out, stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    assert "icons         png 1x1" in text and "png 16x16" in text and "javascript" not in text
