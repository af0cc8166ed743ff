"""Where mcpsync keeps per-user files that can be made again: the one rule for it.

Owns: ``user_cache_dir()``: ``$XDG_CACHE_HOME/mcpsync`` (else ``~/.cache/mcpsync``) on Linux
and other POSIX systems, ``~/Library/Caches/mcpsync`` on macOS,
``%LOCALAPPDATA%\\mcpsync\\Cache`` on Windows. The token store's default file
(``auth.storage``) and the split statements of lazily loaded modules (``_lazyexec``) live
there. Strings only (no ``pathlib``: ``_lazyexec`` is on the cold path).
"""

from __future__ import annotations

import os
import sys

__all__ = ["user_cache_dir", "APP"]

APP = "mcpsync"


def user_cache_dir() -> str:
    """The per-user cache folder (not created here)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(
            os.path.expanduser("~"), "AppData", "Local"
        )
        return os.path.join(base, APP, "Cache")
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~/Library/Caches"), APP)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.cache")
    return os.path.join(base, APP)
