"""End to end in a real browser: JupyterLab runs a notebook with the softmax explorer, a slider moves, the plot changes.

Needs Chromium (Debian package `chromium`) and Playwright for Python (ci/requirements-browser.txt); skipped with
a reason where either is missing. Select it with `pytest -m browser`, leave it out with `-m "not browser"`.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the test is skipped then
    PlaywrightTimeout = TimeoutError

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_S, PAGE_S, KERNEL_S, UPDATE_S = 90, 60, 180, 60  # upper bounds of every wait
SLIDER = ".widget-slider .noUi-handle"
PLOT = ".jp-OutputArea-output .widget-output img"
IDLE = '.jp-Notebook-ExecutionIndicator[data-status="idle"]'


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -r ci/requirements-browser.txt)"
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"Chromium not found at {CHROMIUM} (Debian: apt-get install -y chromium; or set CHROMIUM_PATH)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the server process: ask Linux to send it SIGTERM if the test process is killed before it can clean up."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _write_notebook(path: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell("from shared.explorers import softmax_scaling_explorer\n"
                                                "softmax_scaling_explorer(d_k=4)")]
    nbformat.write(notebook, path)


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on 127.0.0.1 (free port, random token) serving a temp folder; always shut down."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "notebooks"
    root.mkdir()
    _write_notebook(root / "explorer.ipynb")
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)  # no news or update pop-ups over the notebook
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                          "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env.update(JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])), COURSE_FAST="1")
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}"]
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                              preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"JupyterLab exited with {server.returncode}:\n{(tmp_path / 'jupyterlab.log').read_text()}")
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer within {SERVER_START_S} s")
                time.sleep(0.5)
        yield f"{base}/lab/tree/explorer.ipynb?token={token}"
    finally:
        try:  # ask politely (the server also stops its kernels), then make sure
            request = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(request, timeout=10)
            server.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


def _run_all(page, deadline: float) -> None:
    """Run > Run All Cells, again if the cell has not started after 15 s (a click can land before the kernel is
    attached), until the deadline."""
    started = ("() => /\\[(\\*|\\d+)\\]/.test(document.querySelector('.jp-Notebook .jp-Cell .jp-InputPrompt')"
               ".textContent)")  # the prompt shows [*] or [1]
    while time.monotonic() < deadline:
        page.click(".jp-Notebook .jp-Cell .jp-InputPrompt")  # make the notebook the current widget
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.click('li[data-command="runmenu:run-all"]')
        try:
            page.wait_for_function(started, timeout=15_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")  # close the menu if it is still open
    pytest.fail("the notebook's cells never started running")


def _settled(page, deadline: float) -> str:
    """The plot's src once it has stayed the same for 2 s (or at the deadline)."""
    src, since = page.get_attribute(PLOT, "src"), time.monotonic()
    while time.monotonic() - since < 2.0 and time.monotonic() < deadline:
        time.sleep(0.25)
        now = page.get_attribute(PLOT, "src")
        if now != src:
            src, since = now, time.monotonic()
    return src


def test_softmax_explorer_slider_changes_the_plot(jupyterlab, tmp_path):
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    start = time.monotonic()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=PAGE_S * 1000)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.set_default_timeout(PAGE_S * 1000)
            page.goto(jupyterlab)
            page.wait_for_selector(".jp-Notebook .jp-Cell")
            page.wait_for_selector(IDLE, timeout=KERNEL_S * 1000)  # the kernel is up
            _run_all(page, time.monotonic() + KERNEL_S)
            page.wait_for_selector(PLOT, timeout=KERNEL_S * 1000)  # torch imported, explorer built, plot drawn
            before = page.get_attribute(PLOT, "src")
            page.screenshot(path=str(tmp_path / "before.png"))
            handle = page.locator(SLIDER).first  # the d_k slider: 4 -> 64
            handle.focus()
            for _ in range(4):
                handle.press("ArrowRight")
            page.wait_for_function("([selector, before]) => { const img = document.querySelector(selector);"
                                   " return img !== null && img.src !== before; }", arg=[PLOT, before],
                                   timeout=UPDATE_S * 1000)
            after = _settled(page, time.monotonic() + UPDATE_S)  # every key press redraws: wait for the last one
            readout = page.locator(".widget-slider .widget-readout").first.inner_text()
            page.screenshot(path=str(tmp_path / "after.png"))
            if os.environ.get("BROWSER_SCREENSHOT"):
                shutil.copy(tmp_path / "after.png", os.environ["BROWSER_SCREENSHOT"])
        except PlaywrightError as err:  # a timeout or a missing element: keep a picture of the page for debugging
            page.screenshot(path=str(tmp_path / "failure.png"))
            pytest.fail(f"{err}\nscreenshot: {tmp_path / 'failure.png'}, server log: {tmp_path / 'jupyterlab.log'}")
        finally:
            browser.close()
    assert readout.strip() == "64"
    assert after != before
    # the browser shows exactly the figures the callback draws for d_k=4 and then d_k=64
    from shared.explorers import figure_png, softmax_scaling_figure

    for src, d_k in ((before, 4), (after, 64)):
        assert src == "data:image/png;base64," + base64.b64encode(figure_png(softmax_scaling_figure(d_k))).decode()
    print(f"browser test: {time.monotonic() - start:.1f} s from page load to the changed plot")
