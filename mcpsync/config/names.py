"""A server's short name from its command line (:func:`command_name`): ``npx -y
@scope/server-foo`` -> ``foo``, ``python -m pkg.server`` -> ``server``, ``uvx``, ``docker run``
... Used for default session names and log names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["command_name"]

# -- naming a server from its command line ---------------------------------------------------

#: per kind of program: its options that take a value (``-X dev``, ``--from pkg``, ``-e K=V``)
_PYTHON_VALUES = frozenset({"-m", "-c", "-X", "-W", "-Q"})
_NODE_VALUES = frozenset({
    "-e", "--eval", "-p", "--print", "-r", "--require", "--import", "--loader",
    "--experimental-loader", "--env-file", "-C", "--conditions", "--inspect-port", "--title",
})  # fmt: skip
_RUNNER_VALUES = frozenset({
    "-p", "--package", "-c", "--call", "--registry", "--cache", "--userconfig", "--from",
    "--with", "--with-editable", "--with-requirements", "--python", "--directory", "--project",
    "--index", "--index-url", "--extra-index-url", "--env-file", "--spec", "-w", "--workspace",
    "--cwd", "--config",
})  # fmt: skip
_DOCKER_VALUES = frozenset({
    "-e", "--env", "--env-file", "-v", "--volume", "--name", "-p", "--publish", "--mount",
    "--network", "-w", "--workdir", "-u", "--user", "--entrypoint", "--platform", "-l", "--label",
    "-m", "--memory", "--cpus", "-h", "--hostname", "--add-host", "--pull",
})  # fmt: skip
_INTERPRETERS = frozenset({"node", "nodejs", "bun", "deno", "tsx", "ts-node", "python", "pythonw", "py", "pypy"})  # fmt: skip
#: file and folder names that say nothing about the server: look one folder up
_GENERIC = frozenset({
    "index", "main", "server", "cli", "app", "__main__", "__init__", "run", "start", "bin", "dist",
    "build", "lib", "out", "src", "esm", "cjs", "scripts", "node_modules", "site-packages", "mcp",
})  # fmt: skip
_SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".py", ".pyz", ".pyw", ".jsx", ".tsx")  # fmt: skip


def _program(word: str) -> str:
    """``/usr/bin/python3.12`` -> ``python``; ``C:\\...\\npx.cmd`` -> ``npx``."""
    base = re.split(r"[\\/]", word)[-1].lower()
    for suffix in (".exe", ".cmd", ".bat", ".ps1"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return re.sub(r"^(python|pypy)[0-9.]*$", r"\1", base)


def _package(spec: str) -> str:
    """``@scope/pkg@1.2`` -> ``pkg``; ``pkg==1.0`` / ``pkg[extra]`` -> ``pkg``; a git URL -> its repo."""
    spec = spec.strip()
    if "://" in spec or spec.startswith("git+"):  # git+https://host/org/repo.git@v1#egg=x
        last = re.split(r"[/:]", spec.split("#", 1)[0].rstrip("/"))[-1]
        last = last.split("@", 1)[0]
        return last[:-4] if last.endswith(".git") else last
    if spec.startswith("@") and "/" in spec:  # a scoped npm package
        spec = spec.split("/", 1)[1]
    return re.split(r"[@=<>~!\[; ]", spec, maxsplit=1)[0] or spec


def _from_path(path: str) -> str:
    """The script's name, or the first folder above it that is not generic (dist, src ...)."""
    parts = [p for p in re.split(r"[\\/]", path) if p not in ("", ".", "..")]
    if not parts:
        return path
    stem = parts[-1]
    for suffix in _SCRIPT_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if stem.lower() not in _GENERIC:
        return stem
    for folder in reversed(parts[:-1]):
        if folder.lower() not in _GENERIC and not folder.startswith("@"):
            return folder
    return stem


