import ast
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("notebook_header", ROOT / "ci" / "notebook_header.py")
header = importlib.util.module_from_spec(spec)
spec.loader.exec_module(header)

ENGLISH, CHINESE = pathlib.Path("notebooks/01_x.ipynb"), pathlib.Path("notebooks/zh/01_x.ipynb")


def test_every_notebook_has_the_badge_and_setup_cell_from_the_one_template():
    url, ref = header.settings()
    paths = header.notebooks()
    assert len(paths) >= 6
    for path in paths:
        nb = json.loads(path.read_text())
        sources = ["".join(c["source"]) for c in nb["cells"]]
        assert sources[0] == header.badge_source(path, url, ref), f"{path.name}: run python ci/notebook_header.py"
        first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert "".join(first_code["source"]) == header.setup_source(path, url, ref), path.name
        if url is not None:
            assert path.relative_to(ROOT).as_posix() in sources[0]
            assert url in "".join(first_code["source"])


def test_the_chinese_edition_gets_its_own_badge_and_setup_comments():
    url, ref = "https://github.com/someone/course", "main"
    assert (header.language(ENGLISH), header.language(CHINESE)) == ("en", "zh")
    assert header.language(ROOT / CHINESE) == "zh"
    assert "Open In Colab" in header.badge_source(ENGLISH, url, ref)
    assert "在 Colab 中打开" in header.badge_source(CHINESE, url, ref) and "blob/main/notebooks/zh/01_x.ipynb" in \
        header.badge_source(CHINESE, url, ref)
    assert header.setup_source(ENGLISH, url, ref) == header.SETUP_TEMPLATE.format(repo_url=f'"{url}"', ref='"main"')
    assert header.setup_source(CHINESE, url, ref) == header.SETUP_TEMPLATE_ZH.format(repo_url=f'"{url}"', ref='"main"')
    english_code = [line.split("  #")[0] for line in header.SETUP_TEMPLATE.splitlines() if not line.startswith("#")]
    chinese_code = [line.split("  #")[0] for line in header.SETUP_TEMPLATE_ZH.splitlines() if not line.startswith("#")]
    assert chinese_code == english_code  # only the comments are translated (test_translation.py checks tokens too)


def test_the_url_is_written_once_outside_the_notebooks():
    url = header.repo_url()
    if url is None:  # unpublished: no cell names any repository
        cells = [header.setup_source(p, None) for p in header.notebooks()]
        assert all("REPO_URL, REF = None," in cell for cell in cells)
        assert all("http" not in header.badge_source(p, None) for p in header.notebooks())
        return
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    tracked = [ROOT / name for name in listed.split() if not name.endswith(".ipynb")]
    holders = [p.relative_to(ROOT).as_posix() for p in tracked if p.is_file() and url in p.read_text(errors="ignore")]
    assert holders == ["pyproject.toml"]


def test_jupyterlab_checkpoint_copies_are_not_course_notebooks():
    """JupyterLab writes notebooks/.ipynb_checkpoints/NN_…-checkpoint.ipynb the moment a notebook is opened."""
    folder = ROOT / "notebooks" / ".ipynb_checkpoints"
    created = not folder.exists()
    folder.mkdir(exist_ok=True)
    copy = folder / "01_scaled_dot_product_attention-checkpoint.ipynb"
    try:
        copy.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        assert copy not in header.notebooks()
        assert all(".ipynb_checkpoints" not in p.parts for p in header.notebooks())
        test_every_notebook_has_the_badge_and_setup_cell_from_the_one_template()
    finally:
        copy.unlink(missing_ok=True)
        if created:
            folder.rmdir()


# ------------------------------------------------------------------- the settings: published or not, and the ref


def settings_of(tmp_path, text):
    (tmp_path / "pyproject.toml").write_text(text)
    return header.settings(tmp_path / "pyproject.toml")


def test_without_a_repository_line_the_course_is_unpublished(tmp_path):
    assert settings_of(tmp_path, '[project.urls]\n# Repository = "https://github.com/OWNER/NAME"\n'
                                 '[tool.course]\nref = "main"\n') == (None, "main")
    assert settings_of(tmp_path, '[project.urls]\nRepository = "https://github.com/alice/course/"\n'
                                 '[tool.course]\nref = "v1.2"\n') == ("https://github.com/alice/course", "v1.2")


