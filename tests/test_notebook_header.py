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
        assert "".join(first_code["source"]) == header.SETUP_TEMPLATE.format(repo_url=url), path.name
        assert url in "".join(first_code["source"])


def test_the_url_is_written_once_outside_the_notebooks():
    url = header.repo_url()
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    tracked = [ROOT / name for name in listed.split() if not name.endswith(".ipynb")]
    holders = [p.relative_to(ROOT).as_posix() for p in tracked if p.is_file() and url in p.read_text(errors="ignore")]
    assert holders == ["pyproject.toml"]
