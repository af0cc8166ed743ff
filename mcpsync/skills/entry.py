"""Skill entries (SEP-2640) as values, checked before anything is read.

Owns: the typed errors of the skills extension (``SkillError`` and its kinds),
``SkillFile`` and ``SkillEntry`` (one ``skills/list`` / ``skills/get`` entry, validated:
URI shape, naming rules, frontmatter, the complete ``resources`` manifest, the per-skill
limits), and ``verify_bytes`` (a read checked against its manifest line: size first, then
the ``sha256`` digest). Pure functions over JSON values: no I/O here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import MCPSyncError

__all__ = [
    "EXTENSION_ID",
    "MAX_FILES",
    "MAX_TOTAL_BYTES",
    "SkillEntry",
    "SkillError",
    "SkillFile",
    "SkillInvalid",
    "SkillNotFound",
    "SkillVerificationError",
    "parse_entry",
    "verify_bytes",
]

#: the extension's identifier in ``capabilities.extensions``
EXTENSION_ID = "io.modelcontextprotocol/skills"
#: the per-skill limits every host must accept (and this one enforces)
MAX_FILES = 512
MAX_TOTAL_BYTES = 16 * 1024 * 1024

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*\Z")


class SkillError(MCPSyncError):
    """A skill could not be listed or loaded; the message says which and why."""


class SkillNotFound(SkillError, LookupError):
    """No skill of that name or URI on this server (or the name is ambiguous)."""


class SkillInvalid(SkillError):
    """The server's entry for a skill breaks the extension's rules; the skill is not loaded."""


class SkillVerificationError(SkillError):
    """A skill file did not match its entry (size, digest, frontmatter, or an unlisted file).

    The content was not used, and the skill reads nothing further. ``check`` is
    ``"size"``, ``"digest"``, ``"frontmatter"`` or ``"unlisted"``.
    """

    def __init__(self, message: str, *, uri: str, check: str) -> None:
        self.uri = uri
        self.check = check
        super().__init__(message)


@dataclass(frozen=True)
class SkillFile:
    """One line of a skill's manifest: a file's URI, ``sha256:`` digest and byte size."""

    uri: str
    digest: str
    size: int
    #: the file's path inside the skill (``SKILL.md``, ``references/FORMS.md``)
    path: str


@dataclass(frozen=True)
class SkillEntry:
    """A skill as its server describes it, checked. Nothing of the skill has been read."""

    uri: str
    name: str
    description: str
    #: the SKILL.md frontmatter as the server rendered it (a copy)
    frontmatter: dict[str, Any] = field(repr=False)
    #: the complete manifest, or ``"dynamic"`` (no integrity offered)
    resources: tuple[SkillFile, ...] | Literal["dynamic"] = field(repr=False)
    #: ``skill://<this>/SKILL.md``: the skill's directory URI (no trailing slash)
    root: str = field(repr=False, default="")

    @property
    def dynamic(self) -> bool:
        return self.resources == "dynamic"

    @property
    def total_size(self) -> int | None:
        return None if isinstance(self.resources, str) else sum(f.size for f in self.resources)

    def file(self, path_or_uri: str) -> SkillFile | None:
        """The manifest line for a path inside the skill (or a full URI), or None."""
        if isinstance(self.resources, str):
            return None
        for f in self.resources:
            if path_or_uri in (f.path, f.uri):
                return f
        return None

    def files(self) -> list[str]:
        """The paths of the skill's files (``[]`` for a dynamic skill)."""
        return [] if isinstance(self.resources, str) else [f.path for f in self.resources]


def parse_entry(raw: Any) -> SkillEntry:
    """A ``SkillEntry`` from one raw entry; ``SkillInvalid`` naming the first rule broken."""
    if not isinstance(raw, dict):
        raise SkillInvalid(f"a skill entry is not an object: {type(raw).__name__}")
    uri = raw.get("uri")
    if not isinstance(uri, str) or not uri:
        raise SkillInvalid("a skill entry has no uri")
    where = f"skill entry {uri!r}"
    if "://" not in uri or not uri.endswith("/SKILL.md"):
        raise SkillInvalid(f"{where}: the uri must be <scheme>://<skill-path>/SKILL.md")
    root = uri[: -len("/SKILL.md")]
    segments = [s for s in root.split("://", 1)[1].split("/") if s]
    if not segments or any(s in (".", "..") for s in segments):
        raise SkillInvalid(f"{where}: the uri has no valid skill path")
    front = raw.get("frontmatter")
    if not isinstance(front, dict):
        raise SkillInvalid(f"{where}: frontmatter is missing or not an object")
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not name or not isinstance(description, str) or not description:
        raise SkillInvalid(f"{where}: frontmatter lacks a non-empty name and description")
    if segments[-1] != name:
        raise SkillInvalid(
            f"{where}: the last path segment {segments[-1]!r} is not the frontmatter name {name!r}"
        )
    if len(name) > 64 or not _NAME.match(name):
        raise SkillInvalid(
            f"{where}: name {name!r} breaks the naming rules (1-64 lowercase letters, digits "
            "and single hyphens, not at either end)"
        )
    resources = _manifest(raw.get("resources"), uri, root, where)
    return SkillEntry(uri, name, description, dict(front), resources, root)


def _manifest(
    value: Any, uri: str, root: str, where: str
) -> tuple[SkillFile, ...] | Literal["dynamic"]:
    if value == "dynamic":
        return "dynamic"
    if not isinstance(value, list):
        raise SkillInvalid(f"{where}: resources must be a list of files or 'dynamic'")
    if len(value) > MAX_FILES:
        raise SkillInvalid(f"{where}: {len(value)} files, over the limit of {MAX_FILES}")
    files: list[SkillFile] = []
    seen: set[str] = set()
    total = 0
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise SkillInvalid(f"{where}: resources[{i}] is not an object")
        f_uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
        if not isinstance(f_uri, str) or not f_uri.startswith(root + "/"):
            raise SkillInvalid(f"{where}: resources[{i}] uri {f_uri!r} is outside the skill")
        path = f_uri[len(root) + 1 :]
        if not path or any(p in ("", ".", "..") for p in path.split("/")):
            raise SkillInvalid(f"{where}: resources[{i}] uri {f_uri!r} has a bad path")
        if f_uri in seen:
            raise SkillInvalid(f"{where}: {f_uri!r} is listed twice")
        if not isinstance(digest, str) or not _DIGEST.match(digest):
            raise SkillInvalid(f"{where}: {f_uri!r} has no sha256:<64 lowercase hex> digest")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise SkillInvalid(f"{where}: {f_uri!r} has no byte size")
        total += size
        seen.add(f_uri)
        files.append(SkillFile(f_uri, digest, size, path))
    if uri not in seen:
        raise SkillInvalid(f"{where}: the manifest does not list SKILL.md itself")
    if total > MAX_TOTAL_BYTES:
        raise SkillInvalid(f"{where}: {total} bytes in all, over the limit of {MAX_TOTAL_BYTES}")
    return tuple(files)


def verify_bytes(data: bytes, expected: SkillFile) -> None:
    """``SkillVerificationError`` unless ``data`` has the manifest's size and digest."""
    if len(data) != expected.size:
        raise SkillVerificationError(
            f"{expected.uri}: {len(data)} bytes read, the skill's entry says {expected.size}; "
            "the content was not used",
            uri=expected.uri,
            check="size",
        )
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != expected.digest:
        raise SkillVerificationError(
            f"{expected.uri}: content digest {actual[:19]}... is not the entry's "
            f"{expected.digest[:19]}...; the content was not used",
            uri=expected.uri,
            check="digest",
        )
