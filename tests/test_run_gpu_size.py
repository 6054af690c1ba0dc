"""ci/run_gpu_size.py: it refuses without a CUDA device, and reads key results and peak memory from executed cells."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "ci"))
import run_gpu_size  # noqa: E402


def test_it_refuses_without_a_cuda_device_and_writes_nothing(tmp_path):
    out = tmp_path / "gpu_size.jsonl"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no CUDA device, on any machine
    done = subprocess.run([sys.executable, str(ROOT / "ci" / "run_gpu_size.py"), "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "needs a CUDA device and PyTorch finds none here" in done.stderr and "no notebook was run" in done.stderr
    assert done.stdout == "" and not out.exists()


def test_the_notebooks_it_runs():
    every = run_gpu_size.course_notebooks([])
    assert [p.name[:2] for p in every] == sorted({p.name[:2] for p in every}) and "12" in [p.name[:2] for p in every]
    assert all(p.parent.name == "notebooks" for p in every)  # chapters only: no solutions, no Chinese edition
    picked = run_gpu_size.course_notebooks(["08", "10_modern_gpt.ipynb"])
    assert [p.name for p in picked] == ["08_char_gpt.ipynb", "10_modern_gpt.ipynb"]
    with pytest.raises(SystemExit, match="no notebook 42 in notebooks/"):
        run_gpu_size.course_notebooks(["42"])


def test_key_results_are_the_check_cells_text_and_the_peak_is_read_back():
    def cell(text, tags=(), kind="stream"):
        output = ({"output_type": "stream", "name": "stdout", "text": [text]} if kind == "stream" else
                  {"output_type": "execute_result", "data": {"text/plain": text}, "metadata": {}})
        return {"cell_type": "code", "metadata": {"tags": list(tags)}, "outputs": [output], "source": ""}

    nb = {"cells": [cell("loss 1.23\n"), cell("reverses the lists: True\n", ["nbval-check-output"]),
                    {"cell_type": "markdown", "metadata": {}, "source": "text"},
                    cell("True", ["nbval-check-output"], kind="result"),
                    cell(f"{run_gpu_size.PEAK_MARK}123456\n")]}
    assert run_gpu_size.key_results(nb) == {"1": "reverses the lists: True", "3": "True"}
    assert run_gpu_size.peak_bytes(nb) == 123456
    assert run_gpu_size.peak_bytes({"cells": nb["cells"][:2]}) is None  # the measuring cell never ran


def test_a_failing_cell_is_recorded_not_raised(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    check = {"tags": ["nbval-check-output"]}
    nb.cells = [nbformat.v4.new_code_cell("print('the check holds:', 2 + 2 == 4)", metadata=check),
                nbformat.v4.new_code_cell("assert 2 + 2 == 5, 'arithmetic'"),
                nbformat.v4.new_code_cell("print('never reached')")]
    path = tmp_path / "99_example.ipynb"
    nbformat.write(nb, path)
    record = run_gpu_size.run_notebook(path, timeout=60, save=tmp_path / "executed")
    assert record["notebook"] == "99_example.ipynb" and record["passed"] is False
    assert record["failure"]["cell"] == 1 and "AssertionError" in record["failure"]["message"]
    assert record["key_results"] == {"0": "the check holds: True"}
    assert record["peak_gpu_bytes"] is None and record["wall_seconds"] >= 0  # no CUDA here: no peak to report
    saved = nbformat.read(tmp_path / "executed" / "99_example.ipynb", as_version=4)
    assert len(saved.cells) == 3 and path.read_text() == nbformat.writes(nb) + "\n"  # the original is unchanged
