"""Skills served over MCP (SEP-2640, extension ``io.modelcontextprotocol/skills``).

Owns: the public names of the skills extension. A ``Session`` holds a ``Skills``
(``client``) as ``session.skills``; its ``list_skills``, ``get_skill`` and ``load_skill``
delegate to it. Entries and errors are in ``entry``, the loaded skill in ``loaded``, the
frontmatter parser in ``frontmatter``, the verified-file cache in ``cache``. See README.md.

    with mcpsync.Session.connect(url) as s:
        for entry in s.list_skills():          # reads no skill file
            print(entry.name, entry.description)
        skill = s.load_skill("pdf-processing") # SKILL.md read, size + digest + frontmatter checked
        print(skill.read_text("references/FORMS.md"))  # read on demand, verified
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..runtime import lazy as _lazy
from .client import Skills

if TYPE_CHECKING:
    from .cache import SKILL_FILES, SkillFileCache
    from .entry import (
        EXTENSION_ID,
        MAX_FILES,
        MAX_TOTAL_BYTES,
        SkillEntry,
        SkillError,
        SkillFile,
        SkillInvalid,
        SkillNotFound,
        SkillVerificationError,
    )
    from .frontmatter import FrontmatterError
    from .loaded import LoadedSkill

__all__ = [
    "EXTENSION_ID",
    "FrontmatterError",
    "LoadedSkill",
    "MAX_FILES",
    "MAX_TOTAL_BYTES",
    "SKILL_FILES",
    "SkillEntry",
    "SkillError",
    "SkillFile",
    "SkillFileCache",
    "SkillInvalid",
    "SkillNotFound",
    "SkillVerificationError",
    "Skills",
]

#: the names loaded on first use (PEP 562) -> their submodule: a Session needs only ``client``
_WHERE = {
    "SKILL_FILES": ".cache",
    "SkillFileCache": ".cache",
    **dict.fromkeys(
        ("EXTENSION_ID", "MAX_FILES", "MAX_TOTAL_BYTES", "SkillEntry", "SkillError", "SkillFile",
         "SkillInvalid", "SkillNotFound", "SkillVerificationError"),
        ".entry",
    ),
    "FrontmatterError": ".frontmatter",
    "LoadedSkill": ".loaded",
}  # fmt: skip


#: the submodules this package loaded at import before its names were lazy: attributes still
__getattr__, __dir__ = _lazy.attributes(
    globals(), {**_WHERE, **dict.fromkeys(("cache", "entry", "frontmatter", "loaded"))}
)
