"""The notebooks in ``notebooks/`` run from a clean kernel, and a kernel interrupt cancels a call.

Each notebook is executed with nbclient in a fresh kernel that runs this interpreter
(``notebooks/execute.py`` writes a kernelspec for ``sys.executable``), with a per-cell
timeout; any error output or stderr output fails the test, and so does a process the
notebook left running after its last cell. The interrupt test drives a kernel directly
with jupyter_client: a blocking ``call_tool`` is interrupted once progress arrived; the
cell must end with ``KeyboardInterrupt`` at once, the server must have received
``notifications/cancelled`` for that running request, and the session must still work.

Every notebook must also run after the README's first command alone (``bash scripts/demo``:
``pip install -e .``, no test extras, no Node) plus Jupyter: the kernel gets a first cell
that makes every installed package outside that set (and ``tests/``) unimportable, and a
``PATH`` without the npm peers. A notebook with a cell injected to fail right after it
started its servers must leave no process and no listening port behind.

A notebook that needs more than mcpsync and a kernel (``NEEDS``) says so in its first code
cell: run in a kernel where such a module is hidden (a test-only ``sitecustomize`` on
``PYTHONPATH``), that cell stops with one line naming the module and ``mcpsync[notebooks]``,
an extra that brings every need. The ``slow`` test installs ``<wheel>[notebooks]`` into a
fresh venv outside the checkout and runs every notebook, unchanged, in that venv's kernel.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import importlib.util
import json
import os
import queue
import re
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest

pytestmark = pytest.mark.real

pytest.importorskip("nbclient")
pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
RECORDING_SERVER = REPO / "tests" / "notebook_support" / "recording_server.py"
CELL_TIMEOUT = 60.0


def _load_execute() -> Any:
    spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOKS / "execute.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


execute = _load_execute()


def _live_descendants(pid: int | None) -> dict[int, str]:
    """pid -> command line of every live (non-zombie) process below ``pid``."""
    if pid is None:
        return {}
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    out = {}
    for child in children:
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out[child.pid] = " ".join(child.cmdline())[:200]
        except psutil.NoSuchProcess:
            continue
    return out


def _reap(pids: dict[int, str], timeout: float = 10.0) -> dict[int, str]:
    """Wait (bounded) for ``pids`` to exit; kill the survivors by pid; return them."""
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    survivors = {}
    for p in alive:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            survivors[p.pid] = pids[p.pid]
            p.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=5)
    return survivors


def _outputs(nb: Any, mime: str = "text/html") -> str:
    """Every output of ``mime`` (or stream text) in the notebook, joined."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out.get("text", ""))
            else:
                parts.append(out.get("data", {}).get(mime, ""))
    return "\n".join(parts)


# what each executed notebook must show (beyond running without errors)
EXPECTED: dict[str, Callable[[Any], None]] = {}


def _expects(name: str) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        EXPECTED[name] = fn
        return fn

    return register


@_expects("01-quickstart-stdio.ipynb")
def _check_quickstart(nb: Any) -> None:
    html = _outputs(nb)
    assert "Tools (11)" in html and "<img alt='image image/png'" in html
    assert "Resources (4)" in html and "Prompt: Greet Ada" in html
    assert "Tool error" in html and "ServerError" in html and "RequestTimeout" in html


@_expects("02-http-and-oauth.ipynb")
def _check_http_oauth(nb: Any) -> None:
    text = _outputs(nb, "text/plain")
    assert "transport: streamable-http" in text and "sessions left on the server: 0" in text
    assert "mcpsync-progress" in _outputs(nb) and "<progress value='4' max='4'>" in _outputs(nb)
    assert "'registrations': 1, 'authorizations': 1, 'tokens issued': 1" in text
    assert "(unchanged)" in text and "refused with 401: 0" in text
    assert "no person involved" in text
    assert "{'authorization_code': 1, 'client_credentials': 1}" in text
    assert text.count("(stopped)") == 2 and "token folder removed: True" in text


@_expects("03-host-and-config.ipynb")
def _check_host(nb: Any) -> None:
    html = _outputs(nb)
    assert "Servers (3)" in html and "ServerExited" in html and "paged__echo" in html
    assert "routed to the lazy server" in html and "closed" in html


