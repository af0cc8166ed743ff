"""The notebooks in ``notebooks/`` run from a clean kernel, and a kernel interrupt cancels a call.

Each notebook is executed with nbclient in a fresh kernel that runs this interpreter
(``notebooks/execute.py`` writes a kernelspec for ``sys.executable``), with a per-cell
timeout; any error output or stderr output fails the test, and so does a process the
notebook left running after its last cell. The interrupt test drives a kernel directly
with jupyter_client: a blocking ``call_tool`` is interrupted once progress arrived; the
cell must end with ``KeyboardInterrupt`` at once, the server must have received
``notifications/cancelled`` for that running request, and the session must still work.
"""

from __future__ import annotations

import importlib.util
import json
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

pytestmark = pytest.mark.real

pytest.importorskip("nbclient")
pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
RECORDING_SERVER = REPO / "tests" / "notebook_support" / "recording_server.py"
HAVE_OIDC = (REPO / "tests" / "node" / "node_modules" / ".bin" / "node").exists() and (
    REPO / "tests" / "node" / "node_modules" / "oidc-provider"
).exists()
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
    assert "transport: streamable-http" in text
    assert "mcpsync-progress" in _outputs(nb) and "<progress value='4' max='4'>" in _outputs(nb)
    assert "'authorizations': 1" in text and "(unchanged)" in text
    assert "refused with 401: 0" in text and "(stopped)" in text


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


def test_every_notebook_is_covered():
    names = sorted(p.name for p in execute.notebooks())
    assert names == sorted(EXPECTED), "add the new notebook to EXPECTED"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_from_a_clean_kernel(name: str):
    if name.startswith("02-") and not HAVE_OIDC:
        pytest.skip("Node 22 + oidc-provider are not installed in tests/node")
    seen: dict[int, str] = {}
    after_last: dict[int, str] = {}

    def after_cell(kernel_pid: int | None, cell_index: int) -> None:
        live = _live_descendants(kernel_pid)
        seen.update(live)
        after_last.clear()
        after_last.update(live)

    started = time.perf_counter()
    try:
        nb = execute.execute(NOTEBOOKS / name, timeout=CELL_TIMEOUT)
    finally:
        leftovers = _reap(seen)
    seconds = time.perf_counter() - started
    assert execute.problems(nb) == []
    EXPECTED[name](nb)
    assert after_last == {}, f"still running after the last cell: {after_last}"
    assert leftovers == {}, f"killed after the kernel shut down: {leftovers}"
    print(f"{name}: {seconds:.1f} s")


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
