"""ci/run_gpu_size.py: it refuses without a CUDA device, and reads key results and peak memory from executed cells."""

import json
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
    assert run_gpu_size.key_results(nb, ran=[0, 1, 2, 3, 4]) == {"1": "reverses the lists: True", "3": "True"}
    assert run_gpu_size.key_results(nb, ran=[0, 1]) == {"1": "reverses the lists: True"}  # cell 3 never ran
    assert run_gpu_size.peak_bytes(nb) == 123456
    assert run_gpu_size.peak_bytes({"cells": nb["cells"][:2]}) is None  # the measuring cell never ran


def write_notebook(path, sources, checked=(), stored=None):
    """A notebook of code cells; cells whose index is in `checked` are tagged nbval-check-output; `stored` maps a
    cell index to the text it printed in an earlier (CPU-size) run, kept as a stored output."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, metadata={"tags": ["nbval-check-output"]} if i in checked else {})
                for i, source in enumerate(sources)]
    for i, text in (stored or {}).items():
        nb.cells[i].outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells[i].execution_count = i + 1
    nbformat.write(nb, path)
    return nb


def test_a_failing_cell_is_recorded_with_this_runs_results_and_the_peak_after_it(tmp_path, monkeypatch):
    import nbformat

    # the measuring cell, here without CUDA: it reads a variable that only this run's kernel holds
    monkeypatch.setattr(run_gpu_size, "PEAK_CELL", f"print('{run_gpu_size.PEAK_MARK}' + str(len(held)))")
    path = tmp_path / "99_example.ipynb"
    nb = write_notebook(path, ["held = [0] * 4096\nprint('the check holds:', 2 + 2 == 4)",
                               "raise RuntimeError('out of memory')",
                               "print('stored at CPU size:', True)"], checked={0, 2},
                        stored={0: "the check holds: False\n", 2: "stored at CPU size: True\n"})
    record = run_gpu_size.run_notebook(path, timeout=60, save=tmp_path / "executed")
    assert record["notebook"] == "99_example.ipynb" and record["passed"] is False
    assert record["failure"] == {"cell": 1, "error": "CellExecutionError", "message": "RuntimeError: out of memory"}
    assert record["key_results"] == {"0": "the check holds: True"}  # this run's text; cell 2 never ran
    assert record["peak_gpu_bytes"] == 4096 and record["wall_seconds"] >= 0  # measured after the failing cell
    saved = nbformat.read(tmp_path / "executed" / "99_example.ipynb", as_version=4)
    assert len(saved.cells) == 3 and saved.cells[2].outputs == []  # no measuring cell, no stored output
    assert path.read_text() == nbformat.writes(nb) + "\n"  # the original is unchanged


def test_without_cuda_there_is_no_peak(tmp_path):
    path = tmp_path / "99_example.ipynb"
    write_notebook(path, ["x = 1"])
    record = run_gpu_size.run_notebook(path, timeout=60, save=None)
    assert record["passed"] is True and "failure" not in record and record["key_results"] == {}
    assert record["peak_gpu_bytes"] is None  # the measuring cell ran and found no CUDA device


def test_a_dying_kernel_is_a_failed_notebook_not_an_abort(tmp_path):
    path = tmp_path / "99_example.ipynb"
    write_notebook(path, ["print('before:', True)", "import os\nos._exit(1)", "print('after:', True)"],
                   checked={0, 2}, stored={2: "after: True\n"})
    record = run_gpu_size.run_notebook(path, timeout=60, save=None)
    assert record["passed"] is False and record["peak_gpu_bytes"] is None
    assert record["failure"]["cell"] == 1 and record["failure"]["error"] == "DeadKernelError"
    assert record["key_results"] == {"0": "before: True"}


def test_main_runs_every_notebook_at_gpu_size_and_appends_one_line_each(tmp_path, monkeypatch):
    import torch

    folder = tmp_path / "notebooks"
    folder.mkdir()
    show = "import os, pathlib\nprint(os.environ['COURSE_SIZE'], os.environ['COURSE_DEVICE'], pathlib.Path.cwd().name)"
    write_notebook(folder / "01_first.ipynb", [show], checked={0}, stored={0: "cpu cpu notebooks\n"})
    write_notebook(folder / "02_dies.ipynb", ["import os\nos._exit(1)"])
    write_notebook(folder / "03_last.ipynb", ["print('ran after the dead kernel:', True)"], checked={0})
    monkeypatch.setattr(run_gpu_size, "NOTEBOOKS", folder)
    monkeypatch.setattr(run_gpu_size, "cuda_refusal", lambda: None)  # as on a CUDA machine
    monkeypatch.setattr(run_gpu_size, "PEAK_CELL", f"print('{run_gpu_size.PEAK_MARK}' + '1234')")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "Test GPU")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: (7, 5))
    monkeypatch.setenv("COURSE_SIZE", "cpu")  # main sets gpu; monkeypatch restores these afterwards
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    out = tmp_path / "gpu_size.jsonl"
    out.write_text('{"notebook": "an earlier run"}\n')
    assert run_gpu_size.main(["--out", str(out), "--timeout", "60"]) == 1  # one notebook failed
    lines = out.read_text().splitlines()
    assert lines[0] == '{"notebook": "an earlier run"}' and len(lines) == 4  # appended, not overwritten
    first, dies, last = map(json.loads, lines[1:])
    assert [r["notebook"] for r in (first, dies, last)] == ["01_first.ipynb", "02_dies.ipynb", "03_last.ipynb"]
    assert first["passed"] and first["key_results"] == {"0": "gpu cuda notebooks"}  # the kernel's environment
    assert first["peak_gpu_bytes"] == 1234 and first["device"] == "Test GPU" and first["capability"] == "7.5"
    assert not dies["passed"] and dies["failure"]["error"] == "DeadKernelError"
    assert last["passed"] and last["key_results"] == {"0": "ran after the dead kernel: True"}


def test_a_cell_over_the_timeout_is_interrupted_and_the_peak_still_read(tmp_path, monkeypatch):
    monkeypatch.setattr(run_gpu_size, "PEAK_CELL", f"print('{run_gpu_size.PEAK_MARK}' + str(len(held)))")
    path = tmp_path / "99_example.ipynb"
    write_notebook(path, ["held = [0] * 77", "import time\ntime.sleep(120)", "print('never reached')"])
    record = run_gpu_size.run_notebook(path, timeout=3, save=None)
    assert record["passed"] is False and record["failure"]["cell"] == 1
    assert "CellTimeoutError: the cell ran over 3 s" in record["failure"]["message"]
    assert record["peak_gpu_bytes"] == 77 and record["wall_seconds"] < 60  # the kernel was interrupted, not awaited