@_expects("04-progress-and-cancellation.ipynb")
def _check_progress(nb: Any) -> None:
    html, text = _outputs(nb), _outputs(nb, "text/plain")
    assert "<progress value='8' max='8'>" in html
    assert "'reason': 'cancelled by the client', 'was_running': True" in text
    assert "'reason': 'timed out', 'was_running': True" in text
    assert "KeyboardInterrupt: the call was abandoned" in text
    assert "the session still works" in text


@_expects("05-tool-use-loop.ipynb")
def _check_tool_use_loop(nb: Any) -> None:
    text = _outputs(nb, "text/plain")
    assert "'mirror__echo'" in text and "tool: 42" in text and "tool: hello from the mirror" in text
    assert "the arguments are not valid JSON" in text and "it is filtered out by name" in text
    assert "final answer: 2 + 40 = 42; the mirror said: hello from the mirror" in text
    assert '"input_schema"' in text and "2 closed" in text


@_expects("06-apps.ipynb")
def _check_apps(nb: Any) -> None:
    text = _outputs(nb, "text/plain")
    advertised = "'io.modelcontextprotocol/ui': {'mimeTypes': ['text/html;profile=mcp-app']}"
    assert text.count(advertised) == 2  # what we advertised, and what the server saw
    assert "<mcpsync.apps.AppView 'counter' ui://mcpsync-demo/counter.html" in text
    assert "connect-src 'none'" in text and '"protocolVersion": "2026-01-26"' in text
    assert '"structuredContent": {"count": 1}' in text and "['counter', 'increment']" in text
    assert "tools/call 'reset' refused" in text and "-32601" in text and "limit is 1048576" in text
    assert "only http(s) links" in text and "ui/message declined" in text and "AppError" in text
    assert "5 refusals; the session still works: yes" in text and "closed: True" in text


@_expects("07-skills.ipynb")
def _check_skills(nb: Any) -> None:
    text = _outputs(nb, "text/plain")
    assert "server declares the extension: True" in text and "skill files read so far: []" in text
    assert 'read so far: ["skill://csv-report/SKILL.md"]' in text and "templates/summary.md" in text
    assert "refused (unlisted)" in text and "nothing more is read" in text
    assert "refused (digest)" in text and 'files read: ["skill://csv-report/SKILL.md"]' in text
    assert "the session still works" in text and "closed: True" in text


@_expects("08-server-cards.ipynb")
def _check_server_cards(nb: Any) -> None:
    text, html = _outputs(nb, "text/plain"), _outputs(nb)
    assert "io.github.mcpsync/demo 1.0.0" in text and "headers={'X-Demo-Token': '***'}" in text
    assert "demo-token-123" not in text and "connected to mcpsync-demo" in text
    assert "'{' not closed" in text and "header     X-Demo-Token required secret" in text
    assert "<img src='data:image/png;base64," in html and "javascript" not in html
    assert "https://example.com/icon.png" in text and "stopped: True" in text


@_expects("09-elicitation.ipynb")
def _check_elicitation(nb: Any) -> None:
    text = _outputs(nb, "text/plain")
    assert "This field is required." in text and "Expected yes or no." in text
    assert "{'action': 'accept', 'content': {'name': 'Ada', 'confirm': True}}" in text
    assert "['n'] -> {'action': 'decline'" in text and "[] -> {'action': 'cancel'" in text
    assert "sign-in: accept" in text and "Domain: auth.example.com" in text
    assert "browser opened for: []" in text and "URLElicitationRequired (-32042)" in text
    assert "browser opened for: ['https://pay.example.com/checkout/7']" in text
    assert "'content': {'name': 'Grace', 'confirm': True}" in text and "closed: True" in text


