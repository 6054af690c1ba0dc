import copy
import importlib.util
import json
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("clean_notebook", ROOT / "ci" / "clean_notebook.py")
clean = importlib.util.module_from_spec(spec)
spec.loader.exec_module(clean)

TIMES = {
    "iopub.execute_input": "2026-11-30T10:07:13.831424Z",
    "iopub.status.busy": "2026-11-30T10:07:13.831239Z",
    "iopub.status.idle": "2026-11-30T10:07:15.206158Z",
    "shell.execute_reply": "2026-11-30T10:07:15.205266Z",
}


def executed_notebook() -> dict:
    """A small notebook as `nbconvert --execute` writes it: timestamps beside tags, outputs, a non-ASCII char."""
    output = {"name": "stdout", "output_type": "stream", "text": ["weights ␣ 0.683\n"]}
    return {
        "cells": [
            {"cell_type": "markdown", "id": "a", "metadata": {"tags": ["colab-badge"]}, "source": ["# Títle"]},
            {"cell_type": "code", "execution_count": 1, "id": "b", "metadata": {"execution": dict(TIMES)},
             "outputs": [output], "source": ["print(1)"]},
            {"cell_type": "code", "execution_count": 2, "id": "c",
             "metadata": {"ExecuteTime": {"end_time": "2026-11-30T10:00:00Z"}, "tags": ["keep"], "scrolled": True},
             "outputs": [], "source": ["x = 2"]},
        ],
        "metadata": {"kernelspec": {"name": "python3"}, "widgets": {"state": {}}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_timestamps_are_removed_and_everything_else_is_kept():
    nb = executed_notebook()
    before = copy.deepcopy(nb)
    assert clean.volatile_keys(nb) == ["cell 1: execution", "cell 2: ExecuteTime"]
    out = clean.cleaned(nb)
    assert clean.volatile_keys(out) == []
    assert out["cells"][1]["metadata"] == {}
    assert out["cells"][2]["metadata"] == {"tags": ["keep"], "scrolled": True}
    assert out["cells"][0] == before["cells"][0]
    assert [c.get("outputs") for c in out["cells"]] == [c.get("outputs") for c in before["cells"]]
    assert out["metadata"] == before["metadata"]


def test_loose_iopub_keys_are_removed_too():
    nb = executed_notebook()
    nb["cells"][2]["metadata"].update(TIMES)
    clean.cleaned(nb)
    assert not any(k.startswith(("iopub.", "shell.")) for c in nb["cells"] for k in c["metadata"])


def test_file_round_trip_writes_the_repository_style_and_is_idempotent(tmp_path):
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps(executed_notebook(), indent=2), encoding="utf-8")
    assert clean.clean_file(path) is True
    text = path.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=1, ensure_ascii=False) + "\n"
    assert "␣" in text and "Títle" in text  # not escaped to \u2423
    assert "iopub" not in text and "ExecuteTime" not in text
    assert clean.clean_file(path) is False  # a second pass changes nothing
    assert path.read_text(encoding="utf-8") == text


def test_command_line_cleans_and_check_reports(tmp_path):
    path = tmp_path / "02_x.ipynb"
    path.write_text(json.dumps(executed_notebook()), encoding="utf-8")
    script = [str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else "python",
              str(ROOT / "ci" / "clean_notebook.py")]
    check = subprocess.run([*script, "--check", str(path)], capture_output=True, text=True)
    assert check.returncode == 1 and "volatile" in check.stdout
    subprocess.run([*script, str(path)], check=True, capture_output=True)
    assert subprocess.run([*script, "--check", str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("bad", [[], {"cells": None}, "notebook"])
def test_bad_input_is_rejected(bad):
    with pytest.raises(ValueError, match="nb"):
        clean.cleaned(bad)


def figure_png(transparent: bool = False) -> str:
    """A small matplotlib figure as the base64 PNG a notebook stores (RGBA, like the inline backend writes)."""
    import base64
    import io

    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2), dpi=80)
    ax.imshow([[i * j for j in range(16)] for i in range(16)], cmap="viridis")
    ax.plot(range(16), color="tab:red")
    ax.set_title("a heatmap and a line")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", transparent=transparent)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii") + "\n"


def test_figures_are_compacted_once_and_keep_their_size_and_look():
    import base64
    import io

    from PIL import Image, ImageChops

    original = figure_png()
    nb = executed_notebook()
    nb["cells"][1]["outputs"].append({"output_type": "display_data", "metadata": {},
                                      "data": {"image/png": original, "text/plain": ["<Figure>"]}})
    assert clean.uncompacted_images(nb) == ["cell 1"]
    assert clean.compact_images(nb) == 1
    new = nb["cells"][1]["outputs"][1]["data"]["image/png"]
    assert len(new) < 0.9 * len(original)
    before, after = (Image.open(io.BytesIO(base64.b64decode(x))) for x in (original, new))
    assert after.mode == "P" and after.size == before.size
    diff = ImageChops.difference(before.convert("RGB"), after.convert("RGB"))
    assert max(high for _, high in diff.getextrema()) <= 48  # nearest palette colour, no dithering noise
    assert clean.uncompacted_images(nb) == [] and clean.compact_images(nb) == 0  # idempotent


