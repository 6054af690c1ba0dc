import importlib.util
import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("notebook_header", ROOT / "ci" / "notebook_header.py")
header = importlib.util.module_from_spec(spec)
spec.loader.exec_module(header)


def test_every_notebook_has_the_badge_and_setup_cell_from_the_one_template():
    url = header.repo_url()
    paths = header.notebooks()
    assert len(paths) >= 6
    for path in paths:
        nb = json.loads(path.read_text())
        sources = ["".join(c["source"]) for c in nb["cells"]]
        assert sources[0] == header.badge_source(path, url), f"{path.name}: run python ci/notebook_header.py"
        assert path.relative_to(ROOT).as_posix() in sources[0]
        first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert "".join(first_code["source"]) == header.setup_source(path, url), path.name
        assert url in "".join(first_code["source"])


def test_the_chinese_edition_gets_its_own_badge_and_setup_comments():
    url = header.repo_url()
    english, chinese = pathlib.Path("notebooks/01_x.ipynb"), pathlib.Path("notebooks/zh/01_x.ipynb")
    assert (header.language(english), header.language(chinese)) == ("en", "zh")
    assert header.language(ROOT / chinese) == "zh"
    assert "Open In Colab" in header.badge_source(english, url)
    assert "在 Colab 中打开" in header.badge_source(chinese, url) and "blob/main/notebooks/zh/01_x.ipynb" in \
        header.badge_source(chinese, url)
    assert header.setup_source(english, url) == header.SETUP_TEMPLATE.format(repo_url=url)
    assert header.setup_source(chinese, url) == header.SETUP_TEMPLATE_ZH.format(repo_url=url)
    english_code = [line.split("  #")[0] for line in header.SETUP_TEMPLATE.splitlines() if not line.startswith("#")]
    chinese_code = [line.split("  #")[0] for line in header.SETUP_TEMPLATE_ZH.splitlines() if not line.startswith("#")]
    assert chinese_code == english_code  # only the comments are translated (test_translation.py checks tokens too)


def test_the_url_is_written_once_outside_the_notebooks():
    url = header.repo_url()
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
