"""The skeleton: start or extend a translation file with a todo block (the English text) for every cell it lacks."""

from __future__ import annotations

import pathlib

from edition.common import (
    ROOT,
    Block,
    cell_hash,
    load_english,
    parse,
    rel,
    render,
    source,
    translatable,
    translation_for,
)
from edition.guard import has_comment, has_docstring


def skeleton_blocks(nb: dict, blocks: list[Block], code: bool) -> tuple[list[Block], int]:
    """The file's blocks with a todo block added for every translatable cell that has none, in cell order; extra
    blocks keep their place after the block before them."""
    by_id = {block.cell_id: block for block in blocks}
    follows, after = {}, None  # {the id of the block before: [extra blocks]}
    for block in blocks:
        if block.kind == "extra":
            follows.setdefault(after, []).append(by_id.pop(block.cell_id))
        else:
            after = block.cell_id
    ordered, added = list(follows.pop(None, [])), 0
    for cell in translatable(nb):
        text = source(cell)
        if cell["id"] in by_id:
            ordered.append(by_id.pop(cell["id"]))
        elif cell["cell_type"] == "markdown" or (code and cell["cell_type"] == "code"
                                                   and (has_comment(text) or has_docstring(text))):
            kind = "cell" if cell["cell_type"] == "markdown" else "code"
            ordered.append(Block(kind, cell["id"], cell_hash(text), text, todo=True))
            added += 1
        else:
            continue
        ordered += follows.pop(cell["id"], [])
    rest = [block for block in by_id.values()]  # blocks whose cell is gone stay at the end (check names them)
    for block in rest:
        ordered += [block, *follows.pop(block.cell_id, [])]
    return ordered + [block for blocks_after in follows.values() for block in blocks_after], added


def skeleton(english: pathlib.Path, code: bool = False, root: pathlib.Path = ROOT) -> tuple[pathlib.Path, int]:
    """Write or extend `english`'s translation file with todo blocks; returns (the file, the number of blocks added)."""
    target = translation_for(english, root)
    blocks = parse(target.read_text(encoding="utf-8"), str(target)) if target.exists() else []
    ordered, added = skeleton_blocks(load_english(english), blocks, code)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(ordered, rel(english, root)), encoding="utf-8")
    return target, added