def test_every_notebook_is_covered():
    names = sorted(p.name for p in execute.notebooks())
    assert names == sorted(EXPECTED), "add the new notebook to EXPECTED"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(roots: list[str]) -> set[str]:
    """Normalized names of ``roots`` and every distribution they require (extras left out)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = _norm(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for req in requires:
            if "extra ==" in req.replace('"', "'").replace("extra==", "extra =="):
                continue
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
            if match:
                todo.append(match.group(0))
    return seen


#: notebook -> distributions it needs beyond the first command (each also its import name);
#: allowed only when the notebook's first code cell checks for them and names the extra
NEEDS: dict[str, list[str]] = {
    "05-tool-use-loop.ipynb": ["openai"],
    "06-apps.ipynb": ["anywidget"],
    "09-elicitation.ipynb": ["ipywidgets"],
}


def _blocked_modules(needs: Sequence[str] = ()) -> list[str]:
    """Top-level modules of installed distributions that ``pip install -e .`` (plus a
    Jupyter kernel, plus ``needs``) does not bring, and the import roots of ``tests/``."""
    allowed = _closure(["mcpsync", "ipykernel", *needs])
    blocked = {
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if not any(_norm(d) in allowed for d in dists)
    }
    blocked |= {p.stem for p in (REPO / "tests").iterdir() if p.suffix == ".py" or p.is_dir()}
    blocked -= set(sys.stdlib_module_names) | {"mcpsync"}
    return sorted(m for m in blocked if m.isidentifier())


FIRST_COMMAND_ONLY = """
import importlib.abc, sys

_BLOCKED = frozenset({blocked!r})


class _NotInstalledByTheFirstCommand(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"{{name}}: not installed by `bash scripts/demo`")
        return None


