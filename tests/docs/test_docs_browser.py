"""The documentation site in a real browser (issue 30): Debian's chromium (headless, through
chromedriver) opens the built site served on 127.0.0.1, every page loads with no console
error, and the search finds a page.

The site is built with ``mkdocs build --strict`` into a temporary folder and served by a
``http.server`` thread of this process. Set ``MCPSYNC_DOCS_SCREENSHOT=FILE.png`` to keep a
screenshot of the getting-started page.
"""

from __future__ import annotations

import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest
from doc_blocks import REPO

pytest.importorskip("selenium")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip(
        "chromium / chromedriver not installed (scripts/install-test-deps.sh installs them "
        "with apt-get)",
        allow_module_level=True,
    )

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
    "--disable-background-networking", "--disable-component-update", "--window-size=1280,1000",
]  # fmt: skip


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory):
    site = tmp_path_factory.mktemp("site")
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert p.returncode == 0, f"mkdocs build --strict failed:\n{p.stdout}\n{p.stderr}"
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site))
    )
    thread = threading.Thread(target=server.serve_forever, name="docs-site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def browser(tmp_path: pathlib.Path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _errors(driver: webdriver.Chrome) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def test_every_page_loads_without_console_errors_and_search_finds_a_page(site_url, browser):
    url, site = site_url
    pages = sorted(p.name for p in site.glob("*.html") if p.name != "404.html")
    assert "getting-started.html" in pages and "reference.html" in pages, pages
    wait = WebDriverWait(browser, 30)
    problems = {}
    for page in pages:
        browser.get(f"{url}/{page}")
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "article.md-content__inner")))
        errors = _errors(browser)
        if errors:
            problems[page] = errors
    assert not problems, f"console errors: {problems}"

    browser.get(f"{url}/getting-started.html")
    title = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "article h1")))
    assert title.text.startswith("Getting started")
    shot = os.environ.get("MCPSYNC_DOCS_SCREENSHOT")
    if shot:
        browser.save_screenshot(shot)

    # the search: open it, type, and wait for a result that links to a page of the site
    box = wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "input.md-search__input")))
    box.click()
    box.send_keys("RequestTimeout")
    results = wait.until(
        EC.presence_of_all_elements_located((By.CSS_SELECTOR, ".md-search-result__item a"))
    )
    hrefs = [r.get_attribute("href") for r in results]
    assert any("troubleshooting.html" in h for h in hrefs), hrefs
    box.send_keys(Keys.ESCAPE)
    assert not _errors(browser), _errors(browser)
