"""Write the "Open in Colab" badge and the setup cell into every notebook, from one template.

Two settings in pyproject.toml drive them: `[project.urls] Repository`, the course's public GitHub repository, and
`[tool.course] ref`, the branch or tag that the badges open and that the setup cell clones on Colab (one setting, so
the notebook a badge opens and the code its setup cell installs are always the same version). While there is no
Repository line the course is unpublished: the badge is a note instead of a link, and the setup cell, on Colab,
refuses to clone anything and says which line to write. There is no placeholder URL: one that nobody owns today is
one that anybody could register tomorrow, and every learner who opened a badge would run their code.

The Chinese edition (notebooks/zh/, written by ci/translate.py) gets the same badge in Chinese and the same setup code
with its comments in Chinese (SETUP_TEMPLATE_ZH; a test checks that the code without comments is identical). Run it
after changing either setting or the templates:

    python ci/notebook_header.py          # rewrite the notebooks
    python ci/notebook_header.py --check  # exit 1 if any notebook is out of date (a unit test does this)
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
BADGE_TAG = "colab-badge"

SETUP_TEMPLATE = '''\
# Setup. On Colab: clone the course at this notebook's branch or tag and install it (Colab's own PyTorch is kept).
# In a clone or an install: only make `shared` importable. Then seed, pick the device, and say what this run uses.
import pathlib, subprocess, sys

REPO_URL, REF = {repo_url}, {ref}  # from pyproject.toml; None: the course has no public repository yet
IN_COLAB = "google.colab" in sys.modules
COURSE = pathlib.Path("/content/course") if IN_COLAB else pathlib.Path.cwd()
if IN_COLAB and not (COURSE / "shared").exists():  # skipped everywhere but Colab; harmless to re-run
    if REPO_URL is None:  # never clone a repository the course does not name
        raise RuntimeError("This copy of the course names no repository to clone. To publish it, set Repository "
                           "under [project.urls] in pyproject.toml and run python ci/notebook_header.py. Or "
                           "upload a copy of the course to /content/course (README: CPU, GPU and Colab).")
    subprocess.run(["git", "clone", "--depth", "1", "--branch", REF, REPO_URL, str(COURSE)], check=True)
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
# 环境准备。在 Colab 上：克隆本笔记本所在分支或标签的课程仓库并安装（保留 Colab 自带的 PyTorch）。在本地克隆或已安装的
# 环境中：只需让 `shared` 可以导入。然后设置随机种子、选择设备，并打印本次运行所用的配置。
import pathlib, subprocess, sys

REPO_URL, REF = {repo_url}, {ref}  # 来自 pyproject.toml；None 表示课程还没有公开仓库
IN_COLAB = "google.colab" in sys.modules
COURSE = pathlib.Path("/content/course") if IN_COLAB else pathlib.Path.cwd()
if IN_COLAB and not (COURSE / "shared").exists():  # 只在 Colab 上执行；重复运行也无妨
    if REPO_URL is None:  # 绝不克隆课程没有指明的仓库
        raise RuntimeError("This copy of the course names no repository to clone. To publish it, set Repository "
                           "under [project.urls] in pyproject.toml and run python ci/notebook_header.py. Or "
                           "upload a copy of the course to /content/course (README: CPU, GPU and Colab).")
    subprocess.run(["git", "clone", "--depth", "1", "--branch", REF, REPO_URL, str(COURSE)], check=True)
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
NO_BADGE = {  # the badge cell while the course names no repository: nothing to open, so no link
    "en": "**Open in Colab:** not available in this copy of the course, which names no public repository yet "
          "(README: CPU, GPU and Colab).",
    "zh": "**在 Colab 中打开：** 暂不可用，因为这份课程副本还没有指明公开仓库"
          "（见 README.zh.md 的“CPU、GPU 与 Colab”一节）。",
}
GITHUB_URL = re.compile(r"https://github\.com/[A-Za-z0-9-]+/[A-Za-z0-9._-]+")
EXAMPLE_URL = "https://github.com/OWNER/NAME"  # pyproject.toml's comment shows this form
GIT_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")  # a branch or tag name (git clone --branch takes either)


def _relative(notebook: pathlib.Path) -> pathlib.PurePosixPath:
    """The notebook's path inside the repository (a relative path is taken as one already)."""
    rel = notebook.resolve().relative_to(ROOT) if notebook.is_absolute() else notebook
    return pathlib.PurePosixPath(rel.as_posix())


def language(notebook: pathlib.Path) -> str:
    """'zh' for a notebook of the Chinese edition (under notebooks/zh/), else 'en'."""
    return "zh" if _relative(notebook).parts[:2] == ("notebooks", "zh") else "en"


def setup_source(notebook: pathlib.Path, url: str | None, ref: str | None = None) -> str:
    """The setup cell's code for this notebook: the one template, its comments in the notebook's language. `url` None:
    the course is unpublished, and the cell refuses to clone on Colab. `ref` defaults to pyproject.toml's."""
    template = SETUP_TEMPLATE_ZH if language(notebook) == "zh" else SETUP_TEMPLATE
    return template.format(repo_url=_literal(url), ref=_literal(course_ref() if ref is None else ref))