sys.meta_path.insert(0, _NotInstalledByTheFirstCommand())
sys.path[:] = [p for p in sys.path if not p.startswith({tests!r})]
"""


def _first_command_env() -> dict[str, str]:
    node_bin = str(REPO / "tests" / "node")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if not p.startswith(node_bin)]
    return {**os.environ, "PATH": os.pathsep.join(path)}


def test_the_blocked_set_is_real():
    blocked = _blocked_modules()
    for module in ("pytest", "mcp", "nbclient", "servers", "notebook_support"):
        assert module in blocked, module
    for module in ("requests", "pydantic", "mcp_types", "jsonschema", "ipykernel", "mcpsync"):
        assert module not in blocked, module


def _prepared(name: str, inject: dict[int, str] | None = None) -> Any:
    """The notebook with the first-command-only cell first and ``inject[i]`` after cell i."""
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    needs = NEEDS.get(name, [])
    if needs:
        first = _first_code_cell(name).source
        assert 'pip install "mcpsync[notebooks]"' in first, f"{name}: its first cell names no extra"
        for dist in needs:
            assert repr(dist).replace("'", '"') in first, f"{name} needs {dist}: check for it"
    blocked = _blocked_modules(needs)
    cells = [
        nbformat.v4.new_code_cell(
            FIRST_COMMAND_ONLY.format(blocked=blocked, tests=str(REPO / "tests"))
        )
    ]
    for i, cell in enumerate(nb.cells):
        cells.append(cell)
        if inject and i in inject:
            cells.append(nbformat.v4.new_code_cell(inject[i]))
    nb.cells = cells
    return nb


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_from_a_clean_kernel(name: str):
    seen: dict[int, str] = {}
    after_last: dict[int, str] = {}

    def after_cell(kernel_pid: int | None, cell_index: int) -> None:
        live = _live_descendants(kernel_pid)
        seen.update(live)
        after_last.clear()
        after_last.update(live)

    nb = _prepared(name)
    started = time.perf_counter()
    try:
        execute.run_notebook(
            nb, NOTEBOOKS, timeout=CELL_TIMEOUT, after_cell=after_cell, env=_first_command_env()
        )
    finally:
        leftovers = _reap(seen)
    seconds = time.perf_counter() - started
    assert execute.problems(nb) == []
    EXPECTED[name](nb)
    assert after_last == {}, f"still running after the last cell: {after_last}"
    assert leftovers == {}, f"killed after the kernel shut down: {leftovers}"
    print(f"{name}: {seconds:.1f} s")


def test_a_notebook_importing_a_test_package_fails_under_the_check():
    from nbclient.exceptions import CellExecutionError

    for module in ("pytest", "notebook_support"):
        nb = _prepared("01-quickstart-stdio.ipynb", inject={1: f"import {module}"})
        nb.cells = nb.cells[:4]  # the check, two markdown cells, the injected import
        with pytest.raises(CellExecutionError, match="not installed by `bash scripts/demo`"):
            execute.run_notebook(nb, NOTEBOOKS, timeout=CELL_TIMEOUT, env=_first_command_env())


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


FAIL_AFTER_START = {
    # after the cell that starts the protected server: both HTTP servers are up
    "02-http-and-oauth.ipynb": (
        10,
        "DemoHTTPServer(auth=True",
        "print('PORTS', http_server.port, oauth_server.port)\n"
        "raise RuntimeError('injected failure')",
    ),
    # after the cell that connected to the recording server (a child process)
    "04-progress-and-cancellation.ipynb": (
        1,
        "mcpsync.Session.connect(",
        "print('PIDS', s.transport.process.pid)\nraise RuntimeError('injected failure')",
    ),
}


@pytest.mark.parametrize("name", sorted(FAIL_AFTER_START))
def test_a_failing_cell_leaves_nothing_running(name: str):
    from nbclient.exceptions import CellExecutionError

    index, starts, code = FAIL_AFTER_START[name]
    assert starts in execute_source(name, index), "the injection point moved"
    seen: dict[int, str] = {}
    nb = _prepared(name, inject={index: code})
    try:
        with pytest.raises(CellExecutionError, match="injected failure"):
            execute.run_notebook(
                nb,
                NOTEBOOKS,
                timeout=CELL_TIMEOUT,
                after_cell=lambda pid, i: seen.update(_live_descendants(pid)),
                env=_first_command_env(),
            )
    finally:
        leftovers = _reap(seen)
    printed = _outputs(nb, "text/plain")
    if name.startswith("02-"):
        ports = [int(p) for p in printed.split("PORTS", 1)[1].split()[:2]]
        assert all(p > 0 for p in ports)
        assert [p for p in ports if _listening(p)] == [], "a port the notebook opened is still open"
    else:
        pid = int(printed.split("PIDS", 1)[1].split()[0])
        assert pid in seen, (pid, seen)  # the server was running when the cell failed
    assert leftovers == {}, f"still running after the failed notebook: {leftovers}"


def execute_source(name: str, index: int) -> str:
    import nbformat

    return nbformat.read(NOTEBOOKS / name, as_version=4).cells[index].source


# --------------------------------------------------------------------------- interrupt


class Kernel:
    """A kernel running this interpreter, driven with a blocking jupyter_client client."""

    def __init__(self, spec_dir: Path) -> None:
        self.km = execute.kernel_manager(spec_dir, asynchronous=False)
        self.km.start_kernel(cwd=str(NOTEBOOKS))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    @property
    def pid(self) -> int | None:
        return getattr(self.km.provisioner, "pid", None)

    def submit(self, code: str) -> str:
        return self.kc.execute(code, store_history=False)

    def reply(self, msg_id: str, timeout: float) -> dict[str, Any]:
        """The shell reply to ``msg_id`` (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no reply to {msg_id} within {timeout} s")
            try:
                msg = self.kc.get_shell_msg(timeout=remaining)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"]

    def wait_stream(self, needle: str, timeout: float) -> str:
        """Wait (bounded) for stream output containing ``needle`` from any cell or thread."""
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no output containing {needle!r} in {timeout} s: {seen}")
            try:
                msg = self.kc.get_iopub_msg(timeout=remaining)
            except queue.Empty:
                continue
            if msg["msg_type"] == "stream":
                seen.append(msg["content"]["text"])
                if needle in msg["content"]["text"]:
                    return msg["content"]["text"]

    def run(self, code: str, timeout: float = 30.0) -> str:
        """Run a cell to completion; return its stdout; fail on an error."""
        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])

        reply = self.kc.execute_interactive(
            code, timeout=timeout, output_hook=hook, store_history=False
        )
        content = reply["content"]
        assert content["status"] == "ok", f"{content.get('ename')}: {content.get('evalue')}"
        return "".join(out)

    def close(self) -> None:
        try:
            self.kc.stop_channels()
        finally:
            self.km.shutdown_kernel(now=False)


