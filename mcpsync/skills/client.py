"""One session's side of the skills extension (SEP-2640, ``io.modelcontextprotocol/skills``).

Owns: ``Skills``, the member a ``Session`` holds as ``session.skills``, with
``supported``, ``problems``, ``list``, ``get`` and ``load`` (the Session's
``skills_supported``, ``skill_problems``, ``list_skills``, ``get_skill`` and ``load_skill``
are one-line delegates to them). It is given what it uses at construction: the session's
name, its request functions (``call``: one request through the era, capability checked;
``page``: one ``skills/list`` page; ``require``: the capability check), the server's
capabilities as agreed (a function: they change when the session is initialized again),
the hint cache and the keys the listing is cached under. The listing is cached per server
in that hint cache as its ``ttlMs`` / ``cacheScope`` allow; verified files in a
``SkillFileCache``. Nothing of a skill is read before ``load``; a supporting file only
when it is read.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ProtocolError, RequestTimeout, ServerError

if TYPE_CHECKING:
    from ..protocol.modern.cache import HintCache
    from .cache import SkillFileCache
    from .entry import SkillEntry, SkillFile
    from .loaded import LoadedSkill

# The rest of the package (entries, the frontmatter parser, the loaded skill, the file
# cache) is imported by the methods that use it: a Session that never touches skills
# never loads it (``import mcpsync`` stays cheap).

__all__ = ["Skills"]

log = logging.getLogger("mcpsync")

_MAX_PAGES = 1000
_INVALID_PARAMS = -32602


class Skills:
    """What one session holds of its server's skills, and the calls that read them."""

    def __init__(
        self,
        *,
        name: str,
        call: Callable[[str, dict[str, Any] | None, Callable[[Any], Any]], Any],
        page: Callable[[str, dict[str, Any] | None, float | None], Any],
        require: Callable[[str], None],
        capabilities: Callable[[], Any],
        hints: HintCache,
        server_key: str | None,
        credential_key: str | None,
        keep_alive: Any,
        timeout: float | None,
        files: SkillFileCache | None = None,
    ) -> None:
        self.name = name
        self._call = call
        self._page = page  # one page, blocking: (method, params, timeout) -> result
        self._require = require
        self._capabilities = capabilities
        self._hints = hints
        self._server, self._credential = server_key, credential_key
        self._keep_alive = keep_alive  # held by cache entries it keys (auth objects)
        self._timeout = timeout  # bounds a whole listing, all pages together
        #: verified skill files (tests give a session its own; None: the process-wide ``SKILL_FILES``)
        self.files = files
        self._lock = threading.Lock()
        self._entries: builtins.list[SkillEntry] | None = None  # the last listing, valid entries
        self._problems: dict[str, str] = {}  # uri -> why its entry was refused

    @property
    def supported(self) -> bool:
        """Whether the server declared the skills extension."""
        from .entry import EXTENSION_ID

        caps = self._capabilities()
        extensions = caps.get("extensions") if isinstance(caps, dict) else None
        return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION_ID), dict)

    @property
    def problems(self) -> dict[str, str]:
        """Entries of the last listing that were refused: SKILL.md URI -> the reason."""
        with self._lock:
            return dict(self._problems)

    # -- listing -------------------------------------------------------------------------

    def list(self, *, refresh: bool = False) -> builtins.list[SkillEntry]:
        """Every skill the server lists (all pages), checked; nothing of any skill is read.

        Entries that break the extension's rules are left out and logged (see
        ``skill_problems``). The listing is reused while its ``ttlMs`` lasts, shared as
        its ``cacheScope`` allows; ``refresh=True`` asks the server again.
        """
        from .entry import SkillInvalid, parse_entry

        self._require("skills/list")
        server, credential = self._server, self._credential
        hints = self._hints
        if refresh:
            hints.invalidate(server, ["skills/list"])
        cached = None if refresh else hints.get(server, credential, "skills/list", None)
        raw = cached if cached is not None else self._fetch_listing()
        entries, problems = [], {}
        for item in raw["skills"]:
            try:
                entries.append(parse_entry(item))
            except SkillInvalid as exc:
                uri = item.get("uri") if isinstance(item, dict) else None
                problems[str(uri)] = str(exc)
        if cached is None:
            if problems:
                log.warning("mcpsync: %s: %d skill entr%s refused: %s", self.name, len(problems),
                            "y" if len(problems) == 1 else "ies", "; ".join(problems.values()))  # fmt: skip
            hints.put(server, credential, "skills/list", None, raw, keep_alive=self._keep_alive)
        with self._lock:
            self._entries = entries
            self._problems = problems
        return list(entries)

    def _fetch_listing(self) -> dict[str, Any]:
        """Every page of ``skills/list`` as one result: the skills, the shortest ``ttlMs``,
        and ``cacheScope`` "public" only when every page said so; all pages within the
        session's timeout (each sent with what is left of it)."""
        skills: list[Any] = []
        ttls: list[int] = []
        public = True
        cursor: str | None = None
        seen: set[str] = set()
        timeout = self._timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        for pages in range(_MAX_PAGES):
            left = None if deadline is None else deadline - time.monotonic()
            late = RequestTimeout(
                f"{self.name}: skills/list did not arrive whole within timeout={timeout} s "
                f"({pages} pages received)"
            )
            if left is not None and left <= 0:
                raise late
            try:
                page = self._page("skills/list", {"cursor": cursor} if cursor else None, left)
            except RequestTimeout as exc:
                raise late from exc
            if not isinstance(page, dict) or not isinstance(page.get("skills"), list):
                raise ProtocolError(f"{self.name}: skills/list result has no 'skills' list")
            skills.extend(page["skills"])
            ttl = page.get("ttlMs")
            ttls.append(ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else 0)
            public = public and page.get("cacheScope") == "public"
            cursor = page.get("nextCursor")
            if not cursor:
                break
            if not isinstance(cursor, str) or cursor in seen:
                raise ProtocolError(f"{self.name}: skills/list repeated its cursor {cursor!r}")
            seen.add(cursor)
        else:
            raise ProtocolError(f"{self.name}: skills/list ran past {_MAX_PAGES} pages")
        return {
            "skills": skills,
            "ttlMs": min(ttls),
            "cacheScope": "public" if public else "private",
        }

    def get(self, uri: str) -> SkillEntry:
        """The server's current entry for the skill whose SKILL.md is ``uri`` (``skills/get``).

        ``SkillNotFound`` when the server serves no such skill; ``SkillInvalid`` when
        its entry breaks the rules.
        """
        from .entry import SkillInvalid, SkillNotFound, parse_entry

        self._require("skills/get")
        try:
            result = self._call("skills/get", {"uri": str(uri)}, _raw)
        except ServerError as exc:
            if exc.code == _INVALID_PARAMS:
                raise SkillNotFound(f"{self.name} serves no skill at {uri}: {exc}") from None
            raise
        skill = result.get("skill") if isinstance(result, dict) else None
        entry = parse_entry(skill)
        if entry.uri != str(uri):
            raise SkillInvalid(f"skills/get for {uri} answered the entry of {entry.uri}")
        return entry

    # -- loading -------------------------------------------------------------------------

    def _find(self, name_or_uri: str) -> SkillEntry:
        from .entry import SkillInvalid, SkillNotFound

        entries = self.list()  # the held listing while its ttlMs lasts, else a fresh one
        if "://" in name_or_uri:
            found = [e for e in entries if e.uri == name_or_uri]
            if found:
                return found[0]
            problem = self.problems.get(name_or_uri)
            if problem:
                raise SkillInvalid(problem)
            return self.get(name_or_uri)  # listings may be partial: ask for it
        found = [e for e in entries if e.name == name_or_uri]
        if len(found) > 1:
            raise SkillNotFound(
                f"{self.name} lists {len(found)} skills named {name_or_uri!r} "
                f"({', '.join(e.uri for e in found)}); load one by its uri"
            )
        if not found:
            refused = [
                p for uri, p in self.problems.items() if uri.endswith(f"/{name_or_uri}/SKILL.md")
            ]
            if refused:
                raise SkillInvalid(refused[0])
            raise SkillNotFound(f"{self.name} lists no skill named {name_or_uri!r}")
        return found[0]

    def load(self, name_or_uri: str, *, allow_dynamic: bool = False) -> LoadedSkill:
        """Load a skill by name (within this server's listing) or by its SKILL.md URI.

        Reads SKILL.md (and nothing else), checks its byte size and ``sha256`` digest
        against the entry, parses its YAML frontmatter and compares it field by field
        with the entry's. Any failure raises ``SkillVerificationError`` and nothing
        further is read. A skill whose entry says ``resources: "dynamic"`` offers no
        integrity and is refused (``SkillInvalid``) unless ``allow_dynamic=True``.
        The returned ``LoadedSkill`` reads its other files on demand, each verified.
        """
        from .entry import SkillInvalid
        from .loaded import LoadedSkill, read_skill_md

        entry = self._find(str(name_or_uri))
        if entry.dynamic and not allow_dynamic:
            raise SkillInvalid(
                f"skill {entry.uri} of {self.name} is dynamic: it offers no content integrity "
                "(load_skill(..., allow_dynamic=True) to load it anyway)"
            )
        reader = self._skill_reader()
        text, front, body = read_skill_md(entry, reader)
        return LoadedSkill(
            entry, origin=self.name, text=text, frontmatter=front, body=body, reader=reader
        )

    def _skill_reader(self) -> Callable[[str, SkillFile | None], bytes]:
        from .cache import SKILL_FILES
        from .entry import verify_bytes

        server, credential = self._server, self._credential
        files = self.files if self.files is not None else SKILL_FILES

        def read(uri: str, line: SkillFile | None) -> bytes:
            if line is not None:
                hit = files.get(server, credential, uri, line.digest)
                if hit is not None:
                    return hit
            result = self._call("resources/read", {"uri": uri}, _raw)
            data = _content_bytes(uri, result)
            if line is not None:
                verify_bytes(data, line)
                public = isinstance(result, dict) and result.get("cacheScope") == "public"
                files.put(server, credential, uri, line.digest, data, public=public)
            return data

        return read


def _raw(result: Any) -> Any:
    return result


def _content_bytes(uri: str, result: Any) -> bytes:
    """The raw bytes of a ``resources/read`` result for ``uri`` (text as UTF-8, blob decoded)."""
    from .entry import SkillError, SkillVerificationError

    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list) or not contents:
        raise SkillError(f"resources/read of {uri} returned no contents")
    parts = [c for c in contents if isinstance(c, dict) and c.get("uri") == uri]
    if len(parts) != 1:
        parts = contents if len(contents) == 1 else []
    if len(parts) != 1 or not isinstance(parts[0], dict):
        raise SkillVerificationError(
            f"resources/read of {uri} returned {len(contents)} contents, none of them only {uri}",
            uri=uri,
            check="digest",
        )
    part = parts[0]
    if isinstance(part.get("text"), str):
        return part["text"].encode("utf-8")
    if isinstance(part.get("blob"), str):
        try:
            return base64.b64decode(part["blob"], validate=True)
        except (binascii.Error, ValueError):
            raise SkillVerificationError(
                f"resources/read of {uri}: blob is not base64", uri=uri, check="digest"
            ) from None
    raise SkillError(f"resources/read of {uri} returned neither text nor blob")
