"""A skill that passed its checks and is loaded: its SKILL.md, and its other files on demand.

Owns: ``LoadedSkill`` (the acting window of SEP-2640: it holds the entry it was loaded
from, reads only files that entry lists, verifies each read, and refuses everything once
one check failed), ``compare_frontmatter`` and ``read_skill_md`` (the load-time checks).
It reads through a plain callable the Session gives it, never the Session itself.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable
from typing import Any

from .entry import (
    MAX_TOTAL_BYTES,
    SkillEntry,
    SkillFile,
    SkillVerificationError,
)
from .frontmatter import FrontmatterError, parse_yaml, same_value, split_frontmatter

__all__ = ["LoadedSkill", "Reader", "compare_frontmatter", "read_skill_md"]

#: reads one file of a skill: ``(uri, manifest line or None) -> bytes`` (verified and
#: cached by the reader when a manifest line is given)
Reader = Callable[[str, "SkillFile | None"], bytes]


def compare_frontmatter(uri: str, text: str, listed: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``(frontmatter, body)`` of a SKILL.md, or ``SkillVerificationError`` when its YAML
    frontmatter differs from the entry's, field by field (or cannot be read)."""
    try:
        yaml_text, body = split_frontmatter(text)
        parsed = parse_yaml(yaml_text)
    except FrontmatterError as exc:
        raise SkillVerificationError(
            f"{uri}: frontmatter unreadable ({exc}); the skill was not loaded",
            uri=uri,
            check="frontmatter",
        ) from None
    if not isinstance(parsed, dict):
        raise SkillVerificationError(
            f"{uri}: the frontmatter is not a mapping; the skill was not loaded",
            uri=uri,
            check="frontmatter",
        )
    differ = sorted(
        k for k in parsed.keys() | listed.keys()
        if k not in parsed or k not in listed or not same_value(parsed[k], listed[k])
    )  # fmt: skip
    if differ:
        raise SkillVerificationError(
            f"{uri}: the file's frontmatter differs from the skill's entry in "
            f"{', '.join(repr(k) for k in differ[:8])}; the skill was not loaded",
            uri=uri,
            check="frontmatter",
        )
    return parsed, body


def _text(uri: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillVerificationError(
            f"{uri}: not UTF-8 text; the skill was not loaded", uri=uri, check="frontmatter"
        ) from None


def read_skill_md(entry: SkillEntry, read: Reader) -> tuple[str, dict[str, Any], str]:
    """Read and check a skill's SKILL.md: ``(text, frontmatter, body)``."""
    line = entry.file(entry.uri)
    data = read(entry.uri, line)  # verified against ``line`` by the reader
    if entry.dynamic and len(data) > MAX_TOTAL_BYTES:
        raise SkillVerificationError(
            f"{entry.uri}: over {MAX_TOTAL_BYTES} bytes", uri=entry.uri, check="size"
        )
    text = _text(entry.uri, data)
    front, body = compare_frontmatter(entry.uri, text, entry.frontmatter)
    return text, front, body


class LoadedSkill:
    """A loaded skill from one server (``origin``: the session's name, host-assigned).

    ``text`` is the verified SKILL.md. ``read_text(path)`` / ``read_bytes(path)`` read a
    file the entry lists, lazily, verified against its size and digest; a path the entry
    does not list, or any failed check, is a ``SkillVerificationError``, and after one
    the skill reads nothing more. Skill content is untrusted input: ``for_model()`` tags
    it with its origin. Frontmatter fields that would widen permissions
    (``allowed-tools``) are data here: nothing in mcpsync acts on them.
    """

    def __init__(
        self,
        entry: SkillEntry,
        *,
        origin: str,
        text: str,
        frontmatter: dict[str, Any],
        body: str,
        reader: Reader,
    ) -> None:
        self.entry = entry
        self.origin = origin
        self.text = text
        self.frontmatter = frontmatter
        self.body = body
        self._read = reader
        self._lock = threading.Lock()
        self._refused: SkillVerificationError | None = None
        self._dynamic_bytes = len(text.encode("utf-8"))

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def uri(self) -> str:
        return self.entry.uri

    @property
    def refused(self) -> SkillVerificationError | None:
        """The check that failed (the skill reads nothing more), or None."""
        return self._refused

    def files(self) -> list[str]:
        """The paths the entry lists (``[]`` for a dynamic skill)."""
        return self.entry.files()

    def _resolve(self, path: str) -> tuple[str, SkillFile | None]:
        root = self.entry.root
        if path.startswith(root + "/"):
            path = path[len(root) + 1 :]
        elif "://" in path:
            raise self._refuse(path, f"{path}: not a file of skill {self.entry.uri}")
        clean = posixpath.normpath(path)
        if clean.startswith(("..", "/")) or clean in (".", ""):
            raise self._refuse(path, f"{path!r}: outside skill {self.entry.uri}")
        uri = f"{root}/{clean}"
        if self.entry.dynamic:
            return uri, None
        line = self.entry.file(uri)
        if line is None:
            raise self._refuse(
                uri, f"{uri}: not listed in the entry of skill {self.entry.uri}; nothing was read"
            )
        return uri, line

    def _refuse(self, uri: str, message: str) -> SkillVerificationError:
        error = SkillVerificationError(message, uri=uri, check="unlisted")
        with self._lock:
            self._refused = self._refused or error
        return error

    def read_bytes(self, path: str) -> bytes:
        """One file of the skill (a path inside it, or its full URI), verified."""
        with self._lock:
            if self._refused is not None:
                raise SkillVerificationError(
                    f"skill {self.entry.uri} was refused ({self._refused}); nothing more is read",
                    uri=self._refused.uri,
                    check=self._refused.check,
                )
        uri, line = self._resolve(path)
        try:
            data = self._read(uri, line)
        except SkillVerificationError as exc:
            with self._lock:
                self._refused = self._refused or exc
            raise
        if line is None:  # dynamic: only the total-size limit applies
            with self._lock:
                self._dynamic_bytes += len(data)
                over = self._dynamic_bytes > MAX_TOTAL_BYTES
            if over:
                raise self._refuse(
                    uri, f"{uri}: skill {self.entry.uri} is over {MAX_TOTAL_BYTES} bytes"
                )
        return data

    def read_text(self, path: str) -> str:
        """``read_bytes(path)`` decoded as UTF-8."""
        data = self.read_bytes(path)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise SkillVerificationError(
                f"{path}: not UTF-8 text", uri=path, check="digest"
            ) from None

    def for_model(self) -> str:
        """The SKILL.md text tagged with its origin, for a model's context."""
        return (
            f'<mcp-skill name="{self.entry.name}" server="{self.origin}" uri="{self.entry.uri}">\n'
            f"{self.text}\n</mcp-skill>"
        )

    def __repr__(self) -> str:
        state = f" refused={self._refused.check}" if self._refused else ""
        return f"<LoadedSkill {self.entry.name!r} from {self.origin!r}{state}>"
