"""Write the "Open in Colab" badge and the setup cell into every notebook, from one template.

The repository URL is set in one place, `[project.urls] Repository` in pyproject.toml; this script copies
it into each notebook's badge and setup cell. Run it after changing the URL or the template:

    python ci/notebook_header.py          # rewrite the notebooks
    python ci/notebook_header.py --check  # exit 1 if any notebook is out of date (a unit test does this)
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BADGE_TAG = "colab-badge"

SETUP_TEMPLATE = '''\
# Setup. On Colab: clone the course and install it (Colab's own PyTorch is kept). In a clone or an
# install: only make `shared` importable. Then seed, pick the device, and say what this run uses.
import pathlib, subprocess, sys

REPO_URL = "{repo_url}"
IN_COLAB = "google.colab" in sys.modules
COURSE = pathlib.Path("/content/course") if IN_COLAB else pathlib.Path.cwd()
if IN_COLAB and not (COURSE / "shared").exists():  # skipped everywhere but Colab; harmless to re-run
    subprocess.run(["git", "clone", "--depth", "1", REPO_URL, str(COURSE)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", str(COURSE)], check=True)
for folder in (COURSE, *COURSE.parents):  # the repository root is the folder that holds shared/
    if (folder / "shared" / "__init__.py").exists():
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        break
from shared.runtime import choose, fast_mode, setup
device = setup(seed=0)
FAST = fast_mode()'''


def repo_url() -> str:
    """The repository URL from pyproject.toml ([project.urls] Repository)."""
    text = (ROOT / "pyproject.toml").read_text()
    match = re.search(r'^Repository\s*=\s*"([^"]+)"', text, flags=re.MULTILINE)
    if not match:
        raise SystemExit("pyproject.toml has no [project.urls] Repository = \"...\" line")
    return match.group(1).rstrip("/")


def badge_source(notebook: pathlib.Path, url: str) -> str:
    """Markdown for the badge that opens this notebook in Colab straight from the repository."""
    owner_repo = url.removeprefix("https://github.com/")
    rel = notebook.resolve().relative_to(ROOT).as_posix()
    link = f"https://colab.research.google.com/github/{owner_repo}/blob/main/{rel}"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({link})"


def _cell(cell_type: str, source: str, tags=()) -> dict:
    cell = {"cell_type": cell_type, "metadata": {"tags": list(tags)} if tags else {}, "source": _lines(source)}
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def updated(notebook: pathlib.Path, url: str) -> dict:
    """The notebook with its badge cell and setup cell set from the templates (outputs kept)."""
    nb = json.loads(notebook.read_text())
    cells = nb["cells"]
    badge = badge_source(notebook, url)
    if cells and BADGE_TAG in cells[0].get("metadata", {}).get("tags", []):
        cells[0]["source"] = _lines(badge)
    else:
        cells.insert(0, _cell("markdown", badge, tags=[BADGE_TAG]))
        cells[0]["id"] = "colab-badge"
    setup_cell = next((c for c in cells if c["cell_type"] == "code"), None)
    if setup_cell is None:
        raise SystemExit(f"{notebook} has no code cell to use as its setup cell")
    setup_cell["source"] = _lines(SETUP_TEMPLATE.format(repo_url=url))
    return nb


def _lines(text: str) -> list[str]:
    """Notebook JSON stores a cell's source as a list of lines; keep that form so diffs stay small."""
    return text.splitlines(keepends=True)


def _as_text(nb: dict) -> list[str]:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"][:8]]


def notebooks() -> list[pathlib.Path]:
    """The course notebooks and solutions; JupyterLab's `.ipynb_checkpoints/` copies are not course notebooks."""
    found = (ROOT / "notebooks").rglob("[0-9][0-9]_*.ipynb")
    return sorted(p for p in found if ".ipynb_checkpoints" not in p.parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report notebooks that are out of date")
    args = parser.parse_args()
    url, stale = repo_url(), []
    for path in notebooks():
        nb = updated(path, url)
        if _as_text(nb) != _as_text(json.loads(path.read_text())):
            stale.append(path.relative_to(ROOT).as_posix())
            if not args.check:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    verb = "out of date" if args.check else "updated"
    print(f"{len(stale)} notebook(s) {verb}" + (": " + ", ".join(stale) if stale else ""))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
