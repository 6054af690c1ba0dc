"""Strip execution timestamps and other run-to-run metadata from notebooks; outputs are kept.

`jupyter nbconvert --execute` records when each cell ran (cell metadata `execution`, with `iopub.*` and
`shell.*` times); Jupyter extensions add `ExecuteTime`. They change on every run and only add diff noise.
Run this after executing a notebook:

    python ci/clean_notebook.py notebooks/01_scaled_dot_product_attention.ipynb ...
    python ci/clean_notebook.py --check notebooks/*.ipynb   # exit 1 if any notebook still holds them

A unit test (tests/test_clean_notebook.py) checks that no tracked notebook stores them.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

VOLATILE_CELL_KEYS = ("execution", "ExecuteTime")  # timestamps written by the kernel client / extensions
VOLATILE_PREFIXES = ("iopub.", "shell.")  # per-message times, wherever a tool stores them


def _volatile(key: str) -> bool:
    return key in VOLATILE_CELL_KEYS or key.startswith(VOLATILE_PREFIXES)


def _strip(metadata: dict) -> bool:
    """Remove volatile keys from one metadata dict in place; True if anything was removed."""
    keys = [k for k in metadata if _volatile(k)]
    for key in keys:
        del metadata[key]
    return bool(keys)


def volatile_keys(nb: dict) -> list[str]:
    """Where the notebook holds volatile metadata, as 'cell N: key' strings (empty list when clean)."""
    found = [f"notebook: {k}" for k in nb.get("metadata", {}) if _volatile(k)]
    for index, cell in enumerate(nb.get("cells", [])):
        found += [f"cell {index}: {k}" for k in cell.get("metadata", {}) if _volatile(k)]
    return found


def cleaned(nb: dict) -> dict:
    """The notebook with volatile metadata removed (modified in place and returned); outputs untouched."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("nb must be a notebook dict with a 'cells' list")
    _strip(nb.setdefault("metadata", {}))
    for cell in nb["cells"]:
        _strip(cell.setdefault("metadata", {}))
    return nb


def dumps(nb: dict) -> str:
    """The notebook as JSON in the repository's style (the style Jupyter itself writes)."""
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def clean_file(path: pathlib.Path) -> bool:
    """Clean one notebook file in place; True if the file changed."""
    text = path.read_text(encoding="utf-8")
    new = dumps(cleaned(json.loads(text)))
    if new != text:
        path.write_text(new, encoding="utf-8")
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--check", action="store_true", help="report, change nothing, exit 1 if any is not clean")
    args = parser.parse_args(argv)
    dirty = 0
    for path in args.notebooks:
        if path.suffix != ".ipynb" or not path.is_file():
            parser.error(f"notebooks: expected existing .ipynb files, got {path}")
        if args.check:
            found = volatile_keys(json.loads(path.read_text(encoding="utf-8")))
            if found:
                dirty += 1
                print(f"{path}: {len(found)} volatile keys, e.g. {found[0]}")
        elif clean_file(path):
            print(f"cleaned {path}")
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
