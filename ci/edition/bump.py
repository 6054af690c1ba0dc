"""The bump: accept a block's translation for the English cell as it is now, on purpose and after reading what
changed. It prints the English diff (old -> new), stores the new English source (sources.py) and writes its hash
into the block's marker. Editing a marker's hash by hand does not accept anything: the check compares the stored
English with the English cell as well. A block whose id changed (a section's heading was edited) is accepted as
`bump FILE NEW --was OLD`, with the diff from the English stored under OLD; `--all-fresh` never adopts a block
while the file stores English for a block it no longer has, which could be the same block under its old id."""

from __future__ import annotations

import pathlib
import sys

from edition import sources
from edition.common import ROOT, cell_hash, load_english, parse, rel, source, translatable, translation_for

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the course package, for its atomic write
from shared.files import atomic_write  # noqa: E402

OLD_NEW = ("the English it was translated from", "the English now")


def bump(english: pathlib.Path, ids: list[str], all_fresh: bool = False, root: pathlib.Path = ROOT,
         was: str | None = None, drop: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Accept blocks `ids` of `english`'s translation file for the English as it is now (printing each one's English
    diff); with `was`, the one block of `ids` is block `was` renamed: the diff is from the English stored under
    `was`, which moves to the new id. `drop` drops the stored English of blocks the file no longer has. With
    `all_fresh`, store the English of every translated block that has none yet and whose marker's hash is the
    English cell's (a new translation), and drop stored English that no translated block uses, except an orphan
    block's (still in the file, maybe renamed: only `drop` drops it); it refuses (adopting
    and dropping nothing) while the file has both, since the new id may be the old block renamed. Returns what it
    did, as lines; SystemExit for anything it cannot do, before it writes anything."""
    translation = translation_for(english, root)
    name = rel(translation, root)
    if not translation.exists():
        raise SystemExit(f"{name}: no translation file (start one with python ci/translate.py skeleton)")
    text = translation.read_text(encoding="utf-8")
    parsed = parse(text, name)
    extras = {b.cell_id for b in parsed if b.kind == "extra"}
    blocks = {b.cell_id: b for b in parsed if b.kind != "extra"}
    cells = {cell["id"]: cell for cell in translatable(load_english(english))}
    stored = sources.load(translation, root)
    command = sources.bump_command(english, [], root).rstrip()
    translated = {i for i, b in blocks.items() if not b.todo and i in cells}
    ids = list(dict.fromkeys(ids))
    out = []
    orphans = sorted(i for i, b in blocks.items() if i in stored and i not in translated and not b.todo)
    if was is not None:
        _check_was(name, command, ids, was, stored, translated)
        if was in drop:
            raise SystemExit(f"{name}: --was {was} and --drop {was}: --was moves the English stored under {was} to "
                             f"{ids[0]}, --drop deletes it; name {was} in one of them")
    for cell_id in dict.fromkeys(drop):
        if cell_id not in stored:
            raise SystemExit(f"{name}: --drop {cell_id}: no English is stored for {cell_id}")
        if cell_id in translated:
            raise SystemExit(f"{name}: --drop {cell_id}: block {cell_id} is translated; only the stored English of a "
                             f"block the file no longer has is dropped")
    unused = sorted(set(stored) - translated - set(drop) - {was})
    for cell_id in ids:
        if cell_id not in blocks and cell_id in cells and orphans:
            raise SystemExit(f"{name}: no block for cell {cell_id}; the file stores English for {orphans[0]}, whose "
                             f"block has no English cell: {sources.orphan_hint(command, orphans[0], cell_id)}")
        _check_block(name, command, cell_id, blocks, cells, extras)
        if was is None and cell_id not in stored and unused:
            raise SystemExit(f"{name}: block {cell_id} has no stored English, and the file stores English for "
                             f"{', '.join(unused)}, which no block uses: "
                             f"{sources.renamed_hint(command, [cell_id], unused)}")
    if all_fresh:
        unstored = sorted(translated - set(stored) - set(ids))
        if unstored and unused:
            raise SystemExit(f"{name}: --all-fresh adopts nothing here: block(s) {', '.join(unstored)} have no "
                             f"stored English and the file stores English for {', '.join(unused)}, which no block "
                             f"uses: {sources.renamed_hint(command, unstored, unused)}")

    for cell_id in dict.fromkeys(drop):
        del stored[cell_id]
        out.append(f"{cell_id}: its stored English is dropped (--drop)")
    for cell_id in ids:
        block, now = blocks[cell_id], source(cells[cell_id])
        old = stored.get(cell_id) if was is None else stored[was]
        if was is None and old == now and block.en == cell_hash(now):
            out.append(f"{cell_id}: already accepted (en {block.en})")
            continue
        first, last = block.lines
        renamed = f" (renamed from {was})" if was is not None else ""
        out.append(f"{cell_id}{renamed}: accepted for en {cell_hash(now)}; the English changed so (the Chinese is "
                   f"{name}:{first}-{last}):")
        out += [f"    {line}" for line in sources.english_diff(old, now, *OLD_NEW)]
        stored[cell_id] = now
        if was is not None:
            del stored[was]
            out.append(f"{was}: its stored English is dropped (the block is now {cell_id})")
        text = _set_hash(text, block.kind, cell_id, block.en, cell_hash(now))
    if all_fresh:
        adopted, refused = [], []
        for cell_id in sorted(translated - set(stored)):
            now = source(cells[cell_id])
            if blocks[cell_id].en == cell_hash(now):
                stored[cell_id] = now
                adopted.append(cell_id)
            else:
                refused.append(cell_id)
        out.append(f"{len(adopted)} block(s) whose marker's hash is the English cell's: their English source is "
                   f"stored")
        out += [f"{cell_id}: not adopted: the English changed since it was translated; revisit it, then run "
                f"{command} {cell_id}" for cell_id in refused]
        for cell_id in sorted(set(stored) - translated):
            if cell_id in orphans:  # the block is still there: it may be renamed, so only --drop drops its English
                out.append(f"{cell_id}: its stored English is kept: {sources.orphan_hint(command, cell_id, None)}")
                continue
            del stored[cell_id]
            out.append(f"{cell_id}: its stored English is dropped (no translated block for it)")
    if text != translation.read_text(encoding="utf-8"):
        with atomic_write(translation) as tmp:
            tmp.write_text(text, encoding="utf-8")
    sources.save(translation, stored, root)
    return out


def _check_was(name: str, command: str, ids: list[str], was: str, stored: dict, translated: set) -> None:
    """SystemExit unless `bump FILE NEW --was OLD` names one block with no stored English and stored English that no
    block uses."""
    if len(ids) != 1:
        raise SystemExit(f"{name}: --was {was} goes with one block id: {command} NEW --was {was}")
    if was not in stored:
        raise SystemExit(f"{name}: --was {was}: no English is stored for {was}")
    if was in translated:
        raise SystemExit(f"{name}: --was {was}: block {was} is still in the file; --was names the id a renamed "
                         f"block had")
    if ids[0] in stored:
        raise SystemExit(f"{name}: block {ids[0]} has stored English already: {command} {ids[0]} shows its diff "
                         f"(--was is for a block whose id changed)")


def _check_block(name: str, command: str, cell_id: str, blocks: dict, cells: dict, extras: set) -> None:
    """SystemExit unless `cell_id` names a translated block of an English cell of its kind."""
    if cell_id in extras:
        raise SystemExit(f"{name}: {cell_id} is an extra block (only in the Chinese edition, with no English "
                         f"source): extra blocks are never stale and never bumped")
    block, cell = blocks.get(cell_id), cells.get(cell_id)
    if block is None:
        raise SystemExit(f"{name}: no block for cell {cell_id}")
    if block.todo:
        raise SystemExit(f"{name}: block {cell_id} is todo: translate it and remove ' | todo' from its marker first")
    if cell is None or block.kind != ("cell" if cell["cell_type"] == "markdown" else "code"):
        raise SystemExit(f"{name}: block {cell_id} has no English {block.kind} cell to accept (see the check)")


def _set_hash(text: str, kind: str, cell_id: str, old: str, new: str) -> str:
    """The translation file's text with one block's marker hash replaced (nothing else in the file changes)."""
    marker = f"<!-- {kind} {cell_id} | en {old} -->"
    if text.count(marker) != 1:
        raise SystemExit(f"block {cell_id}: expected its marker {marker!r} once in the file")
    return text.replace(marker, f"<!-- {kind} {cell_id} | en {new} -->")