def test_interrupting_the_kernel_cancels_the_call_and_keeps_the_session(tmp_path: Path):
    kernel = Kernel(tmp_path)
    servers: dict[int, str] = {}
    try:
        out = kernel.run(
            "import json, sys, mcpsync\n"
            f"s = mcpsync.Session.connect([sys.executable, {str(RECORDING_SERVER)!r}], name='rec')\n"
            "print(s.call_tool('echo', {'message': 'ready'}).content[0].text)\n"
        )
        assert out.strip() == "ready"
        servers = _live_descendants(kernel.pid)
        assert len(servers) == 1, servers

        msg_id = kernel.submit(
            "def on_progress(p):\n"
            "    print(f'PROGRESS {p.progress:g}', flush=True)\n"
            "s.call_tool('long_running', {'duration': 30, 'steps': 30}, on_progress=on_progress)\n"
        )
        kernel.wait_stream("PROGRESS 1", timeout=15)  # the call is running on the server
        interrupted = time.perf_counter()
        kernel.km.interrupt_kernel()
        reply = kernel.reply(msg_id, timeout=10)
        seconds = time.perf_counter() - interrupted
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert seconds < 3.0, f"the cell took {seconds:.2f} s to end after the interrupt"

        record = json.loads(
            kernel.run(
                "print(json.dumps(s.call_tool('cancellations').structured_content['cancelled']))"
            )
        )
        assert len(record) == 1, record
        assert record[0]["reason"] == "cancelled by the client" and record[0]["was_running"]

        out = kernel.run("print(s.call_tool('echo', {'message': 'still usable'}).content[0].text)")
        assert out.strip() == "still usable"
        assert _live_descendants(kernel.pid) == servers  # the same server process, not a new one

        kernel.run("s.close()")
        assert _live_descendants(kernel.pid) == {}
    finally:
        seen = {**servers, **_live_descendants(kernel.pid)}
        kernel.close()
        leftovers = _reap(seen)
    assert leftovers == {}


# --------------------------------------------------------------------------- the extra


def _first_code_cell(name: str) -> Any:
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    return next(cell for cell in nb.cells if cell.cell_type == "code")


#: test-only: a ``sitecustomize`` that makes ``import <module>`` fail as if it were not installed
HIDE = """
import importlib.abc, sys

HIDDEN = frozenset({modules!r})


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


def _hiding_env(tmp_path: Path, *modules: str) -> dict[str, str]:
    """This process's environment plus a ``PYTHONPATH`` whose ``sitecustomize`` hides ``modules``."""
    site = tmp_path / "hide"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE.format(modules=sorted(modules)), encoding="utf-8")
    assert not importlib.util.find_spec("sitecustomize"), "ours would shadow the venv's"
    return {**_first_command_env(), "PYTHONPATH": str(site)}


def test_the_notebooks_extra_brings_every_need():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    lines = cfg["options.extras_require"]["notebooks"].splitlines()
    names = {_norm(re.match(r"\s*([A-Za-z0-9._-]+)", x).group(1)) for x in lines if x.strip()}  # type: ignore[union-attr]
    wanted = {"ipykernel", *(_norm(d) for needs in NEEDS.values() for d in needs)}
    assert wanted <= names, f"missing from the notebooks extra: {wanted - names}"
    assert "==" not in cfg["options.extras_require"]["notebooks"], (
        "a user extra pins no exact version"
    )


@pytest.mark.parametrize(
    ("name", "module"), sorted((name, m) for name, needs in NEEDS.items() for m in needs)
)
def test_the_first_cell_stops_with_one_line_naming_the_extra(name: str, module: str, tmp_path):
    import nbformat
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook(cells=[_first_code_cell(name)])
    with pytest.raises(CellExecutionError):
        execute.run_notebook(nb, NOTEBOOKS, timeout=CELL_TIMEOUT, env=_hiding_env(tmp_path, module))
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["error"], outputs  # no stderr, no warning
    (error,) = outputs
    line = f'MissingExtra: this notebook needs {module}: pip install "mcpsync[notebooks]"'
    assert error.traceback == [line], error.traceback  # one line, no traceback
    assert error.ename == "MissingExtra" and module in error.evalue


def test_the_first_cell_is_silent_when_everything_is_there():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[_first_code_cell(name) for name in sorted(NEEDS)])
    execute.run_notebook(nb, NOTEBOOKS, timeout=CELL_TIMEOUT, env=_first_command_env())
    assert [cell.outputs for cell in nb.cells] == [[]] * len(NEEDS)