@pytest.mark.parametrize("url", ["http://github.com/alice/course", "https://gitlab.com/alice/course",
                                 "https://github.com/alice", "ext::sh -c touch% /tmp/pwned", "-uevil",
                                 "https://github.com/OWNER/NAME", "https://github.com/alice/course/tree/main"])
def test_a_repository_that_is_not_a_github_repository_is_refused_when_generating(tmp_path, url):
    with pytest.raises(SystemExit, match=r"\[project.urls\] Repository"):
        settings_of(tmp_path, f'[project.urls]\nRepository = "{url}"\n[tool.course]\nref = "main"\n')


@pytest.mark.parametrize("table", ["", '[tool.course]\nref = ""\n', '[tool.course]\nref = "-u"\n',
                                   '[tool.course]\nref = "a..b"\n', "[tool.course]\nref = 'x\"; import os'\n"])
def test_a_missing_or_odd_ref_is_refused_when_generating(tmp_path, table):
    with pytest.raises(SystemExit, match=r"\[tool.course\] ref"):
        settings_of(tmp_path, "[project.urls]\n" + table)


@pytest.mark.parametrize("ref", ["main", "v1.2", "release/2025"])
@pytest.mark.parametrize("notebook", [ENGLISH, CHINESE])
def test_the_badge_opens_the_ref_that_the_setup_cell_clones(notebook, ref):
    url = "https://github.com/alice/course"
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": [], "outputs": [], "execution_count": None}]}
    header.with_header(nb, notebook, url, ref)
    badge, cell = ("".join(c["source"]) for c in nb["cells"][:2])
    repo_url, cloned_ref = assigned(cell)
    assert (repo_url, cloned_ref) == (url, ref)
    assert f"colab.research.google.com/github/alice/course/blob/{cloned_ref}/{notebook.as_posix()})" in badge
    assert '"--branch", REF, REPO_URL' in cell


def test_by_default_badge_and_clone_both_take_the_ref_from_pyproject():
    ref = header.course_ref()
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": [], "outputs": [], "execution_count": None}]}
    header.with_header(nb, ENGLISH, "https://github.com/alice/course")
    badge, cell = ("".join(c["source"]) for c in nb["cells"][:2])
    assert assigned(cell)[1] == ref and f"/blob/{ref}/" in badge


def test_an_unpublished_badge_is_a_note_without_a_link():
    for notebook in (ENGLISH, CHINESE):
        badge = header.badge_source(notebook, None)
        assert "http" not in badge and "](" not in badge and badge == header.NO_BADGE[header.language(notebook)]


def assigned(cell: str) -> tuple:
    """The values of the setup cell's `REPO_URL, REF = ...` line."""
    line = next(line for line in cell.splitlines() if line.startswith("REPO_URL, REF = "))
    return ast.literal_eval(line.removeprefix("REPO_URL, REF = ").split("  #")[0])


# ------------------------------------------------- the setup cell itself, run in a subprocess that believes it is Colab

# Runs the cell as a notebook would. Every subprocess.run the cell makes is recorded; git runs for real (against a local
# repository), pip is stubbed (offline, and nothing is installed into this environment). `-S`: no site-packages, so
# the only `shared` the cell can import is the one it finds itself.
HARNESS = r"""
import json, subprocess, sys
cell, record, colab = sys.argv[1], sys.argv[2], sys.argv[3:]
calls, real_run = [], subprocess.run
def run(args, **kwargs):
    calls.append([str(a) for a in args])
    return subprocess.CompletedProcess(args, 0) if args[1:3] == ["-m", "pip"] else real_run(args, **kwargs)
subprocess.run = run
if colab:
    sys.path.insert(0, colab[0])
    import google.colab  # the fake one: the cell's "google.colab" in sys.modules is now true
try:
    exec(compile(open(cell, encoding="utf-8").read(), "setup-cell", "exec"), {"__name__": "__main__"})
finally:
    json.dump(calls, open(record, "w"))
"""

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
RUNTIME = ('VERSION = "{}"\ndef choose(cpu, gpu): return cpu\ndef fast_mode(): return False\n'
           'def setup(seed): print("shared.runtime of", VERSION); return "cpu"\n')


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """A bare repository of a tiny course: main (its HEAD), a branch `release` and a tag `v1`, each with its own
    shared/runtime.py, so a clone of the wrong ref shows. Also returns a checkout of main (a learner's clone)."""
    base = tmp_path_factory.mktemp("origin")
    work = base / "work"
    (work / "shared").mkdir(parents=True)
    (work / "shared" / "__init__.py").write_text("")
    git("init", "-q", "-b", "main", cwd=work)
    for name, branch in (("main", None), ("release", "release"), ("v1", None)):
        if name == "v1":
            git("checkout", "-q", "--detach", "main", cwd=work)
        elif branch:
            git("checkout", "-q", "-b", branch, cwd=work)
        (work / "shared" / "runtime.py").write_text(RUNTIME.format(name))
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", name, cwd=work)
        if name == "v1":
            git("tag", "v1", cwd=work)
    git("checkout", "-q", "main", cwd=work)
    git("clone", "-q", "--bare", str(work), str(base / "origin.git"), cwd=base)
    return (base / "origin.git").as_uri(), work


