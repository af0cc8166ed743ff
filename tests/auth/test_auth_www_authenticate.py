"""WWW-Authenticate parsing: the forms real servers send."""

from __future__ import annotations

import pytest

from mcpsync.auth import bearer_challenge, parse_www_authenticate


def test_bearer_with_resource_metadata_and_scope():
    ch = bearer_challenge(
        'Bearer resource_metadata="https://x/.well-known/oauth-protected-resource/mcp", scope="a b"'
    )
    assert ch is not None
    assert ch.resource_metadata == "https://x/.well-known/oauth-protected-resource/mcp"
    assert ch.scopes == ["a", "b"]
    assert ch.error is None


def test_insufficient_scope_with_description_containing_commas_and_escaped_quotes():
    ch = bearer_challenge(
        'Bearer error="insufficient_scope", scope="files:write", '
        'resource_metadata="https://m/.well-known/oauth-protected-resource", '
        'error_description="need \\"write\\", sorry"'
    )
    assert ch.error == "insufficient_scope"
    assert ch.scopes == ["files:write"]
    assert ch.get("error_description") == 'need "write", sorry'


def test_multiple_challenges_in_one_header():
    chs = parse_www_authenticate(
        'Basic realm="r1", Bearer realm="r2", error="invalid_token", DPoP algs="ES256"'
    )
    assert [c.scheme for c in chs] == ["Basic", "Bearer", "DPoP"]
    assert chs[1].params == {"realm": "r2", "error": "invalid_token"}
    assert bearer_challenge(chs and 'Basic realm="r1", Bearer scope="s"').scopes == ["s"]


def test_several_header_values_as_list():
    chs = parse_www_authenticate(['Basic realm="a"', 'Bearer scope="x y"'])
    assert bearer_challenge(['Basic realm="a"', 'Bearer scope="x y"']).scopes == ["x", "y"]
    assert len(chs) == 2


def test_token68_then_bearer():
    chs = parse_www_authenticate('Negotiate YIIB==, Bearer realm="r"')
    assert chs[0].token68 == "YIIB=="
    assert chs[1].scheme == "Bearer" and chs[1].get("realm") == "r"


@pytest.mark.parametrize(
    "header, expected",
    [
        (
            "bearer scope=x,error=invalid_token",
            {"scope": "x", "error": "invalid_token"},
        ),  # case, bare values
        (
            'BEARER   Scope="a"  ,  ERROR="e"',
            {"scope": "a", "error": "e"},
        ),  # param names are case-insensitive
        ('Bearer realm="a" scope="b"', {"realm": "a", "scope": "b"}),  # missing comma
        (
            "Bearer resource_metadata=https://h/.well-known/x?y=1",
            {"resource_metadata": "https://h/.well-known/x?y=1"},
        ),
        ('Bearer scope="a", scope="b"', {"scope": "a"}),  # duplicate: first wins
        ('Bearer error="unterminated', {"error": "unterminated"}),
    ],
)
def test_lenient_forms(header, expected):
    assert bearer_challenge(header).params == expected


def test_no_bearer_and_garbage():
    assert bearer_challenge('Basic realm="x"') is None
    assert bearer_challenge(None) is None
    assert bearer_challenge("") is None
    assert parse_www_authenticate(", ,=,") == []
    ch = bearer_challenge("Bearer")
    assert ch is not None and ch.params == {} and ch.scopes is None


def test_empty_scope_is_none():
    assert bearer_challenge('Bearer scope=""').scopes is None
    assert bearer_challenge('Bearer scope="  a   b "').scopes == ["a", "b"]
