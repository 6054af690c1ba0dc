"""The course website (ci/build_site.py), built once per test session into a temporary folder and read in a real
browser: the home page, a notebook page per edition (figures, widgets' static figures, rendered maths, folded
self-check answers), all 15 chapters and their solutions in both editions, each page from its edition's file (the
Chinese glossary included), search in English and in Chinese (results, Part II's words among them, snippets quoting the
page body, a status line in the page's language), one header bar, pages at a phone's width (no sideways scroll), the
language switch (keeping the query and the place on the page), the favicon, and a crawl for broken local links.

Needs the site's packages (pip install -r ci/requirements-site.txt) and, for the tests that open pages, Chromium and
Playwright (see tests/test_browser.py); skipped with a reason where they are missing. The browser may fetch nothing
but the local server: a page that needed the network would fail here.
"""

from __future__ import annotations

import functools
import html
import html.parser
import http.server
import importlib.util
import json
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.helpers import local_server
from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, PAGE_S

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "ci"))
import site_pages  # noqa: E402  (ci/ is not a package)

SITE_PACKAGES = ("sphinx", "myst_nb", "sphinx_book_theme", "jieba", "sphinx-mathjax-offline")
NOTEBOOK = "notebooks/08_char_gpt.html"  # figures, maths and self-check answers
CHAPTERS = 15  # notebooks 01-12 and Part II, 13-15: a page each, and a solutions page each, in both editions
ARTICLE = "article.bd-article"


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """Both editions, built with --strict (any Sphinx warning, e.g. a link to nothing, fails the build)."""
    missing = [name for name in SITE_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the site's packages are not installed ({', '.join(missing)}): "
                    "pip install -r ci/requirements-site.txt")
    out = tmp_path_factory.mktemp("site") / "site"
    start = time.monotonic()
    run = subprocess.run([sys.executable, str(REPO / "ci" / "build_site.py"), "--out", str(out), "--strict"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"the site build failed:\n{run.stdout}\n{run.stderr}"
    print(f"site built in {time.monotonic() - start:.0f} s")
    return out


@pytest.fixture(scope="session")
def server(site):
    """The built site over HTTP on 127.0.0.1 (a free port), as GitHub Pages would serve it."""
    with local_server(functools.partial(_QuietHandler, directory=str(site))) as url:
        yield url + "/"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no line per request in the test output
        pass


@pytest.fixture(scope="session")
def browser(playwright):  # the session's Playwright driver (tests/conftest.py), shared with tests/test_browser.py
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=PAGE_S * 1000)
    yield chromium
    chromium.close()


@pytest.fixture
def page(browser, server):
    """A page that may load only from the local server; `page.outside` lists anything else it asked for,
    `page.missing` what the server did not have (a 404: a favicon.ico the browser asks for unprompted, say), and
    `page.errors` the uncaught errors its scripts threw (any fails the test)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    outside, missing = [], []
    context.on("response", lambda response: missing.append(response.url) if response.status >= 400 else None)

    def only_local(route):
        if route.request.url.startswith(server) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    page = context.new_page()
    page.set_default_timeout(PAGE_S * 1000)
    errors = []
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    page.outside, page.missing, page.errors = outside, missing, errors
    yield page
    context.close()
    assert not errors, f"the pages' scripts threw: {errors}"
    assert not outside, f"pages asked for the network: {outside}"
    assert not missing, f"the site does not have: {missing}"


def _stored_figures(notebook: Path) -> int:
    """How many figures the notebook stores, widgets' static figures included."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return sum("image/png" in out.get("data", {}) for cell in cells for out in cell.get("outputs", []))


@pytest.mark.browser
def test_home_page_has_the_notebook_table_and_the_set_up_commands(page, server):
    page.goto(server)
    assert "Transformers from scratch" in page.title()
    table = page.locator(f"{ARTICLE} table").first.locator("a")
    hrefs = table.evaluate_all("links => links.map(a => a.getAttribute('href'))")
    names = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(names) == CHAPTERS and hrefs == [f"notebooks/{name}.html" for name in names]  # pages, in order
    code = page.locator(f"{ARTICLE} pre").all_inner_texts()
    assert any("pip install -r requirements.txt" in text and "pytest" in text for text in code), code
    sidebar = page.locator(".bd-sidenav a.reference").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert [h for h in sidebar if re.fullmatch(r"notebooks/\d\d_\w+\.html", h)] == hrefs


@pytest.mark.browser
@pytest.mark.parametrize("edition", ["en", "zh"])
def test_notebook_page_shows_its_figures_maths_and_folded_answers(page, server, edition):
    prefix = "" if edition == "en" else "zh/"
    source = REPO / "notebooks" / ("" if edition == "en" else "zh") / "08_char_gpt.ipynb"
    page.goto(server + prefix + NOTEBOOK)
    page.wait_for_selector(f"{ARTICLE} mjx-container")  # MathJax, from the site's own copy, has typeset
    page.wait_for_function("() => !document.querySelector('mjx-container:not([jax])') && "
                           "[...document.images].every(img => img.complete)")
    figures = page.locator(f"{ARTICLE} .cell_output img")
    widths = figures.evaluate_all("imgs => imgs.map(img => img.naturalWidth)")
    assert len(widths) == _stored_figures(source) and all(widths), widths  # every stored figure, decoded
    prose = page.evaluate(f"""() => {{ const article = document.querySelector('{ARTICLE}').cloneNode(true);
        article.querySelectorAll('pre, code, mjx-container, script').forEach(e => e.remove());
        return article.textContent; }}""")
    assert "$$" not in prose and not re.search(r"\$[^$\s][^$]*\\[a-z]+", prose), "maths left as raw TeX"
    answers = page.locator(f"{ARTICLE} details")
    assert answers.count() >= 4 and not any(answers.evaluate_all("ds => ds.map(d => d.open)"))
    if edition == "zh":
        assert re.search(r"[\u4e00-\u9fff]", page.locator(f"{ARTICLE} h1").first.inner_text())


@pytest.mark.browser
def test_widget_shows_its_static_figure(page, server):
    """Notebook 01's softmax explorer is a widget in JupyterLab; the site shows the figure stored beside it."""
    page.goto(server + "notebooks/01_scaled_dot_product_attention.html")
    text = page.locator(f"{ARTICLE} .cell_output").all_inner_texts()
    assert not any("softmax scaling explorer (interactive" in t for t in text)  # the image, not its text fallback
    widths = page.locator(f"{ARTICLE} .cell_output img").evaluate_all("imgs => imgs.map(img => img.naturalWidth)")
    assert len(widths) == _stored_figures(REPO / "notebooks" / "01_scaled_dot_product_attention.ipynb")


@pytest.mark.browser
@pytest.mark.parametrize(("edition", "query"), [("en", "attention"), ("zh", "注意力"), ("zh", "位置编码"),
                                               ("en", "BPE"), ("zh", "BPE"), ("zh", "量化"), ("en", "FlashAttention"),
                                               ("zh", "FlashAttention")])
def test_search_finds_the_notebooks(page, server, edition, query):
    """Part I's words and Part II's (BPE: 13, 量化 = quantization: 14, FlashAttention: 15) find their notebooks."""
    prefix = "" if edition == "en" else "zh/"
    page.goto(server + prefix + "search.html?q=" + urllib.parse.quote(query))
    page.wait_for_function("() => /\\d/.test(document.querySelector('#search-results .search-summary')"
                           "?.textContent || '')")  # "found N pages"
    found = page.locator("#search-results ul.search li a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
    expected = {"attention": ["01_scaled_dot_product_attention", "02_multi_head_attention"],
                "注意力": ["01_scaled_dot_product_attention", "02_multi_head_attention"],
                "位置编码": ["04_positional_encoding"], "BPE": ["13_tokenization"], "量化": ["14_a_real_llm"],
                "FlashAttention": ["15_fast_attention"]}[query]
    for name in expected:
        assert f"notebooks/{name}.html" in found, found
    status = page.locator("#search-results .search-summary").inner_text()
    assert bool(re.search(r"[\u4e00-\u9fff]", status)) == (edition == "zh"), status  # the page's own language


def _article_text(page, url: str) -> str:
    """The text of the article (the body, without the theme's menus) of the page at `url`, as served (maths as TeX,
    not typeset), one space between words."""
    return page.evaluate(f"""async url => {{ const html = await (await fetch(url)).text();
        const article = new DOMParser().parseFromString(html, 'text/html').querySelector('{ARTICLE}');
        article.querySelectorAll('.headerlink, script, style').forEach(e => e.remove());
        return article.textContent.replace(/\\s+/g, ' ').trim(); }}""", url)


@pytest.mark.browser
@pytest.mark.parametrize(("edition", "query", "menu"), [("en", "attention", ("Light", "Dark", "Contents")),
                                                        ("zh", "注意力", ("亮色", "暗色", "目录", "System Settings"))])
def test_search_snippets_quote_the_page_body(page, server, edition, query, menu):
    """Each result's snippet is text of that page's article, not the theme's buttons and contents list around it."""
    prefix = "" if edition == "en" else "zh/"
    page.goto(server + prefix + "search.html?q=" + urllib.parse.quote(query))
    results = page.locator("#search-results ul.search li")
    page.wait_for_function("() => document.querySelectorAll('#search-results ul.search li p.context').length >= 3")
    shown = [(results.nth(i).locator("a").first.get_attribute("href"), results.nth(i).locator("p.context").inner_text())
             for i in range(3)]
    for href, snippet in shown:
        assert not any(word in snippet for word in menu), (href, snippet)
        body = _article_text(page, href)
        assert query in snippet.lower() and snippet.strip(".").strip() in body, (href, snippet, body[:300])


@pytest.mark.browser
def test_one_header_bar_with_one_search_field(page, server):
    """pydata-sphinx-theme 0.20 adds a header bar with its own search box unless navbar_persistent is set: the
    site's pages have the book theme's article header only."""
    page.goto(server + "notebooks/01_scaled_dot_product_attention.html")
    assert page.evaluate("() => document.querySelector('#pst-header')?.getBoundingClientRect().height ?? 0") == 0
    assert page.locator(".search-button-field:visible").count() == 1  # the one in the sidebar
    assert page.locator(".bd-header-article:visible").count() == 1


@pytest.mark.browser
@pytest.mark.parametrize("path", ["notebooks/TEACHING.html", "zh/index.html", "notebooks/09_length_generalisation.html",
                                  "notebooks/references.html"])
def test_a_phone_never_scrolls_sideways(browser, server, path):
    """At 390 px, long inline code (a sha256, a dotted torch path, a file path) wraps instead of widening the page."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        page.set_default_timeout(PAGE_S * 1000)
        page.goto(server + path)
        page.wait_for_load_state("load")
        width, scroll = page.evaluate("() => [document.documentElement.clientWidth, "
                                      "document.documentElement.scrollWidth]")
        widest = page.locator(f"{ARTICLE} code.literal").evaluate_all(
            "codes => Math.max(0, ...codes.map(c => c.getBoundingClientRect().right))")
        assert width == 390 and scroll <= width and widest <= width, (path, width, scroll, widest)
    finally:
        context.close()


def test_the_chinese_index_is_cut_into_words(site):
    """jieba cuts Chinese text into words: 注意力 and 掩码 are terms of their own, not only parts of longer runs
    (without it, Sphinx would index whole runs of characters between punctuation and find them by substring)."""
    text = (site / "zh" / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1: text.rindex(")")])
    assert {"注意力", "掩码", "位置编码"} <= set(index["terms"]) | set(index["titleterms"])
    runs = [t for t in index["terms"] if re.fullmatch(r"[\u4e00-\u9fff]{12,}", t)]
    assert len(runs) < 0.01 * len(index["terms"]), runs[:5]  # a run of 12+ characters is rarely one word


@pytest.mark.browser
def test_language_switch_lands_on_the_same_page(page, server):
    page.goto(server + "notebooks/05_transformer_block.html")
    page.click(".course-lang-switch")
    page.wait_for_url(server + "zh/notebooks/05_transformer_block.html")
    assert re.search(r"[\u4e00-\u9fff]", page.locator(f"{ARTICLE} h1").first.inner_text())
    page.goto(server + "zh/notebooks/solutions/03_solutions.html")
    page.click(".course-lang-switch")
    page.wait_for_url(server + "notebooks/solutions/03_solutions.html")


@pytest.mark.browser
def test_language_switch_keeps_the_query_and_the_place_on_the_page(page, server):
    page.goto(server + "search.html?q=attention")
    page.click(".course-lang-switch")
    page.wait_for_url(server + "zh/search.html?q=attention")
    page.wait_for_function("() => /\\d/.test(document.querySelector('#search-results .search-summary')"
                           "?.textContent || '')")
    sections = "() => [...document.querySelectorAll('article.bd-article section[id]')].map(s => s.id)"
    page.goto(server + "notebooks/05_transformer_block.html#residual-connections")
    index = page.evaluate(sections).index("residual-connections")
    page.click(".course-lang-switch")  # the Chinese heading gives the section another id: found by its number
    page.wait_for_url(re.compile(re.escape(server + "zh/notebooks/05_transformer_block.html") + "#.+"))
    page.wait_for_function("() => window.scrollY > 0")
    assert page.evaluate("() => decodeURIComponent(location.hash.slice(1))") == page.evaluate(sections)[index]
    page.goto(server + "zh/index.html#cpu-gpu-and-colab")  # an id that both editions share is kept as it is
    page.click(".course-lang-switch")
    page.wait_for_url(server + "index.html#cpu-gpu-and-colab")


@pytest.mark.browser
def test_a_badly_encoded_fragment_breaks_nothing(page, server):
    """"#100%" is no valid percent-encoding (decodeURIComponent throws URIError on it): on load and on the language
    switch the scripts throw nothing, and the switch still reaches the other edition with the fragment kept."""
    page.goto(server + "notebooks/05_transformer_block.html#100%")
    page.click(".course-lang-switch")
    page.wait_for_url(server + "zh/notebooks/05_transformer_block.html#100%")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(done))")  # the load's own scripts have run
    assert page.errors == []


@pytest.mark.browser
def test_the_favicon_is_served(page, server):
    """Every page names its icon, and /favicon.ico, which browsers ask for unprompted, exists (no 404)."""
    page.goto(server + "zh/notebooks/01_scaled_dot_product_attention.html")
    icon = page.locator("link[rel='icon']").get_attribute("href")
    for url in (urllib.parse.urljoin(page.url, icon), server + "favicon.ico"):
        response = page.request.get(url)
        assert response.status == 200 and response.body()[:4] == b"\x00\x00\x01\x00", url  # an .ico file


class _Links(html.parser.HTMLParser):
    """The ids of one HTML page, and its links: (tag, attribute value)."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.ids.update(filter(None, [attrs.get("id"), attrs.get("name") if tag == "a" else None]))
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img", "link", "script"):
                self.links.append((tag, attrs[key]))


@pytest.mark.browser
def test_no_broken_local_link_and_nothing_from_the_network(site):
    pages = {}
    for path in site.rglob("*.html"):
        if "_static" not in path.relative_to(site).parts:  # the theme's Jinja templates are copied there too
            pages[path.resolve()] = parser = _Links()
            parser.feed(path.read_text(encoding="utf-8"))
    broken, remote, files = [], [], []
    for path, parser in pages.items():
        here = path.relative_to(site.resolve())
        for tag, link in parser.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or link.startswith("//"):
                if tag != "a":
                    remote.append(f"{here}: {link}")  # a script, style sheet or image from elsewhere
                continue
            target = (path.parent / urllib.parse.unquote(url.path)).resolve() if url.path else path
            target = target / "index.html" if target.is_dir() else target
            if not target.exists() or (url.fragment and target in pages and url.fragment not in pages[target].ids):
                broken.append(f"{here}: {link}")
            elif tag == "a" and target.suffix in (".ipynb", ".md") and "_sources" not in target.parts:
                files.append(f"{here}: {link}")  # a course file where its page was meant
    assert len(pages) > 60 and not broken and not remote and not files, (broken[:20], remote[:20], files[:20])
    for edition in ("", "zh/"):  # every chapter and its solutions in both editions (untranslated ones in English)
        assert len(list((site / edition / "notebooks").glob("[0-9][0-9]_*.html"))) == CHAPTERS
        assert len(list((site / edition / "notebooks" / "solutions").glob("[0-9][0-9]_*.html"))) == CHAPTERS


def test_each_edition_shows_its_own_notebooks_and_glossary(site):
    """A page of the Chinese edition is built from the Chinese file wherever one exists (notebooks/zh/13_… as soon as
    it is there; the Chinese glossary, notebooks/zh/glossary.md), from the English one otherwise: the same pages in
    both editions, each page's first heading that of the file it was built from."""
    english, chinese = site_pages.sources("en"), site_pages.sources("zh")
    assert list(english) == list(chinese)
    for name, path in english.items():
        translated = path.replace("notebooks/", "notebooks/zh/", 1)
        if path.startswith("notebooks/"):
            assert chinese[name] == (translated if (REPO / translated).exists() else path), name
        for prefix, source in (("", path), ("zh/", chinese[name])):
            if source.endswith((".ipynb", ".md")):
                title = html.escape(_first_heading(REPO / source), quote=False)
                assert f"<h1>{title}" in (site / f"{prefix}{name}.html").read_text(encoding="utf-8"), (name, title)


def _first_heading(path: Path) -> str:
    """The first level-1 heading of a notebook's markdown cells or of a markdown file."""
    if path.suffix == ".ipynb":
        return site_pages._title(path)
    return next(line[2:].strip() for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# "))

def test_links_point_at_pages_and_the_badge_is_text():
    """Without Sphinx: how ci/site_pages.py rewrites a page's links, for a course with a public repository."""
    url = "https://github.com/someone/course"
    links = site_pages.Links("zh", "notebooks/03_masks", "notebooks/zh/03_masks.ipynb", url, "main")
    assert links.markdown("[r](../references.md#vaswani2017) [n](02_multi_head_attention.ipynb)") == \
        "[r](references.md#vaswani2017) [n](02_multi_head_attention.ipynb)"
    assert links.markdown("[en](../03_masks.ipynb)") == '<a href="../../notebooks/03_masks.html">en</a>'
    assert links.markdown("[s](../../shared) `[c](x.md)`") == f"[s]({url}/tree/main/shared) `[c](x.md)`"
    badge = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.example/nb)"
    assert links.markdown(badge) == "[Open In Colab](https://colab.example/nb)"
    assert links.markdown('- <a id="su2021"></a>**Su et al.**') == "- (su2021)=\n  **Su et al.**"
    unpublished = site_pages.Links("en", "index", "README.md", None, "main")
    assert unpublished.markdown("[`shared/`](shared)") == "`shared/`"

