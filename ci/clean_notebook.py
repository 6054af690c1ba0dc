"""Strip execution timestamps and other run-to-run metadata from notebooks; store figures compactly.

`jupyter nbconvert --execute` records when each cell ran (cell metadata `execution`, with `iopub.*` and
`shell.*` times); Jupyter extensions add `ExecuteTime`. They change on every run and only add diff noise.
Figures (PNG outputs) are re-encoded with a palette of at most 256 colours when that makes them at least 10 %
smaller: plots use few colours, so they look the same at a third of the size or less, which keeps notebooks under
~500 KB. nbval's markers live in cell tags (`nbval-check-output`, `nbval-skip`, ...), out of the learner's view: a
`# NBVAL_CHECK_OUTPUT`-style comment line in a code cell is moved into the cell's tags. Prompt numbers are set
to each code cell's position, as a top-to-bottom run numbers them, so a cell added and executed on its own
later does not show [3] among [40]s. Run this after executing a notebook:

    python ci/clean_notebook.py notebooks/01_scaled_dot_product_attention.ipynb ...
    python ci/clean_notebook.py --check notebooks/*.ipynb   # exit 1 if any notebook is not clean

Unit tests (tests/test_clean_notebook.py) check that every tracked notebook is clean.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import json
import pathlib
import re
import sys

VOLATILE_CELL_KEYS = ("execution", "ExecuteTime")  # timestamps written by the kernel client / extensions
VOLATILE_PREFIXES = ("iopub.", "shell.")  # per-message times, wherever a tool stores them
# a whole-line nbval comment marker, e.g. "# NBVAL_CHECK_OUTPUT"; its tag is "nbval-check-output"
NBVAL_COMMENT = re.compile(r"^[ \t]*#[ \t]*NBVAL_([A-Z_]+)[ \t]*\n?", flags=re.MULTILINE)


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


def marker_comments(nb: dict) -> list[str]:
    """Code cells whose source holds an nbval comment marker, as 'cell N: # NBVAL_X' strings (empty when none)."""
    found = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "code":
            found += [f"cell {index}: # NBVAL_{m.group(1)}" for m in NBVAL_COMMENT.finditer("".join(cell["source"]))]
    return found


def tag_markers(nb: dict) -> int:
    """Move every nbval comment marker of a code cell into its tags (in place); returns how many moved."""
    moved = 0
    for cell in nb["cells"]:
        text = "".join(cell["source"]) if cell.get("cell_type") == "code" else ""
        markers = [f"nbval-{m.group(1).lower().replace('_', '-')}" for m in NBVAL_COMMENT.finditer(text)]
        if markers:
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            tags += [tag for tag in markers if tag not in tags]
            cell["source"] = NBVAL_COMMENT.sub("", text).splitlines(keepends=True)
            moved += len(markers)
    return moved


def compact_png(data: str) -> str:
    """One base64 PNG re-encoded with an adaptive palette (<= 256 colours, no dithering) if that saves >= 10 %.

    Returns the input unchanged when it is already a palette image, has transparency, or would not shrink, so a
    second pass changes nothing.
    """
    from PIL import Image  # matplotlib's own dependency

    raw = base64.b64decode("".join(data) if isinstance(data, list) else data)
    image = Image.open(io.BytesIO(raw))
    if image.mode not in ("RGB", "RGBA") or (image.mode == "RGBA" and image.getextrema()[3][0] < 255):
        return data
    palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", optimize=True)
    if len(buffer.getvalue()) > 0.9 * len(raw):
        return data
    return base64.b64encode(buffer.getvalue()).decode("ascii") + "\n"


def compact_images(nb: dict) -> int:
    """Re-encode every PNG output of the notebook in place with `compact_png`; returns how many changed."""
    changed = 0
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                try:
                    new = compact_png(data["image/png"])
                except (binascii.Error, OSError, ValueError) as err:
                    raise ValueError(f"cell {cell.get('id')}: stored image/png is not a readable PNG ({err})") from err
                if new is not data["image/png"]:
                    data["image/png"] = new
                    changed += 1
    return changed


def uncompacted_images(nb: dict) -> list[str]:
    """Cells holding a PNG that `compact_png` would still shrink, as 'cell N' strings (empty when compact)."""
    return [f"cell {index}" for index, cell in enumerate(nb.get("cells", []))
            for output in cell.get("outputs", []) if "image/png" in output.get("data", {})
            and compact_png(output["data"]["image/png"]) is not output["data"]["image/png"]]


def renumber(nb: dict) -> int:
    """Give every executed code cell the prompt number a top-to-bottom run gives it (its position among the code
    cells, from 1), so a cell added and executed on its own later reads in order; returns how many changed."""
    changed = 0
    code = [cell for cell in nb["cells"] if cell.get("cell_type") == "code"]
    for position, cell in enumerate(code, start=1):
        if cell.get("execution_count") is not None and cell["execution_count"] != position:
            cell["execution_count"] = position
            changed += 1
    return changed


def misnumbered(nb: dict) -> list[str]:
    """'cell N: [k], expected [p]' for every executed code cell whose prompt number is not its position."""
    code = [(i, c) for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "code"]
    return [f"cell {i}: [{c['execution_count']}], expected [{position}]"
            for position, (i, c) in enumerate(code, start=1)
            if c.get("execution_count") is not None and c["execution_count"] != position]


def dumps(nb: dict) -> str:
    """The notebook as JSON in the repository's style (the style Jupyter itself writes)."""
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def clean_file(path: pathlib.Path) -> bool:
    """Clean one notebook file in place (metadata and figures); True if the file changed."""
    text = path.read_text(encoding="utf-8")
    nb = cleaned(json.loads(text))
    tag_markers(nb)
    compact_images(nb)
    renumber(nb)
    new = dumps(nb)
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
            nb = json.loads(path.read_text(encoding="utf-8"))
            found, images, numbers = volatile_keys(nb), uncompacted_images(nb), misnumbered(nb)
            markers = marker_comments(nb)
            if found or images or numbers or markers:
                dirty += 1
                example = (found + images + numbers + markers)[0]
                print(f"{path}: {len(found)} volatile keys, {len(images)} figures to compact, {len(numbers)} prompt "
                      f"numbers out of order, {len(markers)} nbval comments to move into tags, e.g. {example}")
        elif clean_file(path):
            print(f"cleaned {path}")
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
