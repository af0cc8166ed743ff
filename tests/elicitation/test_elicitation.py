"""Elicitation people can answer: the terminal handler and the notebook form, end to end
against npm server-everything (its form and URL elicitation tools, -32042 included), and
the schema checks on their own."""

from __future__ import annotations

import io
import queue
import threading

import pytest
from servers.launch import everything_stdio_argv

import mcpsync
from mcpsync.elicitation import (
    ElicitationForm,
    NotebookElicitation,
    TerminalElicitation,
    URLElicitationRequired,
    clean_text,
    form_fields,
    openable,
    parse_answer,
    retry_after_urls,
    url_requests,
    url_required,
)
from mcpsync.errors import ServerError
from mcpsync.handlers import accept_defaults

# The answers a person types to server-everything's trigger-elicitation-request form, one
# line per prompt, with wrong answers first where the field is checked.
FORM_ANSWERS = [
    "",  # name: required -> asked again
    "Ada Lovelace",
    "maybe",  # check: not yes/no -> asked again
    "y",
    "",  # firstLine: the default
    "not-an-email",
    "ada@example.com",
    "",  # homepage: optional, left out
    "1815-13-10",  # not a date
    "1815-12-10",
    "500",  # integer: over its maximum of 100
    "7",
    "",  # number: the default 3.14
    "3",  # untitled enum by its number: Joey
    "Piano, Drums",
    "Wonder Woman",  # titled enum by its label
    "",  # titled multi: the default
    "Dogs",  # legacy enumNames label
]


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def terminal(lines: list[str], **kwargs):
    out = io.StringIO()
    opened: list[str] = []
    handler = TerminalElicitation(
        input=io.StringIO("".join(line + "\n" for line in lines)),
        output=out,
        open_url=opened.append,
        **kwargs,
    )
    return handler, out, opened


@pytest.mark.real
def test_terminal_form_against_server_everything(no_leaks):
    handler, out, _ = terminal([*FORM_ANSWERS, "y"], server="everything")
    with mcpsync.Session.connect(
        everything_stdio_argv(), timeout=30, elicitation_handler=handler
    ) as s:
        result = s.call_tool("trigger-elicitation-request", {})
    text, shown = text_of(result), out.getvalue()
    assert "User provided the requested information" in text, text
    for expected in ("- Name: Ada Lovelace", "- Agreed to terms: true", "- Email: ada@example.com",
                     "- Birthdate: 1815-12-10", "- Favorite Integer: 7", "- Favorite Number: 3.14"):  # fmt: skip
        assert expected in text, text
    raw = text.split("Raw result:", 1)[-1]
    assert (
        '"untitledSingleSelectEnum": "Joey"' in raw and '"titledSingleSelectEnum": "hero-3"' in raw
    )
    assert '"Piano"' in raw and '"Drums"' in raw and '"legacyTitledEnum": "pet-2"' in raw
    assert "homepage" not in raw  # left empty: not sent
    # each wrong answer was explained and asked again
    assert shown.count("This field is required.") == 1
    assert "Expected yes or no." in shown and "Expected an email address" in shown
    assert "Expected a date" in shown and "Expected at most 100." in shown
    assert "[everything] The server asks:" in shown


@pytest.mark.real
@pytest.mark.parametrize(("last", "word"), [("n", "declined"), ("", "declined"), (None, "cancel")])
def test_terminal_form_is_not_sent_without_a_yes(no_leaks, last, word):
    lines = FORM_ANSWERS if last is None else [*FORM_ANSWERS, last]  # None: input ends
    handler, _, _ = terminal(lines)
    with mcpsync.Session.connect(
        everything_stdio_argv(), timeout=30, elicitation_handler=handler
    ) as s:
        result = s.call_tool("trigger-elicitation-request", {})
    assert word in text_of(result).lower() and "provided" not in text_of(result)


@pytest.mark.real
@pytest.mark.parametrize("open_it", [True, False])
def test_terminal_url_elicitation_opens_only_when_asked(no_leaks, open_it):
    handler, out, opened = terminal(["y" if open_it else "n", "y"])
    url = "https://auth.example.com/consent?x=1"
    with mcpsync.Session.connect(
        everything_stdio_argv(), timeout=30, elicitation_handler=handler
    ) as s:
        result = s.call_tool("trigger-url-elicitation", {"url": url, "message": "Sign in"})
    assert "User completed the URL elicitation flow" in text_of(result)
    assert opened == ([url] if open_it else [])
    assert f"URL:    {url}" in out.getvalue() and "Domain: auth.example.com" in out.getvalue()


