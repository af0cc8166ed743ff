"""The ``mcpsync`` pytest plugin: MCP servers as fixtures.

Owns: the ``mcp_session``, ``mcp_host`` and ``mcp_cassette`` fixtures, the ``mcp_server``,
``mcp_config`` and ``mcp_cassette`` markers and the ``--mcp-config FILE`` and
``--mcp-record-mode`` options. Installed with the package (entry point
``pytest11``), so it is active wherever mcpsync is installed.

- ``@pytest.mark.mcp_server(target, **connect_kwargs)`` + ``mcp_session``: a ready
  :class:`~mcpsync.Session` to ``target`` (a command list, a URL, or ``CONFIG:ENTRY`` with
  the path relative to the test file or the current directory), closed after the test.
- ``pytest --mcp-config FILE``: every test that takes ``mcp_session`` without a marker runs
  once per entry of FILE (test ids are the entry names).
- ``mcp_host``: a started :class:`~mcpsync.Host` for ``@pytest.mark.mcp_config(FILE)`` or
  ``--mcp-config FILE``, closed after the test.

- ``@pytest.mark.mcp_cassette`` (recorded sessions, :mod:`mcpsync.testing.cassette`): the
  test's ``mcp_session`` records to, or replays from, ``cassettes/<module>/<test>.jsonl``
  beside the test file; the ``mcp_cassette`` fixture is that :class:`~mcpsync.testing.Cassette`
  for the test's own ``connect(..., cassette=mcp_cassette)``. ``mcp_cassette("other.jsonl",
  match_on=...)``: another file (relative to that folder) and ``Cassette`` settings.
  With ``mcp_host``, each server has its own file: ``cassettes/<module>/<test>/<server>.jsonl``.
  ``--mcp-record-mode=none|once|new_episodes|all`` (default ``once``; ``none`` where the
  environment variable ``CI`` is set: CI replays what was committed, and never records;
  a marker's ``mode=`` is used when the option is not given).

A server that fails to come up makes the test an ERROR whose message has the error, the
server's exit code and its last stderr lines. Every session and host the plugin opened
is closed when its test ends and again, as a safety net, when the pytest process ends
(Ctrl-C included), so no server process is left behind; each pytest-xdist worker has
its own.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "pytest_addoption",
    "pytest_configure",
    "pytest_generate_tests",
    "mcp_session",
    "mcp_host",
    "mcp_cassette",
]

#: the record modes (``mcpsync.testing.cassette.MODES``, named here: the plugin loads in every
#: pytest run, the cassette code only when a test uses it)
RECORD_MODES = ("none", "once", "new_episodes", "all")

#: how long a failed bring-up's fixture waits for the server's shutdown ladder to end it
_LADDER_WAIT = 15.0
_OPEN: set[Any] = set()  # sessions, transports and hosts not closed yet


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpsync", "MCP servers (mcpsync)")
    group.addoption(
        "--mcp-config",
        metavar="FILE",
        default=None,
        help="mcp.json-style config: tests using mcp_session run once per entry; mcp_host uses it",
    )
    group.addoption(
        "--mcp-record-mode",
        choices=RECORD_MODES,
        default=None,
        help="recorded MCP sessions (mcp_cassette): none = replay only, once = record what has "
        "no cassette yet, new_episodes = add what is missing, all = record again "
        "(default: once; none when the CI environment variable is set)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mcp_server(target, **connect_kwargs): the server mcp_session connects to "
        "(a command list, a URL, or CONFIG:ENTRY)",
    )
    config.addinivalue_line("markers", "mcp_config(path): the config file mcp_host starts")
    config.addinivalue_line(
        "markers",
        "mcp_cassette(path=None, **cassette_kwargs): mcp_session records to / replays from "
        "cassettes/<module>/<test>.jsonl (mode: --mcp-record-mode)",
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    _close_all()


def _close_all() -> None:
    while _OPEN:
        thing = _OPEN.pop()
        try:
            thing.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _config_path(text: str, request: pytest.FixtureRequest | None) -> Path:
    candidates = [Path(os.path.expanduser(text))]
    if request is not None and not candidates[0].is_absolute():
        candidates.insert(0, Path(request.node.path).parent / text)
    for c in candidates:
        if c.is_file():
            return c
    raise pytest.UsageError(f"mcpsync: config file {text!r} not found")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mcp_session" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("mcp_server") is not None:
        return
    path = metafunc.config.getoption("--mcp-config")
    if not path:
        return
    from ..config import load_config

    names = load_config(os.path.expanduser(path)).names()
    metafunc.parametrize("mcp_entry", names, ids=names, indirect=True)


@pytest.fixture
def mcp_entry(request: pytest.FixtureRequest) -> str | None:
    """The ``--mcp-config`` entry this test runs against (None without the option)."""
    return getattr(request, "param", None)


def _target_kwargs(target: Any, request: pytest.FixtureRequest) -> dict[str, Any]:
    from ..config import load_config

    if isinstance(target, list | tuple):
        return {"target": [str(a) for a in target]}
    if not isinstance(target, str):
        raise pytest.UsageError(f"mcp_server: cannot use {target!r} as a target")
    if "://" in target:
        return {"target": target}
    path, sep, entry = target.rpartition(":")
    if not sep:
        raise pytest.UsageError(
            f"mcp_server: {target!r} is neither a URL nor CONFIG:ENTRY (give a command as a list)"
        )
    return load_config(_config_path(path, request))[entry].connect_kwargs()


def record_mode(config: pytest.Config) -> str:
    """``--mcp-record-mode``, else ``none`` where ``CI`` is set, else ``once``."""
    chosen = config.getoption("--mcp-record-mode")
    if chosen:
        return str(chosen)
    return "none" if os.environ.get("CI") else "once"


def _cassette_name(request: pytest.FixtureRequest) -> str:
    """The test's name as a file name (parametrized ids kept, unsafe characters replaced)."""
    name = request.node.name
    safe = "".join(c if c.isalnum() or c in "-_.[]" else "_" for c in name)
    return f"{safe}.jsonl"


