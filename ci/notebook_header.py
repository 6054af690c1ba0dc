"""Write the "Open in Colab" badge and the setup cell into every notebook, from one template.

The repository URL is set in one place, `[project.urls] Repository` in pyproject.toml; this script copies
it into each notebook's badge and setup cell. The Chinese edition (notebooks/zh/, written by ci/translate.py)
gets the same badge in Chinese and the same setup code with its comments in Chinese (SETUP_TEMPLATE_ZH; a test
checks that the code without comments is identical). Run it after changing the URL or the templates:

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

SETUP_TEMPLATE_ZH = '''\
# 环境准备。在 Colab 上：克隆课程仓库并安装（保留 Colab 自带的 PyTorch）。在本地克隆或已安装的环境中：
# 只需让 `shared` 可以导入。然后设置随机种子、选择设备，并打印本次运行所用的配置。
import pathlib, subprocess, sys

REPO_URL = "{repo_url}"
IN_COLAB = "google.colab" in sys.modules
COURSE = pathlib.Path("/content/course") if IN_COLAB else pathlib.Path.cwd()
if IN_COLAB and not (COURSE / "shared").exists():  # 只在 Colab 上执行；重复运行也无妨
    subprocess.run(["git", "clone", "--depth", "1", REPO_URL, str(COURSE)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", str(COURSE)], check=True)
for folder in (COURSE, *COURSE.parents):  # 仓库根目录就是包含 shared/ 的那个目录
    if (folder / "shared" / "__init__.py").exists():
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        break
from shared.runtime import choose, fast_mode, setup
device = setup(seed=0)
FAST = fast_mode()'''
BADGE_ALT = {"en": "Open In Colab", "zh": "在 Colab 中打开"}


def _relative(notebook: pathlib.Path) -> pathlib.PurePosixPath:
    """The notebook's path inside the repository (a relative path is taken as one already)."""
    rel = notebook.resolve().relative_to(ROOT) if notebook.is_absolute() else notebook
    return pathlib.PurePosixPath(rel.as_posix())


def language(notebook: pathlib.Path) -> str:
    """'zh' for a notebook of the Chinese edition (under notebooks/zh/), else 'en'."""
    return "zh" if _relative(notebook).parts[:2] == ("notebooks", "zh") else "en"


def setup_source(notebook: pathlib.Path, url: str) -> str:
    """The setup cell's code for this notebook: the one template, its comments in the notebook's language."""
    template = SETUP_TEMPLATE_ZH if language(notebook) == "zh" else SETUP_TEMPLATE
    return template.format(repo_url=url)


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
    rel = _relative(notebook).as_posix()
    link = f"https://colab.research.google.com/github/{owner_repo}/blob/main/{rel}"
    alt = BADGE_ALT[language(notebook)]
    return f"[![{alt}](https://colab.research.google.com/assets/colab-badge.svg)]({link})"


def _cell(cell_type: str, source: str, tags=()) -> dict:
    cell = {"cell_type": cell_type, "metadata": {"tags": list(tags)} if tags else {}, "source": _lines(source)}
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def updated(notebook: pathlib.Path, url: str) -> dict:
    """The notebook with its badge cell and setup cell set from the templates (outputs kept)."""
    return with_header(json.loads(notebook.read_text()), notebook, url)


def with_header(nb: dict, notebook: pathlib.Path, url: str) -> dict:
    """Set the badge cell and the setup cell of notebook dict `nb`, stored at path `notebook` (changed in place)."""
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
    setup_cell["source"] = _lines(setup_source(notebook, url))
    return nb


def _lines(text: str) -> list[str]:
    """Notebook JSON stores a cell's source as a list of lines; keep that form so diffs stay small."""
    return text.splitlines(keepends=True)


def _as_text(nb: dict) -> list[str]:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"][:8]]


def notebooks() -> list[pathlib.Path]:
    """The course notebooks and solutions, English and Chinese (notebooks/zh/); JupyterLab's `.ipynb_checkpoints/`
    copies are not course notebooks."""
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