@pytest.mark.real
def test_url_required_error_is_typed_and_retried_after_the_person_finishes(no_leaks):
    # -32042 carries a prerequisite URL; once the person finished it the call is made again,
    # and the retry asks for the tool's own URL over elicitation/create.
    handler, out, opened = terminal(["n", "y", "n", "y"] * 2 + ["n", "n"])
    url = "https://example.com/pay"
    args = {"url": url, "errorPath": True, "elicitationId": "e-1"}
    with mcpsync.Session.connect(
        everything_stdio_argv(), timeout=30, elicitation_handler=handler
    ) as s:
        with pytest.raises(ServerError) as info:
            s.call_tool("trigger-url-elicitation", args)
        assert isinstance(info.value, URLElicitationRequired)  # typed where it is raised
        typed = url_required(info.value)
        assert typed is info.value and typed.code == -32042
        assert [r.url for r in url_requests(typed)] == ["https://modelcontextprotocol.io"]
        assert typed.urls == ["https://modelcontextprotocol.io"]
        assert "modelcontextprotocol.io" in str(typed)
        assert handler.resolve(info.value)  # shown, not opened, finished
        result = s.call_tool("trigger-url-elicitation", args)
        assert "User completed the URL elicitation flow" in text_of(result)
        shown = out.getvalue()
        assert shown.index("Domain: modelcontextprotocol.io") < shown.index("Domain: example.com")

        calls = []

        def call(elicitation_id):
            calls.append(elicitation_id)
            return s.call_tool("trigger-url-elicitation", {**args, "elicitationId": elicitation_id})

        # the same flow in one call: prerequisite finished -> called again -> completed
        result = retry_after_urls(lambda: call("e-2"), handler.url)
        assert "User completed" in text_of(result) and calls == ["e-2", "e-2"]
        # declined: the typed error comes out and nothing is called again
        with pytest.raises(URLElicitationRequired):
            retry_after_urls(lambda: call("e-3"), handler.url)
        assert calls[2:] == ["e-3"]
    assert opened == []


@pytest.mark.real
def test_notebook_form_against_server_everything(no_leaks):
    pytest.importorskip("ipywidgets")
    forms: queue.Queue[ElicitationForm] = queue.Queue()
    shown: list = []
    handler = NotebookElicitation(timeout=60, display=shown.append, on_form=forms.put)
    with mcpsync.Session.connect(
        everything_stdio_argv(), timeout=60, elicitation_handler=handler
    ) as s:
        future = s.submit_call_tool("trigger-elicitation-request", {})
        form = forms.get(timeout=30)
        assert shown == [form.widget]
        assert set(form.inputs) >= {
            "name",
            "check",
            "email",
            "integer",
            "untitledMultipleSelectEnum",
        }
        assert form.inputs["firstLine"].value == "It was a dark and stormy night."  # defaults shown
        assert form.inputs["titledSingleSelectEnum"].value == "hero-1"
        # a required field empty and a bad email: Submit refuses, says why, and waits on
        form.inputs["email"].value = "nope"
        form.submit_button.click()
        assert not future.done() and form.result is None
        assert "required" in form.errors["name"].value and "email" in form.errors["email"].value
        form.inputs["name"].value = "Grace Hopper"
        form.inputs["email"].value = "grace@example.com"
        form.inputs["check"].value = True
        form.inputs["integer"].value = "12"
        form.inputs["untitledMultipleSelectEnum"].value = ("Violin",)
        form.submit_button.click()
        result = future.result(timeout=30)
    text = text_of(result)
    assert "- Name: Grace Hopper" in text and "- Favorite Integer: 12" in text, text
    assert '"Violin"' in text and "- Agreed to terms: true" in text
    assert form.submit_button.disabled and form.result == {
        "action": "accept",
        "content": form.values()[0],
    }


