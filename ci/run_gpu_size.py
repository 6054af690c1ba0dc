"""Execute every notebook at GPU size on this machine's CUDA device and record one JSON line per notebook.

    python ci/run_gpu_size.py                        # notebooks 01-12 -> benchmarks/results/gpu_size.jsonl
    python ci/run_gpu_size.py 08 10 --out -          # two notebooks, the lines on stdout
    python ci/run_gpu_size.py --save build/gpu_size  # also keep the executed notebooks there

Each notebook runs top to bottom in its own kernel with COURSE_SIZE=gpu, from notebooks/ as pytest runs it; the
stored notebooks are not changed. Its line holds: the notebook, pass or fail (and the failing cell and error), the
wall time, the peak GPU memory its kernel allocated (torch.cuda.max_memory_allocated; the torchrun processes that
notebook 11 starts are not included), its key results (the text printed by its cells tagged nbval-check-output,
the checks that must print the same at every size) and the device, CUDA capability and torch version. Lines are
appended to the results file, so a second run adds to the first. Without a CUDA device it refuses and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "benchmarks" / "results" / "gpu_size.jsonl"
CHECK_TAG = "nbval-check-output"
PEAK_MARK = "GPU_SIZE_PEAK_BYTES="
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


def key_results(nb: dict) -> dict[str, str]:
    """{cell index: printed text} for every cell tagged nbval-check-output, the results every size must print."""
    return {str(i): output_text(cell).strip() for i, cell in enumerate(nb["cells"])
            if cell["cell_type"] == "code" and CHECK_TAG in cell.get("metadata", {}).get("tags", [])}


def peak_bytes(nb: dict) -> int | None:
    """The peak GPU memory printed by the cell this script appends (None if it did not run)."""
    for cell in reversed(nb["cells"]):
        for line in output_text(cell).splitlines() if cell["cell_type"] == "code" else []:
            if line.startswith(PEAK_MARK):
                value = int(line.removeprefix(PEAK_MARK))
                return value if value >= 0 else None
    return None


def run_notebook(path: pathlib.Path, timeout: int, save: pathlib.Path | None) -> dict:
    """Execute `path` at GPU size in a fresh kernel; return its record (never raises for a failing cell)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PEAK_CELL))
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})  # run from notebooks/, as pytest does
    started, error = time.perf_counter(), None
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as err:
        failed = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(
            o.get("output_type") == "error" for o in c.get("outputs", []))), None)
        error = {"cell": failed, "error": type(err).__name__, "message": str(err).strip().splitlines()[-1][:500]}
    wall = time.perf_counter() - started
    record = {"notebook": path.name, "passed": error is None, "wall_seconds": round(wall, 1),
              "peak_gpu_bytes": peak_bytes(nb), "key_results": key_results(nb)}
    if error:
        record["failure"] = error
    if save is not None:
        nb.cells.pop()  # the appended measuring cell is not the notebook's
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
        record = {**run_notebook(path, args.timeout, args.save), **device}
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
