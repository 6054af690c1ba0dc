"""The bump: accept a block's translation for the English cell as it is now, on purpose and after reading what
changed. It prints the English diff (old -> new), stores the new English source (sources.py) and writes its hash
into the block's marker. Editing a marker's hash by hand does not accept anything: the check compares the stored
English with the English cell as well."""

from __future__ import annotations

import pathlib

from edition import sources
from edition.common import ROOT, cell_hash, load_english, parse, rel, source, translatable, translation_for


def bump(english: pathlib.Path, ids: list[str], all_fresh: bool = False, root: pathlib.Path = ROOT) -> list[str]:
    """Accept blocks `ids` of `english`'s translation file for the English as it is now (printing each one's English
    diff), and with `all_fresh` every translated block that has no stored English yet and whose marker's hash is
    the English cell's (a new translation, or a file from before the store); drop stored English that no
    translated block uses. Returns what it did, as lines; SystemExit for an id it cannot accept."""
    translation = translation_for(english, root)
    name = rel(translation, root)
    if not translation.exists():
        raise SystemExit(f"{name}: no translation file (start one with python ci/translate.py skeleton)")
    text = translation.read_text(encoding="utf-8")
    blocks = {b.cell_id: b for b in parse(text, name) if b.kind != "extra"}
    cells = {cell["id"]: cell for cell in translatable(load_english(english))}
    stored = sources.load(translation, root)
    out = []
    for cell_id in dict.fromkeys(ids):
        block, cell = blocks.get(cell_id), cells.get(cell_id)
        if block is None:
            raise SystemExit(f"{name}: no block for cell {cell_id}")
        if block.todo:
            raise SystemExit(f"{name}: block {cell_id} is todo: translate it and remove ' | todo' from its marker "
                             "first")
        if cell is None or block.kind != ("cell" if cell["cell_type"] == "markdown" else "code"):
            raise SystemExit(f"{name}: block {cell_id} has no English {block.kind} cell to accept (see the check)")
        now = source(cell)
        if stored.get(cell_id) == now and block.en == cell_hash(now):
            out.append(f"{cell_id}: already accepted (en {block.en})")
            continue
        first, last = block.lines
        out.append(f"{cell_id}: accepted for en {cell_hash(now)}; the English changed so (the Chinese is "
                   f"{name}:{first}-{last}):")
        out += [f"    {line}" for line in sources.english_diff(stored.get(cell_id), now, "the English it was "
                                                               "translated from", "the English now")]
        stored[cell_id] = now
        text = _set_hash(text, block.kind, cell_id, block.en, cell_hash(now))
    if all_fresh:
        adopted, refused = [], []
        for cell_id, block in blocks.items():
            if block.todo or cell_id not in cells or cell_id in stored:
                continue
            now = source(cells[cell_id])
            if block.en == cell_hash(now):
                stored[cell_id] = now
                adopted.append(cell_id)
            else:
                refused.append(cell_id)
        out.append(f"{len(adopted)} block(s) whose marker's hash is the English cell's: their English source is "
                   f"stored")
        out += [f"{cell_id}: not adopted: the English changed since it was translated; revisit it, then run "
                f"{sources.bump_command(english, cell_id, root)}" for cell_id in refused]
    translated = {i for i, b in blocks.items() if not b.todo and i in cells}
    for cell_id in sorted(set(stored) - translated):
        del stored[cell_id]
        out.append(f"{cell_id}: its stored English is dropped (no translated block for it)")
    if text != translation.read_text(encoding="utf-8"):
        translation.write_text(text, encoding="utf-8")
    sources.save(translation, stored, root)
    return out


def _set_hash(text: str, kind: str, cell_id: str, old: str, new: str) -> str:
    """The translation file's text with one block's marker hash replaced (nothing else in the file changes)."""
    marker = f"<!-- {kind} {cell_id} | en {old} -->"
    if text.count(marker) != 1:
        raise SystemExit(f"block {cell_id}: expected its marker {marker!r} once in the file")
    return text.replace(marker, f"<!-- {kind} {cell_id} | en {new} -->")
