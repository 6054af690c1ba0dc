"""Execute every notebook at GPU size on this machine's CUDA device and record one JSON line per notebook.

    python ci/run_gpu_size.py                        # every chapter -> benchmarks/results/gpu_size.jsonl
    python ci/run_gpu_size.py 08 10 --out -          # two notebooks, the lines on stdout
    python ci/run_gpu_size.py --save build/gpu_size  # also keep the executed notebooks there

Each notebook runs top to bottom in its own kernel with COURSE_SIZE=gpu, from notebooks/ as pytest runs it; the
stored notebooks are not changed, and their stored (CPU-size) outputs are cleared before the run, so every result
is this run's. Its line holds: the notebook, pass or fail (and the failing cell and error: a failing cell, a cell
over the timeout, a dying kernel), the wall time, the peak GPU memory its kernel allocated
(torch.cuda.max_memory_allocated, read in the same kernel after the last cell ran, also after a failing one, e.g. out
of memory; the torchrun processes that notebook 11 starts are not included), its key results (the text printed by
the cells tagged nbval-check-output that ran, the checks that must print the same at every size) and the device,
CUDA capability and torch version. Lines are appended to the results file, so a second run adds to the first; a
failed notebook does not stop the others. Without a CUDA device it refuses and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "benchmarks" / "results" / "gpu_size.jsonl"
CHECK_TAG = "nbval-check-output"
PEAK_MARK = "GPU_SIZE_PEAK_BYTES="
PEAK_TIMEOUT = 120  # seconds the measuring cell may take
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # a terminal colour code in a traceback
PEAK_CELL = ("import torch as _torch\n"
             f"print('{PEAK_MARK}' + str(_torch.cuda.max_memory_allocated() if _torch.cuda.is_available() else -1))")


def course_notebooks(names: list[str]) -> list[pathlib.Path]:
    """The chapters' notebooks (notebooks/NN_*.ipynb), or those whose number or file name is in `names`."""
    found = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return found
    picked = [p for p in found if p.name[:2] in names or p.name in names or p.stem in names]
    unknown = [n for n in names if not any(n in (p.name[:2], p.name, p.stem) for p in found)]
    if unknown:
        raise SystemExit(f"run_gpu_size.py: no notebook {', '.join(unknown)} in notebooks/ (give a chapter number, "
                         "e.g. 08, or a file name)")
    return picked


def cuda_refusal() -> str | None:
    """None where a CUDA device is present; else the sentence that says why nothing runs."""
    import torch

    if torch.cuda.is_available():
        return None
    return ("run_gpu_size.py needs a CUDA device and PyTorch finds none here (torch.cuda.is_available() is False), "
            "so no notebook was run. Run it on a machine with an NVIDIA GPU and a CUDA build of PyTorch; to preview "
            "the GPU size's settings on this machine, set COURSE_SIZE=gpu and run a notebook yourself.")


def output_text(cell: dict) -> str:
    """The text a code cell printed (stdout streams and plain-text results), as one string."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            parts.append("".join(out["text"]) if isinstance(out["text"], list) else out["text"])
        elif out.get("output_type") in ("execute_result", "display_data") and "text/plain" in out.get("data", {}):
            text = out["data"]["text/plain"]
            parts.append(("".join(text) if isinstance(text, list) else text) + "\n")
    return "".join(parts)


def key_results(nb: dict, ran: list[int]) -> dict[str, str]:
    """{cell index: printed text} for every cell tagged nbval-check-output among the cells `ran` in this run, the
    results every size must print (a cell after a failing one did not run, so it has no result)."""
    return {str(i): output_text(nb["cells"][i]).strip() for i in ran if nb["cells"][i]["cell_type"] == "code"
            and CHECK_TAG in nb["cells"][i].get("metadata", {}).get("tags", [])}


def peak_bytes(nb: dict) -> int | None:
    """The peak GPU memory printed by the measuring cell (None if it did not run, or found no CUDA device)."""
    for cell in reversed(nb["cells"]):
        for line in output_text(cell).splitlines() if cell["cell_type"] == "code" else []:
            if line.startswith(PEAK_MARK):
                value = int(line.removeprefix(PEAK_MARK))
                return value if value >= 0 else None
    return None


def message(err: Exception) -> str:
    """The last line of an error's text (e.g. 'AssertionError: arithmetic'), without the terminal's colour codes."""
    lines = ANSI.sub("", str(err)).strip().splitlines()
    return (lines[-1] if lines else type(err).__name__)[:500]


def measure_peak(client, nb) -> int | None:
    """Run the measuring cell in `client`'s kernel (also after a failed cell) -> its peak GPU bytes, or None."""
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb.cells.append(nbformat.v4.new_code_cell(PEAK_CELL))
    client.timeout = PEAK_TIMEOUT
    try:
        client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
        return peak_bytes({"cells": [nb.cells[-1]]})
    except (CellExecutionError, CellTimeoutError, DeadKernelError, RuntimeError):  # a dead or stuck kernel
        return None
    finally:
        nb.cells.pop()  # the measuring cell is not the notebook's