def _operands(args: Sequence[str], takes_value: frozenset[str]) -> tuple[dict[str, str], list[str]]:
    """The leading options (with their values) and the words from the first operand on."""
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return options, list(args[i + 1 :])
        if not word.startswith("-") or word == "-":
            return options, list(args[i:])
        key, eq, value = word.partition("=")
        if not eq and key in takes_value and i + 1 < len(args):
            value = args[i + 1]
            i += 1
        options[key] = value
        i += 1
    return options, []


def command_name(argv: Sequence[str]) -> str:
    """A name for the server ``argv`` starts: the package or script behind the interpreter
    or runner, not "node" or "python".

    ``node …/pkg/dist/index.js`` -> ``pkg``; ``npx -y @scope/pkg@1`` -> ``pkg``;
    ``uvx mcp-server-git`` -> ``mcp-server-git``; ``python weather/server.py`` and
    ``uv --directory …/weather run server.py`` -> ``weather``; ``python -m weather_mcp`` ->
    ``weather_mcp`` (``python -m pkg.server`` -> ``pkg``); ``docker run … mcp/github`` ->
    ``github``; anything else: the program's own name (``mcp-server-fetch``).
    ``Session.connect`` names a stdio session (and its transport, threads and the
    ``mcpsync.server.<name>`` logger) with it when no name is given.
    """
    words = [str(w) for w in argv]
    directory = ""  # uv --directory D: where a generic script name gets its name from
    for _ in range(4):  # runners nest: uv run python -m x, cmd /c npx ..., npm exec -- pkg
        if not words:
            break
        program, rest = _program(words[0]), words[1:]
        if program == "cmd" and rest[:1] and rest[0].lower() in ("/c", "/k"):
            words = rest[1:]
            continue
        if program in ("npx", "pnpx", "bunx", "uvx"):
            options, tail = _operands(rest, _RUNNER_VALUES)
            spec = tail[0] if tail else options.get("--from") or options.get("--package")
            return _package(spec) if spec else program
        if program in ("npm", "pnpm", "yarn", "uv", "pipx"):
            options, tail = _operands(rest, _RUNNER_VALUES)
            sub, tail = (tail[0], tail[1:]) if tail else ("", [])
            if program == "uv" and sub == "tool" and tail[:1] == ["run"]:
                sub, tail = "x", tail[1:]
            if program == "uv" and sub == "run":  # uv run [python] script.py | -m mod | a tool
                directory = options.get("--directory") or options.get("--project") or ""
                more, tail = _operands(tail, _RUNNER_VALUES)
                directory = more.get("--directory") or more.get("--project") or directory
                words = tail
                continue
            if sub in ("exec", "dlx", "x") or (program == "pipx" and sub == "run"):
                options, tail = _operands(tail, _RUNNER_VALUES)
                spec = tail[0] if tail else options.get("--package") or options.get("--spec")
                return _package(spec) if spec else program
            return program
        if program in _INTERPRETERS:
            if program in ("deno", "bun") and rest[:1] and rest[0] in ("run", "x"):
                rest = rest[1:]
            python = program in ("python", "pythonw", "py", "pypy")
            options, tail = _operands(rest, _PYTHON_VALUES if python else _NODE_VALUES)
            if python and options.get("-m"):
                parts = [p for p in options["-m"].split(".") if p]
                while len(parts) > 1 and parts[-1].lower() in _GENERIC:
                    parts.pop()
                return parts[-1] if parts else program
            if tail and not {"-c", "-e", "--eval", "-p", "--print"} & options.keys():
                return _from_path(f"{directory}/{tail[0]}" if directory else tail[0])
            return program
        if program in ("docker", "podman") and rest[:1] == ["run"]:
            options, tail = _operands(rest[1:], _DOCKER_VALUES)
            if options.get("--name"):
                return options["--name"]
            if tail:
                image = tail[0].split("@", 1)[0].rsplit("/", 1)[-1]
                return image.split(":", 1)[0] or program
            return program
        return _from_path(f"{directory}/{words[0]}" if directory else words[0])
    return _program(str(argv[0])) if argv else "server"
