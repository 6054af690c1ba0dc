"""End to end in a real browser: JupyterLab runs a notebook with the softmax explorer, a slider moves, the plot changes;
JupyterLab shows a notebook of the Chinese edition with its Chinese text and its figures; and a self-check answer,
hidden in a <details> block of notebook 01, opens when its summary is clicked.

Needs Chromium (Debian package `chromium`) and Playwright for Python (ci/requirements-browser.txt), and for the
Chinese notebook a font with Chinese glyphs (Debian package `fonts-noto-cjk`); skipped with a reason where one is
missing. Select them with `pytest -m browser`, leave them out with `-m "not browser"`. The Chinese notebook's
screenshots, and the open self-check answer's, go to build/screenshots/ (ignored by git) for a person to look at.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import re
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
CHINESE_01 = REPO / "notebooks" / "zh" / "01_scaled_dot_product_attention.ipynb"
SCREENSHOTS = REPO / "build" / "screenshots"
FIGURE = '.jp-OutputArea-output img[src^="data:image/png"]'
SELF_CHECK = REPO / "notebooks" / "01_scaled_dot_product_attention.ipynb"
DETAILS = ".jp-MarkdownCell .jp-RenderedMarkdown details"  # a self-check answer, as JupyterLab renders it


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -r ci/requirements-browser.txt)"
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"Chromium not found at {CHROMIUM} (Debian: apt-get install -y chromium; or set CHROMIUM_PATH)"
    return None


def _no_chinese_font() -> str | None:
    """Why Chinese text would show as empty boxes, or None when fontconfig knows a font with Chinese glyphs."""
    if not shutil.which("fc-list"):
        return "fc-list (fontconfig) not found: cannot tell whether a font with Chinese glyphs is installed"
    found = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout
    return None if found.strip() else ("no font with Chinese glyphs (fc-list :lang=zh is empty; "
                                        "Debian: apt-get install -y fonts-noto-cjk)")


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
    with _jupyterlab_server(tmp_path, root, "explorer.ipynb") as url:
        yield url


@contextlib.contextmanager
def _jupyterlab_server(tmp_path: Path, root: Path, notebook: str):
    """Start JupyterLab serving `root`; yield the URL that opens `notebook` (relative to root); always shut down."""
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)  # no news or update pop-ups over the notebook
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false",
                                                                          "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env.update(JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])), COURSE_SIZE="fast")
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
        yield f"{base}/lab/tree/{notebook}?token={token}"
    finally:
        try:  # ask politely (the server also stops its kernels), then make sure
            request = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(request, timeout=10)
            server.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


@contextlib.contextmanager
def _page(playwright, tmp_path: Path):
    """A 1280 x 900 page in headless Chromium, from the session's Playwright driver (tests/conftest.py). A Playwright
    error inside (a timeout, a missing element) fails the test with a screenshot and the path of the server's log."""
    from playwright.sync_api import Error as PlaywrightError

    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=PAGE_S * 1000)
    page = None
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(PAGE_S * 1000)
        yield page
    except PlaywrightError as err:
        if page is not None:
            page.screenshot(path=str(tmp_path / "failure.png"))
        pytest.fail(f"{err}\nscreenshot: {tmp_path / 'failure.png'}, server log: {tmp_path / 'jupyterlab.log'}")
    finally:
        browser.close()


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


def test_softmax_explorer_slider_changes_the_plot(jupyterlab, playwright, tmp_path):
    start = time.monotonic()
    with _page(playwright, tmp_path) as page:
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
    assert readout.strip() == "64"
    assert after != before
    # the browser shows exactly the figures the callback draws for d_k=4 and then d_k=64
    from shared.explorers import figure_png, softmax_scaling_figure

    for src, d_k in ((before, 4), (after, 64)):
        assert src == "data:image/png;base64," + base64.b64encode(figure_png(softmax_scaling_figure(d_k))).decode()
    print(f"browser test: {time.monotonic() - start:.1f} s from page load to the changed plot")