def run_notebook(path: pathlib.Path, timeout: int, save: pathlib.Path | None) -> dict:
    """Execute `path` at GPU size in a fresh kernel; return its record (never raises for a failing cell or a dying
    kernel). Only this run's outputs are read: the stored (CPU-size) outputs are cleared before it starts."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    timed_out = {"ename": "CellTimeoutError", "evalue": f"the cell ran over {timeout} s and was interrupted",
                 "traceback": [f"CellTimeoutError: the cell ran over {timeout} s and was interrupted"]}
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", interrupt_on_timeout=True,
                            error_on_timeout=timed_out,  # the kernel is interrupted, so the peak can still be read
                            resources={"metadata": {"path": str(path.parent)}})  # from notebooks/, as pytest runs
    started, error, ran = time.perf_counter(), None, []
    with client.setup_kernel():
        client.wait_for_reply(client.kc.kernel_info())
        try:
            for index, cell in enumerate(nb.cells):
                ran.append(index)
                client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
            error = {"cell": ran[-1], "error": type(err).__name__, "message": message(err)}
        wall = time.perf_counter() - started
        peak = measure_peak(client, nb) if error is None or error["error"] != "DeadKernelError" else None
    record = {"notebook": path.name, "passed": error is None, "wall_seconds": round(wall, 1),
              "peak_gpu_bytes": peak, "key_results": key_results(nb, ran)}
    if error:
        record["failure"] = error
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, save / path.name)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="chapter numbers or file names (default: every chapter)")
    parser.add_argument("--out", default=str(RESULTS), help="the JSON-lines file to append to, or - for stdout")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds one cell may run (default 3600)")
    parser.add_argument("--save", type=pathlib.Path, help="a folder to write the executed notebooks into")
    args = parser.parse_args(argv)
    notebooks = course_notebooks(args.notebooks)
    refusal = cuda_refusal()
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    import torch

    sys.path.insert(0, str(ROOT))
    from shared.files import atomic_write

    os.environ.pop("COURSE_FAST", None)
    os.environ.update(COURSE_SIZE="gpu", COURSE_DEVICE="cuda")  # the kernels inherit this environment
    capability = ".".join(map(str, torch.cuda.get_device_capability(0)))
    device = {"device": torch.cuda.get_device_name(0), "capability": capability, "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d")}
    failed = 0
    for path in notebooks:
        try:
            record = run_notebook(path, args.timeout, args.save)
        except Exception as err:  # e.g. its kernel would not start: a failed line, and on to the next notebook
            failure = {"cell": None, "error": type(err).__name__, "message": message(err)}
            record = {"notebook": path.name, "passed": False, "wall_seconds": None, "peak_gpu_bytes": None,
                      "key_results": {}, "failure": failure}
        record = {**record, **device}
        failed += not record["passed"]
        line = json.dumps(record, ensure_ascii=False)
        if args.out == "-":
            print(line, flush=True)
        else:
            out = pathlib.Path(args.out)
            before = out.read_text(encoding="utf-8") if out.exists() else ""
            with atomic_write(out) as tmp:  # one line more, or none: never half a line
                tmp.write_text(before + line + "\n", encoding="utf-8")
            print(f"{path.name}: {'passed' if record['passed'] else 'FAILED'} in {record['wall_seconds']:.0f} s",
                  file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