@pytest.fixture
def mcp_cassette(request: pytest.FixtureRequest) -> Any:
    """The :class:`~mcpsync.testing.Cassette` of this test, in the ``--mcp-record-mode``."""
    from .cassette import Cassette

    folder = Path(request.node.path).parent / "cassettes" / Path(request.node.path).stem
    marker = request.node.get_closest_marker("mcp_cassette")
    args = marker.args if marker is not None else ()
    kwargs = dict(marker.kwargs) if marker is not None else {}
    given = kwargs.pop("path", args[0] if args else None)
    path = folder / str(given) if given is not None else folder / _cassette_name(request)
    mode = request.config.getoption("--mcp-record-mode") or kwargs.pop("mode", None)
    kwargs.pop("mode", None)  # the command line's wins over the marker's
    return Cassette(path, mode=mode or record_mode(request.config), **kwargs)  # type: ignore[arg-type]  # checked by Cassette


def _bring_up(kwargs: dict[str, Any], label: str) -> Any:
    """``Session.connect`` with a stdio transport made here, so its stderr tail can be shown."""
    from ..errors import STDERR_TAIL, MCPSyncError, ServerExited
    from ..session import Session

    transport = None
    if isinstance(kwargs.get("target"), list) and kwargs.get("cassette") is None:
        from ..transports.stdio import StdioTransport

        transport = StdioTransport(
            kwargs.pop("target"),
            env=kwargs.pop("env", None),
            cwd=kwargs.pop("cwd", None),
            inherit_env=kwargs.pop("inherit_env", False),
            name=kwargs.get("name") or label,
        )
        kwargs["target"] = transport
        kwargs.pop("transport", None)
        _OPEN.add(transport)
    try:
        session = Session.connect(**kwargs)
    except MCPSyncError as exc:
        lines = [f"MCP server {label} did not come up: {type(exc).__name__}: {exc}"]
        if transport is not None:
            proc = transport.process
            code = exc.exit_code if isinstance(exc, ServerExited) else None
            if code is None and proc is not None:
                code = proc.poll()
            tail = (exc.stderr_tail if isinstance(exc, ServerExited) else "") or (
                transport.stderr_tail()
            )
            if "exit code" not in str(exc):
                lines.append(
                    f"exit code: {code if code is not None else 'still running (stopped)'}"
                )
            if tail and tail not in str(exc):
                lines.append(f"{STDERR_TAIL}\n" + tail)
            if proc is not None:  # a test leaves nothing: wait for the ladder the unwinding runs
                try:
                    proc.wait(timeout=_LADDER_WAIT)
                except subprocess.TimeoutExpired:
                    lines.append(f"(the server was still running {_LADDER_WAIT:.0f} s later)")
        pytest.fail("\n".join(lines), pytrace=False)
    finally:
        if transport is not None:
            _OPEN.discard(transport)
    _OPEN.add(session)
    return session


@pytest.fixture
def mcp_session(request: pytest.FixtureRequest, mcp_entry: str | None) -> Iterator[Any]:
    """A ready :class:`~mcpsync.Session` for the test's ``mcp_server`` marker or ``--mcp-config`` entry."""
    marker = request.node.get_closest_marker("mcp_server")
    if marker is not None:
        if not marker.args:
            raise pytest.UsageError(
                "mcp_server needs a target: mcp_server(target, **connect_kwargs)"
            )
        kwargs = {**_target_kwargs(marker.args[0], request), **marker.kwargs}
        label = repr(marker.args[0])
    elif mcp_entry is not None:
        from ..config import load_config

        path = request.config.getoption("--mcp-config")
        kwargs = load_config(os.path.expanduser(path))[mcp_entry].connect_kwargs()
        label = repr(mcp_entry)
    else:
        raise pytest.UsageError(
            "mcp_session needs @pytest.mark.mcp_server(target, ...) or pytest --mcp-config FILE"
        )
    if request.node.get_closest_marker("mcp_cassette") is not None:
        kwargs["cassette"] = request.getfixturevalue("mcp_cassette")
    session = _bring_up(kwargs, label)
    try:
        yield session
    finally:
        _OPEN.discard(session)
        session.close()


@pytest.fixture
def mcp_host(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A started :class:`~mcpsync.Host` for ``@pytest.mark.mcp_config(FILE)`` or ``--mcp-config FILE``."""
    from ..host import Host

    marker = request.node.get_closest_marker("mcp_config")
    if marker is not None and marker.args:
        path = _config_path(str(marker.args[0]), request)
    elif request.config.getoption("--mcp-config"):
        path = Path(os.path.expanduser(request.config.getoption("--mcp-config")))
    else:
        raise pytest.UsageError("mcp_host needs @pytest.mark.mcp_config(FILE) or --mcp-config FILE")
    cassettes = None
    if request.node.get_closest_marker("mcp_cassette") is not None:  # one file per server
        cassettes = request.getfixturevalue("mcp_cassette").per_server
    host = Host(path, cassettes=cassettes)
    _OPEN.add(host)
    try:
        host.start()
        yield host
    finally:
        _OPEN.discard(host)
        host.close()