def run_cell(tmp_path, notebook, url, ref, colab=True, cwd=None):
    """Run the setup cell generated for (url, ref) with /content/course moved under tmp_path; returns the finished
    process, the commands the cell ran, and the course folder."""
    course = tmp_path / "content" / "course"
    source = header.setup_source(notebook, url, ref)
    assert source.count('pathlib.Path("/content/course")') == 1
    cell = tmp_path / "cell.py"
    cell.write_text(source.replace('pathlib.Path("/content/course")', f"pathlib.Path({json.dumps(str(course))})"),
                    encoding="utf-8")
    fake = tmp_path / "fake"
    (fake / "google" / "colab").mkdir(parents=True, exist_ok=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text("")
    record = tmp_path / "calls.json"
    argv = [sys.executable, "-S", "-c", HARNESS, str(cell), str(record)] + ([str(fake)] if colab else [])
    done = subprocess.run(argv, cwd=cwd or tmp_path, env=GIT_ENV, capture_output=True, text=True, timeout=60)
    return done, json.loads(record.read_text()), course


@pytest.mark.parametrize("notebook", [ENGLISH, CHINESE])
def test_on_colab_an_unpublished_cell_refuses_and_runs_no_git(tmp_path, notebook):
    done, calls, course = run_cell(tmp_path, notebook, None, "main")
    assert done.returncode != 0 and calls == [] and not course.exists()
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("RuntimeError: ")
    for needed in ("Repository", "[project.urls]", "pyproject.toml", "python ci/notebook_header.py"):
        assert needed in error, error


@pytest.mark.parametrize("ref", ["release", "v1"])  # a branch and a tag, neither of them the origin's HEAD
def test_on_colab_a_published_cell_clones_exactly_its_ref_and_installs_it(tmp_path, origin, ref):
    url, _ = origin
    done, calls, course = run_cell(tmp_path, ENGLISH, url, ref)
    assert done.returncode == 0, done.stderr
    assert f'VERSION = "{ref}"' in (course / "shared" / "runtime.py").read_text()  # not main's, the origin's HEAD
    assert git("rev-parse", "HEAD", cwd=course) == git("rev-parse", f"{ref}^{{commit}}", cwd=course)
    assert done.stdout == f"shared.runtime of {ref}\n"  # the cell imported the code it cloned, and nothing else
    assert calls[0] == ["git", "clone", "--depth", "1", "--branch", ref, url, str(course)]
    assert calls[1] == [sys.executable, "-m", "pip", "install", "-q", "-e", str(course)] and len(calls) == 2
    again, calls, _ = run_cell(tmp_path, ENGLISH, url, ref)  # harmless to re-run: no second clone
    assert again.returncode == 0 and calls == [] and again.stdout == f"shared.runtime of {ref}\n"


@pytest.mark.parametrize("published", [False, True])
@pytest.mark.parametrize("notebook", [ENGLISH, CHINESE])
def test_outside_colab_the_cell_only_makes_shared_importable(tmp_path, origin, notebook, published):
    url, clone = origin
    done, calls, course = run_cell(tmp_path, notebook, url if published else None, "release", colab=False,
                                   cwd=clone / "shared")
    assert done.returncode == 0, done.stderr
    assert calls == [] and not course.exists()
    assert done.stdout == "shared.runtime of main\n"  # the clone it runs in, whatever ref the cells name