def test_chinese_notebook_shows_its_chinese_title_and_figures(tmp_path, request):
    """JupyterLab opens notebooks/zh/01 (its stored outputs, nothing run): the Chinese title and a figure show."""
    if not CHINESE_01.exists():
        pytest.skip("notebooks/zh/01_scaled_dot_product_attention.ipynb does not exist yet "
                    "(python ci/translate.py skeleton 01, translate, then python ci/translate.py build)")
    reason = _missing() or _no_chinese_font()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import Error as PlaywrightError

    playwright = request.getfixturevalue("playwright")  # after the font check: skip with the font's reason first
    cells = json.loads(CHINESE_01.read_text(encoding="utf-8"))["cells"]
    heading = next("".join(c["source"]) for c in cells[1:] if c["cell_type"] == "markdown").splitlines()[0]
    title = heading.lstrip("#").strip()
    assert re.search(r"[\u4e00-\u9fff]", title), f"the title {title!r} of {CHINESE_01.name} is not in Chinese"
    root = tmp_path / "notebooks"
    (root / "zh").mkdir(parents=True)
    shutil.copy(CHINESE_01, root / "zh" / CHINESE_01.name)  # a copy: JupyterLab may write beside what it opens
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with _jupyterlab_server(tmp_path, root, f"zh/{CHINESE_01.name}") as url:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=PAGE_S * 1000)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.set_default_timeout(PAGE_S * 1000)
            page.goto(url)
            page.wait_for_selector(".jp-Notebook .jp-Cell")
            page.wait_for_function("title => document.querySelector('.jp-Notebook h1') !== null && "
                                   "document.querySelector('.jp-Notebook h1').textContent.includes(title)", arg=title)
            page.screenshot(path=str(SCREENSHOTS / "zh_01.png"))
            page.wait_for_selector(FIGURE, state="attached")  # stored figures, rendered as the cells are laid out
            figures = page.locator(FIGURE)
            figures.first.scroll_into_view_if_needed()
            page.wait_for_function("s => document.querySelector(s).naturalWidth > 0", arg=FIGURE)  # decoded
            page.screenshot(path=str(SCREENSHOTS / "zh_01_figure.png"))
            shown = figures.count()
        except PlaywrightError as err:
            page.screenshot(path=str(tmp_path / "failure.png"))
            pytest.fail(f"{err}\nscreenshot: {tmp_path / 'failure.png'}, server log: {tmp_path / 'jupyterlab.log'}")
        finally:
            browser.close()
    assert shown >= 1


def test_self_check_details_open_when_the_summary_is_clicked(tmp_path, playwright):
    """JupyterLab shows notebook 01's stored self-check questions (nothing run): the first answer sits in a closed
    <details> block and is hidden; a click on its summary opens it, and the answer shows, rendered as markdown."""
    cells = json.loads(SELF_CHECK.read_text(encoding="utf-8"))["cells"]
    texts = ["".join(c["source"]) for c in cells]
    heading = next(i for i, text in enumerate(texts) if text.startswith("## Self-check questions"))
    questions = next(text for text in texts[heading:] if "<details>" in text)  # the first question's cell
    answer = re.search(r"</summary>\n\n(.+?)\n\n</details>", questions, re.S).group(1)
    pointer = re.search(r"section \d+", answer).group(0)  # plain text, the same in the rendered answer
    root = tmp_path / "notebooks"
    root.mkdir()
    shutil.copy(SELF_CHECK, root / SELF_CHECK.name)  # a copy: JupyterLab may write beside what it opens
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with _jupyterlab_server(tmp_path, root, SELF_CHECK.name) as url, _page(playwright, tmp_path) as page:
        page.goto(url)
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        details = page.locator(DETAILS).first
        details.scroll_into_view_if_needed()  # waits for the self-check cell to be rendered
        summary, text = details.locator("summary"), details.locator("p").first  # the answer's first paragraph
        before = dict(open=details.evaluate("d => d.open"), summary=summary.is_visible(), answer=text.is_visible())
        summary.click()
        text.wait_for(state="visible")
        details.evaluate("d => d.scrollIntoView({block: 'center'})")  # the question above it, the answer below
        after = dict(open=details.evaluate("d => d.open"), answer=text.inner_text())
        page.screenshot(path=str(SCREENSHOTS / "details_open.png"))
    assert before == dict(open=False, summary=True, answer=False), before
    assert after["open"] and pointer in after["answer"], after
