"""The typed errors mcpsync raises: every public class under ``MCPSyncError`` in the package.

Owns ``error_classes()``, read from the source with ``ast`` (nothing imported): a class whose
base is ``MCPSyncError`` or one of its subclasses, named without a leading underscore. The
troubleshooting page must have an entry for each (``test_site.py``).
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "mcpsync"


def error_classes() -> dict[str, str]:
    """Class name -> the module (repository path) that defines it."""
    bases: dict[str, tuple[set[str], str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = {
                    b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
                }
                bases[node.name] = (names, path.relative_to(PACKAGE.parent).as_posix())
    errors = {"MCPSyncError"}
    grew = True
    while grew:
        grew = False
        for name, (parents, _) in bases.items():
            if name not in errors and parents & errors:
                errors.add(name)
                grew = True
    return {name: bases[name][1] for name in sorted(errors) if not name.startswith("_")}
