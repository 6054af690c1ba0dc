"""Sphinx configuration of the course website, one file for both editions: ci/build_site.py runs Sphinx on a folder
that ci/site_pages.py has staged, with `-t en` or `-t zh` to choose the edition (the tag is known before this file runs,
unlike -D overrides). Nothing here executes a notebook: the pages show the outputs stored in the repository."""

import importlib.metadata
import pathlib
import re
import shutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from notebook_header import settings  # noqa: E402  (ci/ is not a package)

EDITION = "zh" if tags.has("zh") else "en"  # noqa: F821  (Sphinx gives conf.py the command line's tags)
OTHER = {"en": "zh", "zh": "en"}[EDITION]
SWITCH = {"zh": ("中文", "本页的中文版"), "en": ("English", "This page in English")}  # label, title, per target
REPOSITORY, REF = settings()  # from pyproject.toml, like the Colab badges; REPOSITORY None: not published yet

project = {"en": "Transformers from scratch", "zh": "从零实现 Transformer"}[EDITION]
author = "The Transformers from scratch course authors"
copyright = re.search(r"Copyright \(c\) (.+)", (ROOT / "LICENSE").read_text(encoding="utf-8")).group(1)
language = {"en": "en", "zh": "zh_CN"}[EDITION]  # zh_CN: Sphinx's Chinese search, which segments words with jieba

extensions = ["myst_nb"]
nb_execution_mode = "off"  # never run a notebook: show what is stored
nb_ipywidgets_js = {}  # no widget JavaScript (it would come from a CDN) ...
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]  # ... the static figure
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_dmath_double_inline = True  # $$ inside a paragraph is display maths too
myst_heading_anchors = 4  # README.md#cpu-gpu-and-colab and the like resolve, and are checked

mathjax_path = "mathjax/tex-chtml.js"  # the local copy below, never a CDN
MATHJAX = importlib.metadata.distribution("sphinx-mathjax-offline").locate_file("sphinx-mathjax-offline/static/mathjax")

html_theme = "sphinx_book_theme"
html_title = project
html_baseurl = ""
if REPOSITORY:  # GitHub Pages serves https://OWNER.github.io/NAME/ for github.com/OWNER/NAME
    owner, name = REPOSITORY.removeprefix("https://github.com/").split("/")
    html_baseurl = f"https://{owner.lower()}.github.io/{name}/" + ("zh/" if EDITION == "zh" else "")
templates_path = [str(HERE / "_templates")]
html_static_path = [str(HERE / "_static")]
html_css_files = ["course-site.css"]
html_js_files = [("course-site.js", {"defer": "defer"})]  # after Sphinx's scripts, before the search starts
html_favicon = str(HERE / "_extra" / "favicon.ico")  # the pages' <link rel="icon">
html_extra_path = [str(HERE / "_extra")]  # favicon.ico at the root too, where a browser asks for it unprompted
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "use_download_button": True,
    "navbar_persistent": [],  # pydata-sphinx-theme 0.20 otherwise adds a second, empty header bar with a search box
    "article_header_end": ["lang-switch.html", "article-header-buttons.html"],
    "repository_url": REPOSITORY or "",
    "repository_branch": REF,
    "use_repository_button": bool(REPOSITORY),
}


def _other_language(app, pagename, templatename, context, doctree):
    """Every page links to the page of the same name in the other edition (the Chinese one lives under zh/)."""
    up = "../" * pagename.count("/")
    url = f"{up}zh/{pagename}.html" if EDITION == "en" else f"../{up}{pagename}.html"
    label, title = SWITCH[OTHER]
    context.update(other_language_url=url, other_language=OTHER, other_language_label=label,
                   other_language_title=title)


def _copy_mathjax(app, exception):
    """Ship MathJax with the site: the one bundle the pages load and the folders of components it loads on demand."""
    if exception is not None or app.builder.format != "html":
        return
    target = pathlib.Path(app.outdir) / "_static" / "mathjax"
    shutil.rmtree(target, ignore_errors=True)
    for folder in (p for p in pathlib.Path(MATHJAX).iterdir() if p.is_dir()):
        shutil.copytree(folder, target / folder.name)
    shutil.copy2(MATHJAX / "tex-chtml.js", target / "tex-chtml.js")


def _search_terms(app, config):
    """The Chinese search index also knows the glossary's terms as words (ci/site_pages.py writes them)."""
    terms = pathlib.Path(app.srcdir) / "search-terms.txt"
    if EDITION == "zh" and terms.exists():
        config.html_search_options = {"dict": str(terms)}


def setup(app):
    app.connect("config-inited", _search_terms)
    app.connect("html-page-context", _other_language)
    app.connect("build-finished", _copy_mathjax)