def _literal(value: str | None) -> str:
    return "None" if value is None else json.dumps(value)  # a JSON string is a Python string literal


def settings(pyproject: pathlib.Path = ROOT / "pyproject.toml") -> tuple[str | None, str]:
    """(repository URL, ref) from pyproject.toml: `[project.urls] Repository`, None while there is no such line (the
    course is unpublished), and `[tool.course] ref`, the branch or tag that the badges open and the setup cell clones.
    Anything else is refused here, when the cells are generated, rather than on a learner's Colab."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    url = data.get("project", {}).get("urls", {}).get("Repository")
    ref = data.get("tool", {}).get("course", {}).get("ref")
    if url is not None:
        url = url.rstrip("/").removesuffix(".git")
        if url == EXAMPLE_URL:  # the comment's example, uncommented: nobody's course
            raise SystemExit(f"{pyproject.name}: [project.urls] Repository is still the example {url!r}: write the "
                             "course's own repository, with its owner and name in place of OWNER and NAME")
        if not GITHUB_URL.fullmatch(url):
            raise SystemExit(f"{pyproject.name}: [project.urls] Repository must be https://github.com/OWNER/NAME, the "
                             f"course's repository on GitHub (Colab opens notebooks from GitHub), not {url!r}")
    if not (isinstance(ref, str) and GIT_REF.fullmatch(ref) and ".." not in ref):
        raise SystemExit(f"{pyproject.name}: [tool.course] ref must name the branch or tag that the badges open and "
                         f'the setup cell clones, e.g. ref = "main" (found {ref!r})')
    return url, ref


def repo_url() -> str | None:
    """The repository URL from pyproject.toml ([project.urls] Repository); None while the course is unpublished."""
    return settings()[0]


def course_ref() -> str:
    """The branch or tag from pyproject.toml ([tool.course] ref): the badges open it, the setup cell clones it."""
    return settings()[1]


def badge_source(notebook: pathlib.Path, url: str | None, ref: str | None = None) -> str:
    """Markdown for the badge that opens this notebook in Colab straight from the repository, at `ref` (default:
    pyproject.toml's); while there is no repository (`url` None), a note that says so instead of a link."""
    if url is None:
        return NO_BADGE[language(notebook)]
    owner_repo = url.removeprefix("https://github.com/")
    rel = _relative(notebook).as_posix()
    link = f"https://colab.research.google.com/github/{owner_repo}/blob/{course_ref() if ref is None else ref}/{rel}"
    alt = BADGE_ALT[language(notebook)]
    return f"[![{alt}](https://colab.research.google.com/assets/colab-badge.svg)]({link})"


def _cell(cell_type: str, source: str, tags=()) -> dict:
    cell = {"cell_type": cell_type, "metadata": {"tags": list(tags)} if tags else {}, "source": _lines(source)}
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def updated(notebook: pathlib.Path, url: str | None, ref: str | None = None) -> dict:
    """The notebook with its badge cell and setup cell set from the templates (outputs kept)."""
    return with_header(json.loads(notebook.read_text()), notebook, url, ref)


def with_header(nb: dict, notebook: pathlib.Path, url: str | None, ref: str | None = None) -> dict:
    """Set the badge cell and the setup cell of notebook dict `nb`, stored at path `notebook` (changed in place);
    `ref` defaults to pyproject.toml's, so that the badge and the clone name the same branch or tag."""
    ref = course_ref() if ref is None else ref
    cells = nb["cells"]
    badge = badge_source(notebook, url, ref)
    if cells and BADGE_TAG in cells[0].get("metadata", {}).get("tags", []):
        cells[0]["source"] = _lines(badge)
    else:
        cells.insert(0, _cell("markdown", badge, tags=[BADGE_TAG]))
        cells[0]["id"] = "colab-badge"
    setup_cell = next((c for c in cells if c["cell_type"] == "code"), None)
    if setup_cell is None:
        raise SystemExit(f"{notebook} has no code cell to use as its setup cell")
    setup_cell["source"] = _lines(setup_source(notebook, url, ref))
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
    (url, ref), stale = settings(), []
    for path in notebooks():
        nb = updated(path, url, ref)
        if _as_text(nb) != _as_text(json.loads(path.read_text())):
            stale.append(path.relative_to(ROOT).as_posix())
            if not args.check:
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    verb = "out of date" if args.check else "updated"
    print(f"{len(stale)} notebook(s) {verb}" + (": " + ", ".join(stale) if stale else ""))
    if url is None:
        print("The course is unpublished (pyproject.toml has no [project.urls] Repository line): the badges are notes "
              "and, on Colab, the setup cell refuses to clone. See README.md, 'CPU, GPU and Colab'.")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
