"""Build the course website, both editions, from the notebooks' stored outputs (nothing is executed).

    pip install -r ci/requirements-site.txt
    python ci/build_site.py [--out DIR] [--strict]      # default DIR: build/site/ (ignored by git)
    python -m http.server -d build/site 8000            # then open http://127.0.0.1:8000/

The English edition is at the root of DIR, the Chinese one under DIR/zh/, each with its own search index (the Chinese
one segments words with jieba, so 注意力 is found). Every page links to the same page in the other edition, keeping the
search query and the place on the page (ci/site/_static/course-site.js, which also makes search snippets quote the
page body). The site needs no network to build or to view: maths is rendered by the copy of MathJax that the PyPI
package sphinx-mathjax-offline ships, the widgets show their static figures, and the Colab badge is a text link.
--strict turns every Sphinx warning (a link that resolves to nothing, for one) into a failure; the tests build with it.

Why plain Sphinx + myst-nb + sphinx-book-theme, and not Jupyter Book 1: Jupyter Book 1 is this same stack (it renders
with myst-nb and sphinx-book-theme) behind its own configuration files, which it translates into a Sphinx
configuration. Two editions in two languages need that configuration directly anyway (the language, and with it the
search language, per edition; the hook that writes every page's other-language link; the mathjax path), and Jupyter
Book 1 is in maintenance (Jupyter Book 2 replaced it) with older pins of the same packages. Plain Sphinx is fewer
packages, newer ones, and one conf.py (ci/site/conf.py) that a reader can follow. Jupyter Book 2 (mystmd) needs Node
and fetches its theme from the network, so it cannot build offline as shipped.

How: ci/site_pages.py stages each edition's pages (README as the home page, the fifteen notebooks, the solutions, the
teacher's guide, references, glossary, CONTRIBUTING, the licences) into a temporary folder with their links pointing at
pages, then the two Sphinx builds run side by side, one per core.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

from site_pages import EDITIONS, ROOT, stage

CONF = ROOT / "ci" / "site"
JIEBA = re.compile(r"(Building prefix dict|Dumping model|Loading model|Prefix dict has been)")  # its chatter
MARKER = ".course-site"  # written into DIR, so that a rebuild only ever deletes a folder that this script made


def _clear(out: pathlib.Path) -> None:
    """Empty `out` for a fresh build, refusing to delete a folder that is not a site built here."""
    if out.exists():
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise SystemExit(f"{out} exists and is not a course site built by this script: choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("built by ci/build_site.py; the next build deletes this folder\n")
    (out / ".nojekyll").write_text("")  # GitHub Pages: serve _static/ and the other folders that begin with _


def build(out: pathlib.Path, strict: bool = False) -> list[str]:
    """Build both editions into `out` (English) and `out`/zh; return Sphinx's warnings (SystemExit if a build fails).

    Each edition is built in a temporary folder (myst-nb writes beside Sphinx's output folder) and moved into `out`
    once both have succeeded, so a failed build leaves the previous site as it was."""
    warnings, failed = [], []
    with tempfile.TemporaryDirectory(prefix="course-site-") as tmp:
        runs = {}
        for edition in EDITIONS:
            work = pathlib.Path(tmp) / edition
            stage(edition, work / "source")
            command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(CONF), "-t", edition,
                       "-d", str(work / "doctrees"), str(work / "source"), str(work / "out" / "html")]
            command += ["-W", "--keep-going"] if strict else []
            runs[edition] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for edition, run in runs.items():
            log = run.communicate()[0]
            warnings += [f"[{edition}] {line}" for line in log.splitlines() if line.strip() and not JIEBA.match(line)]
            if run.returncode:
                failed.append(edition)
        for line in warnings:
            print(line, file=sys.stderr)
        if failed:
            raise SystemExit(f"the Sphinx build of {', '.join(failed)} failed (messages above)")
        _clear(out)
        shutil.copytree(pathlib.Path(tmp) / "en" / "out" / "html", out, dirs_exist_ok=True)
        shutil.copytree(pathlib.Path(tmp) / "zh" / "out" / "html", out / "zh")
    return warnings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "site", help="default: build/site/")
    parser.add_argument("--strict", action="store_true", help="fail on any Sphinx warning")
    args = parser.parse_args(argv)
    start = time.monotonic()
    warnings = build(args.out.resolve(), args.strict)
    print(f"built both editions in {time.monotonic() - start:.0f} s with {len(warnings)} warning line(s): "
          f"open {args.out / 'index.html'} (English) or {args.out / 'zh' / 'index.html'} (中文)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