ELICITATION_WITHOUT_IPYWIDGETS = """
from mcpsync.elicitation import NotebookElicitation
from mcpsync.errors import ConfigError

try:
    NotebookElicitation(timeout=60)
except ConfigError as exc:
    print(f"ConfigError at construction: {exc}")
else:
    print("made a handler that cannot show a form")
"""


def test_notebook_elicitation_without_ipywidgets_is_a_config_error_when_made(tmp_path: Path):
    """Made in the caller's thread, so the cell fails there (before, the handler failed on a
    session thread when the server asked, and 09's cell waited 30 s for a form: queue.Empty)."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", ELICITATION_WITHOUT_IPYWIDGETS],
        env=_hiding_env(tmp_path, "ipywidgets"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("ConfigError at construction: "), proc.stdout
    assert "needs ipywidgets: pip install 'mcpsync[notebook]'" in proc.stdout, proc.stdout
    assert "No module named 'ipywidgets'" in proc.stdout, proc.stdout


APPS_WITHOUT_ANYWIDGET = """
import sys
import mcpsync, mcpsync.apps
from mcpsync.errors import ConfigError

with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.apps.demo"], connect_timeout=30) as s:
    for show in (lambda: mcpsync.apps.call(s, "increment"),
                 lambda: mcpsync.apps.render(s, "counter", s.call_tool("reset"))):
        try:
            show()
        except ConfigError as exc:
            print("ConfigError:", exc)
    print("count:", s.call_tool("counter").structured_content["count"])
"""


def test_apps_without_anywidget_is_a_config_error_before_the_call(tmp_path: Path):
    """Before: a bare ModuleNotFoundError from inside ``render``, after the tool had run."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", APPS_WITHOUT_ANYWIDGET],
        env=_hiding_env(tmp_path, "anywidget"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    expected = "ConfigError: MCP Apps need anywidget to render (pip install 'mcpsync[apps]'): "
    assert len(lines) == 3 and all(line.startswith(expected) for line in lines[:2]), lines
    assert lines[2:] == ["count: 0"], lines  # increment was never sent


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_notebook_runs_in_a_fresh_venv_with_the_extra(tmp_path: Path):
    """``pip install "<wheel>[notebooks]"`` in a new venv, then every shipped notebook,
    unchanged, with nbclient in that venv's kernel, from a copy outside the checkout."""
    import shutil

    from notebook_support import fresh_venv

    venv = fresh_venv.make(tmp_path)
    assert venv.processes() == {}
    where = subprocess_out(
        [str(venv.python), "-c", "import mcpsync, ipykernel; print(mcpsync.__file__)"],
        env=venv.env(),
        cwd=tmp_path,
    )
    assert where.startswith(str(tmp_path / "venv")), where  # the wheel, not the checkout

    copies = tmp_path / "notebooks"
    copies.mkdir()
    for path in execute.notebooks():
        shutil.copy2(path, copies / path.name)
    failures, times = {}, {}
    for path in sorted(copies.glob("*.ipynb")):
        seen: dict[int, str] = {}
        started = time.perf_counter()
        try:
            nb = execute.execute(
                path,
                timeout=CELL_TIMEOUT,
                python=str(venv.python),
                env=venv.env(),
                after_cell=lambda pid, i, seen=seen: seen.update(_live_descendants(pid)),
            )
            problems = execute.problems(nb)
            if not problems:
                EXPECTED[path.name](nb)
        except Exception as exc:  # noqa: BLE001 - go on and report every notebook
            problems = [f"{type(exc).__name__}: {str(exc)[-1500:]}"]
        times[path.name] = time.perf_counter() - started
        left = {**_reap(seen), **_reap(venv.processes())}
        if left:
            problems.append(f"left running: {left}")
        if problems:
            failures[path.name] = problems
    total = sum(times.values())
    print(
        *(f"{step}: {seconds:.1f} s" for step, seconds in venv.timings.items()),
        *(f"{name}: {seconds:.1f} s" for name, seconds in times.items()),
        f"all notebooks: {total:.1f} s",
        sep="\n",
    )
    assert failures == {}
    assert venv.processes() == {}


def subprocess_out(argv: list[str], **kwargs: Any) -> str:
    import subprocess

    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()
