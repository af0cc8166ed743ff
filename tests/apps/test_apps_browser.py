"""MCP Apps in a real browser: Debian's chromium (headless, chromedriver) drives JupyterLab
and Notebook 7 (the same widget in both).

A Jupyter server on 127.0.0.1 (token, temporary root, runtime and config dirs, no network)
opens a notebook of four cells, each connecting with ``extensions=mcpsync.apps.EXTENSION``
and showing a tool's app (``mcpsync.apps.call``):

1. the real npm ``@modelcontextprotocol/server-basic-vanillajs`` (through
   ``recording_proxy.py``, which records every line to and from it): the server time from
   the kernel's call is shown inside the app's iframe; a click on "Get Server Time" makes
   the app call ``get-time`` through the bridge; the server receives that second
   ``tools/call`` and the time it answered appears in the app; "Open Link" shows the link
   in the widget with Open / Dismiss (nothing opens by itself);
2. a hostile probe app (``probe_app_server.py``): reading the notebook page or its cookies,
   reaching a local port by ``fetch`` or an image all fail, an unknown method, a call to
   the model-only tool and a 2 MB message are refused (the tool call never reaches the
   server), a legitimate call is answered; a theme switch reaches it; navigating its frame
   away stops the relay;
3. the real npm ``server-budget-allocator`` (chart.js inline) renders its chart;
4. mcpsync's demo counter (``python -m mcpsync.apps.demo``) displayed twice: the second
   output says it is shown elsewhere (one live view per app); "+1" calls the app-only
   ``increment`` tool and the new count appears.

Screenshots are saved (``MCPSYNC_APPS_SCREENSHOTS`` names the folder; default: the test's
temporary folder). Every wait is bounded (WebDriverWait, HTTP polls with deadlines); the
server, its kernel and the MCP servers are stopped by pid at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

pytestmark = [pytest.mark.real, pytest.mark.slow, pytest.mark.timeout(300)]

pytest.importorskip("jupyterlab")
pytest.importorskip("anywidget")
pytest.importorskip("selenium")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NODE_BIN = REPO / "tests" / "node" / "node_modules" / ".bin"
PROXY = Path(__file__).resolve().parents[1] / "browser" / "recording_proxy.py"
PROBE = Path(__file__).resolve().parents[1] / "browser" / "probe_app_server.py"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip(
        "chromium / chromedriver not installed (scripts/install-test-deps.sh installs them "
        "with apt-get when it can)",
        allow_module_level=True,
    )
if not (NODE_BIN / "mcp-server-basic-vanillajs").exists():
    pytest.skip("npm peers not installed (scripts/install-test-deps.sh)", allow_module_level=True)

TOKEN = "browser-test-" + os.urandom(8).hex()
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1280,1000",
]  # fmt: skip


# the notebook panel among the main area's widgets, and its kernel's status
KERNEL_STATE = """
for (const w of window.jupyterapp.shell.widgets('main')) {
  const c = w.sessionContext;
  if (c) return [w.title.label, c.kernelDisplayStatus, !!(c.session && c.session.kernel)];
}
return ['no notebook panel', String(window.jupyterapp.shell.currentWidget)];
"""
KERNEL_IDLE = """
for (const w of window.jupyterapp.shell.widgets('main')) {
  const c = w.sessionContext;
  if (c && c.session && c.session.kernel && c.kernelDisplayStatus === 'idle') return true;
}
return false;
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cell(name: str, source: str) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "id": name, "metadata": {},
            "outputs": [], "source": source}  # fmt: skip


def _notebook(log: Path, probe_log: Path, probe_port: int) -> dict[str, Any]:
    """Three apps: the npm basic app, the hostile probe, the npm budget allocator."""
    basic = [sys.executable, str(PROXY), str(log), "--", "mcp-server-basic-vanillajs", "--stdio"]
    probe = [sys.executable, str(PROXY), str(probe_log), "--", sys.executable, str(PROBE),
             "--probe-port", str(probe_port)]  # fmt: skip
    budget = ["mcp-budget-allocator-server", "--stdio"]
    counter = [sys.executable, str(PROXY), str(probe_log.with_name("counter.log")), "--",
               sys.executable, "-m", "mcpsync.apps.demo"]  # fmt: skip
    connect = "mcpsync.Session.connect({!r}, extensions=mcpsync.apps.EXTENSION)"
    cells = [
        _cell("basic", f"import mcpsync, mcpsync.apps\ns = {connect.format(basic)}\n"
                       "mcpsync.apps.call(s, 'get-time')"),
        _cell("probe", f"p = {connect.format(probe)}\nmcpsync.apps.call(p, 'probe')"),
        _cell("budget", f"b = {connect.format(budget)}\n"
                        "mcpsync.apps.call(b, 'get-budget-data', height=500)"),
        _cell("twice", "from IPython.display import display\n"
                       f"c = {connect.format(counter)}\n"
                       "counter = mcpsync.apps.call(c, 'counter')\n"
                       "display(counter)\ndisplay(counter)"),
    ]  # fmt: skip
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip


