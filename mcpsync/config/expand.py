"""Variables in config strings: ``${VAR}``, ``${VAR:-default}``, ``${env:VAR}``, ``${input:id}``,
the VS Code variables (``${workspaceFolder}`` ...), a leading ``~``, and VS Code's ``envFile``.
A missing variable is an error for that entry, never an empty string.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .entries import ConfigEntryError, InputSpec

if TYPE_CHECKING:
    from .entries import InputResolver

__all__: list[str] = []  # private to mcpsync.host


# --------------------------------------------------------------------------- variables

_VAR_RE = re.compile(r"\$\{([^}]*)\}")
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Expander:
    """Expands ``${...}`` in one file's strings; remembers input answers across entries."""

    def __init__(
        self,
        source: str,
        environ: Mapping[str, str],
        workspace: str,
        input_specs: Mapping[str, InputSpec],
        inputs: InputResolver | None,
    ) -> None:
        self.source = source
        self.environ = environ
        self.workspace = workspace
        self.input_specs = input_specs
        self.inputs = inputs
        self.answers: dict[str, str] = {}

    def expand(self, value: str, entry: str, field_name: str) -> str:
        def repl(m: re.Match[str]) -> str:
            return self._resolve(m.group(1), entry, field_name)

        return _VAR_RE.sub(repl, value)

    def _fail(self, entry: str, field_name: str, problem: str) -> ConfigEntryError:
        return ConfigEntryError(self.source, entry, field_name, problem)

    def _resolve(self, token: str, entry: str, field_name: str) -> str:
        if token.startswith("env:"):
            return self._env(token[4:], None, entry, field_name, token)
        if token.startswith("input:"):
            return self._input(token[6:], entry, field_name)
        predefined = {
            "workspaceFolder": self.workspace,
            "workspaceFolderBasename": os.path.basename(self.workspace.rstrip(os.sep)),
            "userHome": str(Path.home()),
            "pathSeparator": os.sep,
            "/": os.sep,
        }
        if token in predefined:
            return predefined[token]
        name, sep, default = token.partition(":-")
        if _PLAIN_NAME.match(name):
            return self._env(name, default if sep else None, entry, field_name, token)
        raise self._fail(
            entry,
            field_name,
            f"unsupported variable ${{{token}}} (expected ${{VAR}}, ${{VAR:-default}}, ${{env:VAR}}, "
            "${input:id}, ${workspaceFolder}, ${workspaceFolderBasename}, ${userHome}, ${pathSeparator})",
        )

    def _env(self, name: str, default: str | None, entry: str, field_name: str, token: str) -> str:
        value = self.environ.get(name)
        if value is not None:
            return value
        if default is not None:
            return default
        raise self._fail(
            entry,
            field_name,
            f"environment variable {name} is not set (used as ${{{token}}}); set it or give a default "
            f"with ${{{name}:-default}}",
        )

    def _input(self, input_id: str, entry: str, field_name: str) -> str:
        if input_id in self.answers:
            return self.answers[input_id]
        spec = self.input_specs.get(input_id, InputSpec(id=input_id))
        value: str | None = None
        if isinstance(self.inputs, Mapping):
            value = self.inputs.get(input_id)
        elif callable(self.inputs):
            value = self.inputs(spec)
        if value is None:
            value = spec.default
        if value is None:
            what = f" ({spec.description})" if spec.description else ""
            declared = "" if input_id in self.input_specs else ' (not declared in "inputs")'
            raise self._fail(
                entry,
                field_name,
                f"no value for ${{input:{input_id}}}{what}{declared}; pass it with "
                f"inputs={{{input_id!r}: ...}} (or --input {input_id}=... on the command line)",
            )
        if not isinstance(value, str):
            raise self._fail(
                entry,
                field_name,
                f"input {input_id!r} resolved to a {type(value).__name__}, expected a string",
            )
        self.answers[input_id] = value
        return value


def _expand_user(path: str) -> str:
    return os.path.expanduser(path) if path.startswith("~") else path


def _load_env_file(path: str, source: str, entry: str) -> dict[str, str]:
    """Read a dotenv file: KEY=VALUE lines, ``export`` prefix, quotes, ``#`` comments."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigEntryError(
            source, entry, "envFile", f"cannot read {path}: {exc.strerror or exc}"
        ) from None
    result: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _PLAIN_NAME.match(key):
            raise ConfigEntryError(
                source, entry, "envFile", f"{path} line {lineno}: expected KEY=VALUE"
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            quote = value[0]
            value = value[1:-1]
            if quote == '"':
                value = value.replace("\\n", "\n").replace('\\"', '"')
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        result[key] = value
    return result
