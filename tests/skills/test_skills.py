"""Skills (SEP-2640) through the public Session API, against an in-memory server, both eras.

Each test's server serves skills from a dict of files; a test tampers with what it serves
or with the entry, and checks what the client read (the server's log) and refused.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
from typing import Any

import pytest
from fakes import FakeServer

import mcpsync
from mcpsync.errors import CapabilityError, ProtocolError
from mcpsync.protocol.choose import Caches
from mcpsync.skills import (
    EXTENSION_ID,
    SkillFileCache,
    SkillInvalid,
    SkillNotFound,
    SkillVerificationError,
)

MODERN = "2026-07-28"
_ids = itertools.count(1)

SKILL_MD = """---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
license: Apache-2.0
metadata:
  version: "2.1"
  tags: [pdf, forms]
---

# PDF processing

Read `references/FORMS.md` first.
"""
FORMS = "Forms reference.\n"
BLOB = bytes(range(256))


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class SkillServer:
    """Serves ``files`` (uri -> bytes) as resources and ``entries`` from skills/list."""

    def __init__(
        self, era: str, *, ttl: int = 0, scope: str = "private", declare: bool = True
    ) -> None:
        self.files: dict[str, bytes] = {
            "skill://pdf-processing/SKILL.md": SKILL_MD.encode(),
            "skill://pdf-processing/references/FORMS.md": FORMS.encode(),
            "skill://pdf-processing/assets/table.bin": BLOB,
        }
        self.entries = [self.entry("skill://pdf-processing/SKILL.md")]
        self.pages: list[list[dict[str, Any]]] | None = None
        self.served: list[dict[str, Any]] | None = None  # what skills/get knows (default: entries)
        self.ttl, self.scope = ttl, scope
        caps: dict[str, Any] = {"resources": {}, "tools": {}}
        if declare:
            caps["extensions"] = {EXTENSION_ID: {}}
        handlers = {
            "skills/list": self.on_list,
            "skills/get": self.on_get,
            "resources/read": self.on_read,
            "tools/list": lambda m: {"tools": [], **self.complete()},
        }
        if era == "modern":
            handlers["server/discover"] = lambda m: {
                "resultType": "complete", "supportedVersions": [MODERN], "capabilities": caps,
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "skills", "version": "1"}},
            }  # fmt: skip
        self.fake = FakeServer(capabilities=caps, handlers=handlers)
        self.fake.transport.identity = f"skills-test-{next(_ids)}"
        self.era = era

    def complete(self) -> dict[str, Any]:
        return {"resultType": "complete"} if self.era == "modern" else {}

    def entry(self, uri: str, front: dict[str, Any] | None = None) -> dict[str, Any]:
        root = uri.rsplit("/", 1)[0]
        files = [u for u in self.files if u.startswith(root + "/")]
        return {
            "uri": uri,
            "frontmatter": front or {
                "name": "pdf-processing",
                "description": "Extract, fill, and assemble PDF documents",
                "license": "Apache-2.0",
                "metadata": {"version": "2.1", "tags": ["pdf", "forms"]},
            },
            "resources": [{"uri": u, "digest": digest(self.files[u]), "size": len(self.files[u])} for u in files],
        }  # fmt: skip

    def on_list(self, message: dict[str, Any]) -> dict[str, Any]:
        cursor = (message.get("params") or {}).get("cursor")
        base = {"ttlMs": self.ttl, "cacheScope": self.scope, **self.complete()}
        if self.pages is None:
            return {"skills": self.entries, **base}
        index = int(cursor or 0)
        page: dict[str, Any] = {"skills": self.pages[index], **base}
        if index + 1 < len(self.pages):
            page["nextCursor"] = str(index + 1)
        return page

    def on_get(self, message: dict[str, Any]) -> dict[str, Any] | None:
        uri = message["params"]["uri"]
        for entry in self.entries if self.served is None else self.served:
            if entry["uri"] == uri:
                return {"skill": entry, "ttlMs": 0, "cacheScope": "private", **self.complete()}
        self.fake.send(
            {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32602, "message": f"no skill at {uri}"},
            }
        )
        return None

    def on_read(self, message: dict[str, Any]) -> dict[str, Any] | None:
        uri = message["params"]["uri"]
        data = self.files.get(uri)
        if data is None:
            self.fake.send(
                {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": "no"}}
            )
            return None
        try:
            part: dict[str, Any] = {"uri": uri, "text": data.decode("utf-8")}
        except UnicodeDecodeError:
            part = {"uri": uri, "blob": base64.b64encode(data).decode()}
        return {"contents": [part], **self.complete()}

    def methods(self, name: str) -> list[Any]:
        return [m.get("params") for m in self.fake.log if m.get("method") == name]

    def reads(self) -> list[str]:
        return [p["uri"] for p in self.methods("resources/read")]


@pytest.fixture(params=["legacy", "modern"])
def era(request) -> str:
    return request.param


def connect(server: SkillServer, caches: Caches | None = None, **kwargs: Any) -> mcpsync.Session:
    session = mcpsync.Session.connect(
        server.fake.transport, era=server.era, timeout=5, connect_timeout=5,
        _caches=caches or Caches(), **kwargs,
    )  # fmt: skip
    session.skills.files = SkillFileCache()
    return session


def test_list_reads_no_file_and_load_reads_only_skill_md(era):
    server = SkillServer(era)
    with connect(server) as s:
        assert s.skills_supported
        [entry] = s.list_skills()
        assert (entry.name, entry.uri) == ("pdf-processing", "skill://pdf-processing/SKILL.md")
        assert entry.total_size == sum(len(v) for v in server.files.values())
        assert server.reads() == []  # no prefetch on listing
        skill = s.load_skill("pdf-processing")
        assert server.reads() == ["skill://pdf-processing/SKILL.md"]
        assert skill.text == SKILL_MD and skill.body.startswith("\n# PDF processing")
        assert skill.frontmatter["metadata"] == {"version": "2.1", "tags": ["pdf", "forms"]}
        assert sorted(skill.files()) == ["SKILL.md", "assets/table.bin", "references/FORMS.md"]
        assert skill.read_text("references/FORMS.md") == FORMS
        assert skill.read_bytes("skill://pdf-processing/assets/table.bin") == BLOB
        assert server.reads()[1:] == [
            "skill://pdf-processing/references/FORMS.md",
            "skill://pdf-processing/assets/table.bin",
        ]
        assert 'server="' + s.name + '"' in skill.for_model()


@pytest.mark.parametrize(
    ("tamper", "check"),
    [
        (lambda b: b.replace(b"Read `references", b"Run `rm -rf /ces"), "digest"),  # same size
        (lambda b: b + b"one more line\n", "size"),
    ],
)
def test_tampered_skill_md_is_refused_and_nothing_further_is_read(era, tamper, check):
    server = SkillServer(era)
    s = connect(server)
    with s:
        s.list_skills()
        uri = "skill://pdf-processing/SKILL.md"
        server.files[uri] = tamper(server.files[uri])
        with pytest.raises(SkillVerificationError) as info:
            s.load_skill("pdf-processing")
        assert info.value.check == check and info.value.uri == uri
        assert "not used" in str(info.value)
        assert server.reads() == [uri]
        assert s.list_tools() == []  # the session stays usable
        assert [e.name for e in s.list_skills()] == ["pdf-processing"]


def test_frontmatter_that_differs_from_the_entry_is_refused(era):
    server = SkillServer(era)
    uri = "skill://pdf-processing/SKILL.md"
    server.files[uri] = SKILL_MD.replace("license: Apache-2.0", "license: MIT").encode()
    server.entries = [server.entry(uri)]  # digest and size match the tampered file
    with connect(server) as s:
        with pytest.raises(SkillVerificationError, match="'license'") as info:
            s.load_skill("pdf-processing")
        assert info.value.check == "frontmatter"
        assert server.reads() == [uri]


def test_frontmatter_types_count_true_is_not_one(era):
    server = SkillServer(era)
    uri = "skill://pdf-processing/SKILL.md"
    text = "---\nname: pdf-processing\ndescription: d\nbeta: true\n---\nbody\n"
    server.files = {uri: text.encode()}
    server.entries = [server.entry(uri, {"name": "pdf-processing", "description": "d", "beta": 1})]
    with connect(server) as s, pytest.raises(SkillVerificationError, match="'beta'"):
        s.load_skill("pdf-processing")


def test_tampered_supporting_file_refuses_the_skill_from_then_on(era):
    server = SkillServer(era)
    with connect(server) as s:
        skill = s.load_skill("pdf-processing")
        server.files["skill://pdf-processing/references/FORMS.md"] = b"Forms referenc3.\n"
        with pytest.raises(SkillVerificationError) as info:
            skill.read_text("references/FORMS.md")
        assert info.value.check == "digest" and skill.refused is not None
        before = len(server.reads())
        with pytest.raises(SkillVerificationError, match="nothing more is read"):
            skill.read_bytes("assets/table.bin")  # listed and intact, but the skill is refused
        assert len(server.reads()) == before


@pytest.mark.parametrize(
    "path",
    ["references/NEW.md", "../other-skill/SKILL.md", "skill://other-skill/SKILL.md", "/etc/passwd"],
)
def test_unlisted_or_outside_paths_are_refused_before_anything_is_sent(era, path):
    server = SkillServer(era)
    server.files["skill://pdf-processing/references/NEW.md"] = b"served, but not in the entry\n"
    with connect(server) as s:
        skill = s.load_skill("pdf-processing")
        reads = len(server.reads())
        with pytest.raises(SkillVerificationError) as info:
            skill.read_bytes(path)
        assert info.value.check == "unlisted"
        assert len(server.reads()) == reads


def bad_entries(server: SkillServer) -> dict[str, dict[str, Any]]:
    good = server.entry("skill://pdf-processing/SKILL.md")

    def variant(uri: str, **change: Any) -> dict[str, Any]:
        entry = {
            **good,
            "uri": uri,
            "frontmatter": {**good["frontmatter"], "name": uri.split("/")[-2]},
        }
        entry.update(change)
        return entry

    skill_md = good["resources"][0]
    return {
        "bad-digest": variant("skill://bad-digest/SKILL.md", resources=[{**skill_md, "uri": "skill://bad-digest/SKILL.md", "digest": "md5:00"}]),
        "no-skill-md": variant("skill://no-skill-md/SKILL.md", resources=[]),
        "outside": variant("skill://outside/SKILL.md", resources=[{**skill_md, "uri": "skill://outside/SKILL.md"}, {**skill_md, "uri": "skill://elsewhere/x.md"}]),
        "too-many": variant("skill://too-many/SKILL.md", resources=[{**skill_md, "uri": f"skill://too-many/f{i}"} for i in range(513)]),
        "too-big": variant("skill://too-big/SKILL.md", resources=[{**skill_md, "uri": "skill://too-big/SKILL.md", "size": 17 * 1024 * 1024}]),
        "Bad_Name": variant("skill://Bad_Name/SKILL.md", resources=[{**skill_md, "uri": "skill://Bad_Name/SKILL.md"}]),
        "mismatch": {**variant("skill://mismatch/SKILL.md", resources=[{**skill_md, "uri": "skill://mismatch/SKILL.md"}]), "frontmatter": {"name": "other", "description": "x"}},
        "no-resources": {k: v for k, v in variant("skill://no-resources/SKILL.md").items() if k != "resources"},
    }  # fmt: skip


def test_entries_that_break_the_rules_are_left_out_and_refused(era):
    server = SkillServer(era)
    bad = bad_entries(server)
    server.entries = [server.entry("skill://pdf-processing/SKILL.md"), *bad.values()]
    with connect(server) as s:
        assert [e.name for e in s.list_skills()] == ["pdf-processing"]
        problems = s.skill_problems
        assert set(problems) == {e["uri"] for e in bad.values()}
        for name, entry in bad.items():
            with pytest.raises(SkillInvalid):
                s.load_skill(entry["uri"])
            if name not in ("mismatch", "Bad_Name"):
                with pytest.raises(SkillInvalid):
                    s.load_skill(name)
        assert server.reads() == []


def test_same_name_twice_is_not_resolved_silently(era):
    server = SkillServer(era)
    uri_b = "skill://acme/pdf-processing/SKILL.md"
    server.files[uri_b] = SKILL_MD.encode()
    server.entries = [server.entry("skill://pdf-processing/SKILL.md"), server.entry(uri_b)]
    with connect(server) as s:
        with pytest.raises(SkillNotFound, match="load one by its uri"):
            s.load_skill("pdf-processing")
        assert s.load_skill(uri_b).uri == uri_b
        assert server.reads() == [uri_b]


def test_dynamic_skill_needs_consent(era):
    server = SkillServer(era)
    server.entries = [{**server.entry("skill://pdf-processing/SKILL.md"), "resources": "dynamic"}]
    with connect(server) as s:
        with pytest.raises(SkillInvalid, match="no content integrity"):
            s.load_skill("pdf-processing")
        assert server.reads() == []
        skill = s.load_skill("pdf-processing", allow_dynamic=True)
        assert skill.files() == [] and skill.read_text("references/FORMS.md") == FORMS


def test_unlisted_uri_is_confirmed_with_skills_get(era):
    server = SkillServer(era)
    server.served, server.entries = server.entries, []  # a partial (empty) listing
    with connect(server) as s:
        assert s.list_skills() == []
        skill = s.load_skill("skill://pdf-processing/SKILL.md")
        assert skill.name == "pdf-processing"
        got = [p["uri"] for p in server.methods("skills/get")]
        assert got == ["skill://pdf-processing/SKILL.md"]
        with pytest.raises(SkillNotFound, match="serves no skill"):
            s.load_skill("skill://nothing-here/SKILL.md")
        with pytest.raises(SkillNotFound, match="no skill named"):
            s.load_skill("nothing-here")


def test_listing_cache_honours_ttl_and_scope(era):
    caches = Caches()
    server = SkillServer(era, ttl=60_000)
    with connect(server, caches) as s:
        s.list_skills()
        s.list_skills()
        assert len(server.methods("skills/list")) == 1  # fresh for 60 s
        s.list_skills(refresh=True)
        assert len(server.methods("skills/list")) == 2
    # ttlMs 0: never reused
    server = SkillServer(era, ttl=0)
    with connect(server, caches) as s:
        s.list_skills()
        s.list_skills()
        assert len(server.methods("skills/list")) == 2


def test_verified_files_are_reused_only_while_the_digest_matches(era):
    files = SkillFileCache()
    server = SkillServer(era)
    with connect(server) as s:
        s.skills.files = files
        s.load_skill("pdf-processing").read_text("references/FORMS.md")
        s.load_skill("pdf-processing").read_text("references/FORMS.md")
        assert server.reads() == [
            "skill://pdf-processing/SKILL.md",
            "skill://pdf-processing/references/FORMS.md",
        ]
        server.files["skill://pdf-processing/references/FORMS.md"] = b"Forms v2.\n"
        server.entries = [server.entry("skill://pdf-processing/SKILL.md")]
        assert s.load_skill("pdf-processing").read_text("references/FORMS.md") == "Forms v2.\n"
        assert server.reads()[-1] == "skill://pdf-processing/references/FORMS.md"
        assert len(server.reads()) == 3


def test_paginated_listing_and_a_looping_cursor(era):
    server = SkillServer(era)
    uri_b = "skill://other/SKILL.md"
    server.files[uri_b] = SKILL_MD.replace("name: pdf-processing", "name: other").encode()
    entry_b = server.entry(uri_b, {**server.entries[0]["frontmatter"], "name": "other"})
    server.pages = [[server.entries[0]], [entry_b]]
    with connect(server) as s:
        assert [e.name for e in s.list_skills()] == ["pdf-processing", "other"]
        assert [p and p.get("cursor") for p in server.methods("skills/list")] == [None, "1"]
        server.on_list = lambda m: {
            "skills": [],
            "nextCursor": "same",
            "ttlMs": 0,
            "cacheScope": "private",
            **server.complete(),
        }  # type: ignore[method-assign]
        server.fake.handlers["skills/list"] = server.on_list
        with pytest.raises(ProtocolError, match="repeated its cursor"):
            s.list_skills()


def test_undeclared_extension_sends_nothing(era):
    server = SkillServer(era, declare=False)
    with connect(server) as s:
        assert not s.skills_supported
        with pytest.raises(CapabilityError, match="io.modelcontextprotocol/skills"):
            s.list_skills()
        assert server.methods("skills/list") == []


def test_client_can_advertise_the_extension(era):
    server = SkillServer(era)
    with connect(server, extensions=[EXTENSION_ID]) as s:
        assert s.client_capabilities["extensions"][EXTENSION_ID] == {}
        s.list_skills()
        if era == "legacy":
            [init] = server.methods("initialize")
            assert init["capabilities"]["extensions"][EXTENSION_ID] == {}
        else:
            [params] = server.methods("skills/list")
            caps = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]
            assert caps["extensions"][EXTENSION_ID] == {}


# -- the frontmatter parser ----------------------------------------------------------------

FRONTMATTERS = [
    "name: a\ndescription: plain text, with a comma\n",
    "name: a\ndescription: 'single ''quoted'''\nlicense: \"MIT \\u00e9\"\n",
    "name: a\ndescription: >\n  folded\n  lines\n\n  para\nx: 1\n",
    "name: a\ndescription: |-\n  kept\n    indented\n",
    "metadata:\n  version: 2.1\n  n: 3\n  nothing: null\n  list:\n  - a\n  - b: 1\n    c: [x, y]\n",
    "allowed-tools:\n  - Bash(git:*)\n  - Read\nflow: {a: 1, b: [true, false]}\n",
    "name: a # a comment\nurl: http://example.com/#frag\nempty:\n",
]


@pytest.mark.parametrize("text", FRONTMATTERS)
def test_frontmatter_subset_parses_as_yaml_does(text):
    yaml = pytest.importorskip("yaml")
    from mcpsync.skills.frontmatter import parse_yaml, same_value

    ours, theirs = parse_yaml(text), yaml.safe_load(text)
    assert same_value(ours, theirs), (ours, theirs)


@pytest.mark.parametrize(
    "text",
    ["a: &anchor 1\nb: *anchor\n", "a: !!python/object 1\n", "a: 1\na: 2\n", "a: [1, 2\n",
     "a: 'open\n", " a: 1\nb: 2\n", "%YAML 1.2\na: 1\n", "a:\n\tb: 1\n", "? complex\n: key\n"],
)  # fmt: skip
def test_frontmatter_outside_the_subset_is_refused(text):
    from mcpsync.skills import FrontmatterError
    from mcpsync.skills.frontmatter import parse_yaml

    with pytest.raises(FrontmatterError):
        parse_yaml(text)


def test_skill_md_without_frontmatter_is_refused(era):
    server = SkillServer(era)
    uri = "skill://pdf-processing/SKILL.md"
    server.files = {uri: b"# no frontmatter\n"}
    server.entries = [server.entry(uri)]
    with (
        connect(server) as s,
        pytest.raises(SkillVerificationError, match="frontmatter unreadable"),
    ):
        s.load_skill("pdf-processing")


def test_the_session_skills_member_answers_what_the_one_liners_do(era):
    """``session.skills`` is the part the Session's skill one-liners delegate to: one
    listing, one set of refused entries, the same reads."""
    server = SkillServer(era)
    mismatch = bad_entries(server)["mismatch"]
    server.entries = [server.entry("skill://pdf-processing/SKILL.md"), mismatch]
    with connect(server) as s:
        assert s.skills.supported and s.skills_supported
        assert [e.uri for e in s.skills.list()] == ["skill://pdf-processing/SKILL.md"]
        assert s.skills.problems == s.skill_problems
        assert set(s.skills.problems) == {mismatch["uri"]}
        uri = "skill://pdf-processing/SKILL.md"
        assert s.skills.get(uri) == s.get_skill(uri)
        assert s.skills.load("pdf-processing").text == SKILL_MD == s.load_skill(uri).text
        assert server.reads() == [uri]  # the second load: SKILL.md from the verified-file cache