def _wait_http(url: str, deadline: float) -> None:
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError as exc:
            last = exc
        time.sleep(0.25)  # polling a server that is starting: no event to wait on
    raise AssertionError(f"JupyterLab did not answer {url} in time: {last}")


def _lines(log: Path, mark: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text().splitlines():
        if line.startswith(mark):
            try:
                out.append(json.loads(line[2:]))
            except ValueError:
                continue
    return out


def _tool_calls(log: Path) -> list[dict[str, Any]]:
    return [m for m in _lines(log, "> ") if m.get("method") == "tools/call"]


def _answer_to(log: Path, rid: Any) -> dict[str, Any] | None:
    for m in _lines(log, "< "):
        if m.get("id") == rid and "result" in m:
            return m["result"]
    return None


FRONTENDS = {  # module to run, its app's config class, the notebook's URL path
    "jupyterlab": ("jupyterlab", "LabApp", "lab/tree/apps.ipynb"),
    "notebook7": ("notebook", "JupyterNotebookApp", "notebooks/apps.ipynb"),
}


@pytest.fixture(params=sorted(FRONTENDS))
def jupyterlab(request: pytest.FixtureRequest, tmp_path: Path):
    module, app, path = FRONTENDS[request.param]
    pytest.importorskip(module)
    root = tmp_path / "root"
    root.mkdir()
    log, probe_log = tmp_path / "server.log", tmp_path / "probe.log"
    listener = socket.socket()  # the probe app tries to reach it; nothing may connect
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    probe_port = listener.getsockname()[1]
    (root / "apps.ipynb").write_text(json.dumps(_notebook(log, probe_log, probe_port)))
    port = _free_port()
    env = {
        **os.environ,
        "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
    }
    command = [
        sys.executable, "-m", module, "--no-browser", f"--ServerApp.port={port}",
        "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
        f"--{app}.expose_app_in_browser=True",
    ]  # fmt: skip
    if app == "LabApp":  # no news, no update check, no extension manager reaching out
        command += ["--LabApp.news_url=", "--LabApp.extension_manager=readonly",
                    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]  # fmt: skip
    if os.geteuid() == 0:  # CI containers and this machine run as root
        command.append("--allow-root")
    server_log = open(tmp_path / "jupyter.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        command,
        cwd=root,
        env=env,
        stdout=server_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"{base}/api/status?token={TOKEN}", time.monotonic() + 90)
        yield f"{base}/{path}?token={TOKEN}", log, probe_log, listener
    finally:
        listener.close()
        descendants = (
            psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        )
        proc.send_signal(signal.SIGTERM)  # jupyter_server shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        _, alive = psutil.wait_procs(descendants, timeout=10)
        for p in alive:
            p.kill()
        server_log.close()


@pytest.fixture
def browser(tmp_path: Path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def test_apps_render_and_their_tool_calls_round_trip(jupyterlab, browser, tmp_path, request):
    url, log, probe_log, listener = jupyterlab
    shot_dir = (
        Path(os.environ.get("MCPSYNC_APPS_SCREENSHOTS", str(tmp_path))) / request.node.callspec.id
    )
    shot_dir.mkdir(parents=True, exist_ok=True)
    browser.get(url)
    wait = WebDriverWait(browser, 120)
    wait.until(
        lambda d: d.execute_script("return !!(window.jupyterapp && window.jupyterapp.commands)")
    )
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")))
    try:
        wait.until(lambda d: d.execute_script(KERNEL_IDLE))  # the notebook's kernel is up
    except Exception:
        browser.get_screenshot_as_file(str(tmp_path / "kernel-wait.png"))
        print("state:", browser.execute_script(KERNEL_STATE), tmp_path / "kernel-wait.png")
        raise
    browser.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells')")

    try:
        frames = wait.until(
            lambda d: (
                len(f := d.find_elements(By.CSS_SELECTOR, "iframe.mcpsync-app-frame")) == 4 and f
            )
        )
    except Exception:
        browser.get_screenshot_as_file(str(shot_dir / "frames-wait.png"))
        raise
    for each in frames:
        assert each.get_attribute("sandbox") == "allow-scripts"  # no allow-same-origin
        srcdoc = each.get_attribute("srcdoc")
        assert srcdoc.startswith('<!DOCTYPE html><meta http-equiv="Content-Security-Policy"')
    frame, probe_frame, budget_frame, counter_frame = frames
    shown_twice = browser.find_elements(By.CSS_SELECTOR, ".mcpsync-app-stopped")
    assert [e.text for e in shown_twice] == [  # the second display of one AppView
        "This app is shown in another output; call mcpsync.apps.call(...) again to show it here."
    ]

    # the kernel's call: one tools/call reached the server; its answer is shown in the app
    first_call = WebDriverWait(browser, 60).until(lambda d: (_tool_calls(log) or [None])[0])
    assert first_call["params"]["name"] == "get-time"
    browser.switch_to.frame(frame)
    inner = WebDriverWait(browser, 60)
    shown = inner.until(
        lambda d: (t := d.find_element(By.ID, "server-time").text) not in ("", "Loading...") and t
    )
    first_answer = _answer_to(log, first_call["id"])
    assert first_answer is not None and shown == first_answer["structuredContent"]["time"]

    # the app's own call: click, it goes app -> widget -> kernel -> server and back
    browser.find_element(By.ID, "get-time-btn").click()
    calls = WebDriverWait(browser, 60).until(
        lambda d: len(_tool_calls(log)) >= 2 and _tool_calls(log)
    )
    app_call = calls[1]
    assert app_call["params"]["name"] == "get-time"
    answer = WebDriverWait(browser, 60).until(lambda d: _answer_to(log, app_call["id"]))
    expected = answer["structuredContent"]["time"]
    inner.until(lambda d: d.find_element(By.ID, "server-time").text == expected)
    assert expected != first_answer["structuredContent"]["time"]

    # ui/open-link: the widget asks the person (the link is shown, nothing opens by itself)
    browser.find_element(By.ID, "open-link-btn").click()
    browser.switch_to.default_content()
    ask = WebDriverWait(browser, 60).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".mcpsync-app-link")
    )[0]
    assert ask.find_element(By.TAG_NAME, "code").text == "https://modelcontextprotocol.io/"
    opener = ask.find_element(By.TAG_NAME, "a")
    assert opener.get_attribute("href") == "https://modelcontextprotocol.io/"
    assert opener.get_attribute("rel") == "noopener noreferrer"
    assert len(browser.window_handles) == 1  # nothing was opened
    ask.find_element(By.TAG_NAME, "button").click()  # Dismiss: the app hears "declined"
    WebDriverWait(browser, 30).until(
        lambda d: not d.find_elements(By.CSS_SELECTOR, ".mcpsync-app-link")
    )
    assert len(browser.window_handles) == 1

    # the hostile probe: everything it must not do failed, the bridge refused the rest
    browser.switch_to.frame(probe_frame)
    results = WebDriverWait(browser, 90).until(
        lambda d: "done: yes" in (t := d.find_element(By.ID, "results").text) and t
    )
    outcome = dict(line.split(": ", 1) for line in results.splitlines())
    assert outcome["parent-document"].startswith("blocked SecurityError"), outcome
    assert outcome["cookie"].startswith("blocked SecurityError"), outcome
    assert outcome["fetch"].startswith("blocked"), outcome
    assert outcome["image"] == "blocked", outcome
    assert outcome["initialize"] == "host mcpsync"
    assert outcome["unknown-method"] == "error -32601"
    assert "tools/call 'reset' refused" in outcome["model-only-tool"]
    assert "refused (limit 1048576)" in outcome["huge-message"]
    assert outcome["increment"] == "count 1"
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):  # nobody connected to the port the probe tried
        listener.accept()
    names = [m["params"]["name"] for m in _tool_calls(probe_log)]
    assert names == ["probe", "increment"], names  # "reset" never reached the server
    print("probe:", outcome)
    browser.switch_to.default_content()
    browser.execute_script("arguments[0].scrollIntoView()", probe_frame)
    browser.get_screenshot_as_file(str(shot_dir / "apps-probe.png"))
    assert outcome["theme"] == "light"  # JupyterLab's default theme, as the front-end saw it
    browser.execute_script(
        "window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})"
    )
    browser.switch_to.frame(probe_frame)
    WebDriverWait(browser, 60).until(
        lambda d: "theme-changed: dark" in d.find_element(By.ID, "results").text
    )
    browser.find_element(By.ID, "leave").click()  # the app navigates its frame away
    browser.switch_to.default_content()
    notes = ".mcpsync-app-stopped"  # the probe's note joins the second display's
    WebDriverWait(browser, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, notes)) == 2)
    texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, notes)]
    assert "The app navigated away from its document; it was stopped." in texts, texts
    assert len(browser.find_elements(By.CSS_SELECTOR, "iframe.mcpsync-app-frame")) == 3

    # the budget allocator (chart.js inline, 440 kB) renders under the default policy
    browser.switch_to.frame(budget_frame)
    WebDriverWait(browser, 90).until(
        lambda d: (
            d.find_elements(By.CSS_SELECTOR, "#sliders-container > *")
            and d.find_elements(By.CSS_SELECTOR, "canvas#budget-chart")
        )
    )
    browser.switch_to.default_content()

    # mcpsync's own demo app: its "+1" calls the app-only tool increment through the bridge
    browser.switch_to.frame(counter_frame)
    counter = WebDriverWait(browser, 60)
    counter.until(lambda d: d.find_element(By.ID, "status").text == "ready")
    before = int(browser.find_element(By.ID, "count").text)
    browser.find_element(By.ID, "plus").click()
    counter.until(lambda d: d.find_element(By.ID, "status").text == "incremented")
    assert int(browser.find_element(By.ID, "count").text) == before + 1
    browser.switch_to.default_content()
    names = [m["params"]["name"] for m in _tool_calls(probe_log.with_name("counter.log"))]
    assert names == ["counter", "increment"], names
    browser.execute_script("arguments[0].scrollIntoView()", frame)
    shot = shot_dir / "apps-basic.png"
    browser.get_screenshot_as_file(str(shot))
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