def test_notebook_form_cancel_decline_and_timeout():
    pytest.importorskip("ipywidgets")
    params = {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {
        "ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 1}}, "required": ["n"]}}  # fmt: skip
    form = ElicitationForm(params)
    form.decline_button.click()
    assert form.wait(0) == {"action": "decline"}
    form.submit_button.click()  # too late: the first answer stands
    assert form.result == {"action": "decline"}
    form = ElicitationForm(params)
    form.cancel_button.click()
    assert form.wait(0) == {"action": "cancel"}
    assert ElicitationForm(params).wait(0.01) == {"action": "cancel"}  # nobody answered
    form = ElicitationForm(params)
    form.inputs["n"].value = "0"
    assert not form.submit()
    assert "at least 1" in form.errors["n"].value
    form.inputs["n"].value = "2"
    assert form.submit() and form.result == {"action": "accept", "content": {"n": 2}}


def test_notebook_url_request_links_only_safe_urls():
    pytest.importorskip("ipywidgets")
    good = ElicitationForm(
        {"mode": "url", "url": "https://x.example/a?b=<c>", "message": "go", "elicitationId": "1"}
    )
    html_text = good.widget.children[1].value
    assert 'href="https://x.example/a?b=&lt;c&gt;"' in html_text and "x.example" in html_text
    bad = ElicitationForm(
        {"mode": "url", "url": "javascript:alert(1)", "message": "<b>hi</b>", "elicitationId": "2"}
    )
    assert "href" not in bad.widget.children[1].value
    assert "&lt;b&gt;hi&lt;/b&gt;" in bad.widget.children[0].value
    bad.submit_button.click()
    assert bad.result == {"action": "accept"}


def test_unattended_handlers_never_accept_a_url():
    assert accept_defaults(
        {"mode": "url", "url": "https://x", "message": "m", "elicitationId": "1"}
    ) == {"action": "decline"}


def test_openable_and_clean_text():
    assert openable("https://example.com/x") and openable("http://127.0.0.1:8080/cb")
    assert openable("http://localhost/cb") and openable("http://[::1]/cb")
    for bad in ("http://example.com", "javascript:alert(1)", "file:///etc/passwd", "data:text/html,hi",
                "https://user:pw@example.com/", "ftp://example.com"):  # fmt: skip
        assert not openable(bad), bad
    assert clean_text("ok\x1b[31mred\x07\u202e") == "ok[31mred"


def test_schema_fields_and_answers():
    fields = {f.name: f for f in form_fields({"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "minLength": 2, "maxLength": 4},
        "b": {"type": "number", "minimum": 0},
        "c": {"type": "string", "format": "uri"},
        "d": {"type": "string", "format": "date-time"},
        "e": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 1},
    }})}  # fmt: skip
    assert fields["a"].required and not fields["b"].required
    with pytest.raises(ValueError, match="at least 2"):
        parse_answer(fields["a"], "x")
    assert parse_answer(fields["b"], "2.5") == 2.5 and parse_answer(fields["b"], "3") == 3
    for bad in ("nan", "inf", "-1"):
        with pytest.raises(ValueError):
            parse_answer(fields["b"], bad)
    assert parse_answer(fields["c"], "https://a.b/") == "https://a.b/"
    assert parse_answer(fields["d"], "2025-11-25T10:00:00Z")
    with pytest.raises(ValueError, match="at most 1"):
        parse_answer(fields["e"], "x, y")
    with pytest.raises(mcpsync.MCPSyncError):
        form_fields({"type": "object", "properties": {"nested": {"type": "object"}}})


def test_terminal_refuses_a_schema_it_cannot_show_and_strips_escapes():
    handler, out, _ = terminal(["y"])
    params = {"mode": "form", "message": "\x1b]0;pwned\x07Hi", "requestedSchema": {
        "type": "object", "properties": {"x": {"type": "object"}}}}  # fmt: skip
    assert handler(params) == {"action": "decline"}
    assert "\x1b" not in out.getvalue() and "]0;pwnedHi" in out.getvalue()


def test_terminal_gives_up_after_too_many_wrong_answers():
    handler, out, _ = terminal(["x", "x", "x"], max_attempts=3)
    params = {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {
        "n": {"type": "integer"}}}}  # fmt: skip
    assert handler(params) == {"action": "cancel"}
    assert out.getvalue().count("Expected a whole number") == 3


def test_concurrent_terminal_elicitations_take_turns():
    done = threading.Event()
    results = []

    def ask(handler):
        results.append(handler({"mode": "form", "message": "m", "requestedSchema": {
            "type": "object", "properties": {"s": {"type": "string"}}}}))  # fmt: skip
        if len(results) == 2:
            done.set()

    threads = [threading.Thread(target=ask, args=(terminal(["a", "y"])[0],), name=f"mcpsync-test[{i}]")
               for i in range(2)]  # fmt: skip
    for t in threads:
        t.start()
    assert done.wait(10)
    for t in threads:
        t.join(5)
    assert results == [{"action": "accept", "content": {"s": "a"}}] * 2


def test_url_required_from_a_plain_server_error_and_no_query_in_the_message():
    data = {"elicitations": [{"mode": "url", "url": "https://pay.example/c?token=s3cr3t#x",
                              "message": "Pay", "elicitationId": "1"}, {"mode": "url"}]}  # fmt: skip
    typed = url_required(ServerError(-32042, "pay first", data, method="tools/call"))
    assert isinstance(typed, URLElicitationRequired) and typed.method == "tools/call"
    assert typed.urls == [
        "https://pay.example/c?token=s3cr3t#x"
    ]  # the one without a url is dropped
    assert "https://pay.example/c" in str(typed) and "s3cr3t" not in str(typed)
    assert url_required(ServerError(-32602, "no")) is None
