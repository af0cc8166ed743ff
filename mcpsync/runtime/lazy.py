"""Names a package loads on first use (PEP 562): the one rule the lazy packages share.

Owns: ``attributes(namespace, where)``, which gives a package its module ``__getattr__`` and
``__dir__``. ``where`` maps each lazy name to the submodule that defines it (imported on
first access; the value is then kept in the package's namespace, so the next access is a
plain global), or to None when the name *is* a submodule (importing it makes it the
package's attribute). ``__dir__`` lists the namespace and ``__all__``. Used by
``mcpsync.config`` and ``mcpsync.skills`` (the package root has its own few lines: its
``dir()`` is ``__all__`` alone and ``mcpsync.connect`` is an attribute of ``Session``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["attributes"]


def attributes(
    namespace: dict[str, Any], where: Mapping[str, str | None]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package whose ``globals()`` is ``namespace``."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        source = where[name]
        module = importlib.import_module(source or f".{name}", package)
        if source is None:
            return module  # a submodule: importing it made it the package's attribute
        value = getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
