"""The one protocol-version list (mcpsync.versions) and who reads it."""

from __future__ import annotations

import pytest

from mcpsync import versions
from mcpsync.protocol import choose, legacy, probe
from mcpsync.protocol import modern as modern_era


def test_one_list_read_by_both_eras() -> None:
    assert choose.MODERN_VERSIONS is versions.MODERN_VERSIONS
    assert choose.HANDSHAKE_VERSIONS is versions.HANDSHAKE_VERSIONS
    assert probe.MODERN_VERSIONS is versions.MODERN_VERSIONS
    assert legacy.HANDSHAKE_VERSIONS is versions.HANDSHAKE_VERSIONS
    assert modern_era.envelope.MODERN_VERSIONS is versions.MODERN_VERSIONS
    assert versions.ALL_VERSIONS == (*versions.MODERN_VERSIONS, *versions.HANDSHAKE_VERSIONS)
    assert versions.LATEST_HANDSHAKE_VERSION == "2025-11-25"
    assert list(versions.HANDSHAKE_VERSIONS) == sorted(versions.HANDSHAKE_VERSIONS, reverse=True)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2026-07-28", True),
        ("2027-01-01", True),  # a newer dated version keeps the stateless wire rules
        ("2025-11-25", False),
        ("2024-11-05", False),
        ("", False),
        (None, False),
        ("3000", False),
        ("2026-07-28-draft", False),
    ],
)
def test_is_modern(version: str | None, expected: bool) -> None:
    assert versions.is_modern(version) is expected


def test_era_of() -> None:
    assert versions.era_of("2026-07-28") == "modern"
    assert versions.era_of("2025-03-26") == "legacy"
    assert versions.era_of("2027-01-01") is None