def test_transparent_figures_and_broken_images():
    transparent = figure_png(transparent=True)
    assert clean.compact_png(transparent) is transparent  # a palette would lose the alpha channel
    nb = executed_notebook()
    nb["cells"][1]["outputs"].append({"output_type": "display_data", "metadata": {},
                                      "data": {"image/png": "bm90IGEgcG5n\n"}})  # "not a png"
    with pytest.raises(ValueError, match="cell b"):
        clean.compact_images(nb)


def test_no_tracked_notebook_stores_execution_timestamps():
    listed = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    paths = [ROOT / name for name in listed if ".ipynb_checkpoints" not in pathlib.Path(name).parts]
    assert len(paths) >= 6
    dirty = {p.relative_to(ROOT).as_posix(): clean.volatile_keys(json.loads(p.read_text(encoding="utf-8")))
             for p in paths if p.is_file()}
    dirty = {name: keys[:1] for name, keys in dirty.items() if keys}
    assert not dirty, f"run: python ci/clean_notebook.py {' '.join(dirty)}"


def test_no_tracked_notebook_stores_an_uncompacted_figure():
    listed = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    paths = [ROOT / name for name in listed if ".ipynb_checkpoints" not in pathlib.Path(name).parts]
    loose = [p.relative_to(ROOT).as_posix() for p in paths
             if p.is_file() and clean.uncompacted_images(json.loads(p.read_text(encoding="utf-8")))]
    assert not loose, f"run: python ci/clean_notebook.py {' '.join(loose)}"


def test_prompt_numbers_follow_the_code_cells_and_unexecuted_cells_stay_blank():
    def code(count):
        return {"cell_type": "code", "metadata": {}, "source": "x", "outputs": [], "execution_count": count}

    nb = {"cells": [code(None), {"cell_type": "markdown", "metadata": {}, "source": "m"}, code(1), code(3), code(2),
                    code(None), code(9)], "metadata": {}}
    assert clean.misnumbered(nb) == ["cell 2: [1], expected [2]", "cell 4: [2], expected [4]",
                                     "cell 6: [9], expected [6]"]
    assert clean.renumber(nb) == 3
    assert [c.get("execution_count") for c in nb["cells"]] == [None, None, 2, 3, 4, None, 6]
    assert clean.misnumbered(nb) == [] and clean.renumber(nb) == 0


def test_no_tracked_notebook_has_prompt_numbers_out_of_order():
    listed = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    paths = [ROOT / name for name in listed if ".ipynb_checkpoints" not in pathlib.Path(name).parts]
    wrong = [p.relative_to(ROOT).as_posix() for p in paths
             if p.is_file() and clean.misnumbered(json.loads(p.read_text(encoding="utf-8")))]
    assert not wrong, f"run: python ci/clean_notebook.py {' '.join(wrong)}"


def test_nbval_comment_markers_move_into_cell_tags_and_the_code_is_kept():
    nb = executed_notebook()
    nb["cells"][1]["source"] = ["# NBVAL_CHECK_OUTPUT\n", "print(1)  # NBVAL_ in a comment that is not a marker\n"]
    nb["cells"][2]["source"] = ["x = 2\n", "  #NBVAL_SKIP\n", "y = 3"]
    assert clean.marker_comments(nb) == ["cell 1: # NBVAL_CHECK_OUTPUT", "cell 2: # NBVAL_SKIP"]
    assert clean.tag_markers(nb) == 2
    assert nb["cells"][1]["metadata"]["tags"] == ["nbval-check-output"]
    assert nb["cells"][1]["source"] == ["print(1)  # NBVAL_ in a comment that is not a marker\n"]
    assert nb["cells"][2]["metadata"]["tags"] == ["keep", "nbval-skip"] and "".join(nb["cells"][2]["source"]) == (
        "x = 2\ny = 3")
    assert clean.marker_comments(nb) == [] and clean.tag_markers(nb) == 0  # idempotent


def test_no_tracked_notebook_shows_nbval_markers_to_the_learner():
    listed = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    paths = [ROOT / name for name in listed if ".ipynb_checkpoints" not in pathlib.Path(name).parts]
    shown = [p.relative_to(ROOT).as_posix() for p in paths
             if p.is_file() and clean.marker_comments(json.loads(p.read_text(encoding="utf-8")))]
    assert not shown, f"run: python ci/clean_notebook.py {' '.join(shown)}"
    checked = sum("nbval-check-output" in c.get("metadata", {}).get("tags", [])
                  for p in paths if p.is_file() for c in json.loads(p.read_text(encoding="utf-8"))["cells"])
    assert checked >= 60  # the course's compared cells are still compared, now by tag
