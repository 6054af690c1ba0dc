"""The check: per translation file, every block that is stale, missing or orphan, everything a translation loses of
its English cell (guard.py), and whether the Chinese file is what the build writes."""

from __future__ import annotations

import pathlib
import posixpath
from dataclasses import dataclass, field

from edition import guard, sources, terms
from edition.build import built_text, links_for
from edition.common import (
    ROOT,
    Block,
    built_for,
    cell_hash,
    chapter,
    english_documents,
    english_for,
    english_notebooks,
    generated_ids,
    in_edition,
    is_document,
    load_english,
    read_blocks,
    rel,
    source,
    translatable,
    translation_files,
    translation_for,
    zh_folder_files,
)
from edition.links import Links

NO_BLOCK = "no block for this markdown cell"
SKIP_HINT = ('  (where an English word means something else in a cell, say so in its block: '
             '<!-- guard-skip "word": why -->)')


@dataclass
class Report:
    """What `check` found for one translation file."""

    translation: str
    english: str
    stale: list[tuple[str, str]] = field(default_factory=list)  # (cell id, why)
    diffs: dict[str, list[str]] = field(default_factory=dict)  # cell id -> the English diff, old -> new
    unrecorded: list[str] = field(default_factory=list)  # translated blocks whose English source is not stored
    unused: list[str] = field(default_factory=list)  # stored English sources with no translated block
    unstored: list[str] = field(default_factory=list)  # stale blocks with no stored English (no diff to show)
    block_lines: dict[str, tuple[int, int]] = field(default_factory=dict)  # cell id -> its lines in the file
    command: str = "python ci/translate.py bump FILE"  # the bump command for this file, without ids
    missing: list[tuple[str, str]] = field(default_factory=list)  # (cell id, why)
    orphan: list[tuple[str, str]] = field(default_factory=list)  # (cell id, why)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (cell id, what the translation loses)
    extra: list[str] = field(default_factory=list)  # ids of a document's Chinese-only blocks (named, not failed)
    out_of_date: bool = False  # the Chinese file differs from what `build` writes

    @property
    def failed(self) -> bool:
        return bool(self.stale or self.missing or self.orphan or self.problems or self.out_of_date
                    or self.unrecorded or self.unused)

    def lines(self) -> list[str]:
        counts = (f"{len(self.stale)} stale, {len(self.missing)} missing, {len(self.orphan)} orphan, "
                  f"{len(self.problems)} other problems" + (f", {len(self.unrecorded)} unrecorded" if self.unrecorded
                                                            else "")
                  + (f", {len(self.unused)} unused" if self.unused else ""))
        out = [f"{self.translation} ({self.english}): {counts}"]
        new = self.unstored + self.unrecorded  # blocks with no stored English: one may be an unused id renamed
        renamed = sources.renamed_hint(self.command, new, self.unused) if new and self.unused else ""
        orphans = {i for i, _ in self.orphan}
        cells = [i for i, why in self.missing if why == NO_BLOCK]  # cells a renamed block may belong to
        for i, why in self.stale:
            first, last = self.block_lines.get(i, (0, 0))
            out.append(f"  stale    {i}: {why}")
            out += [f"      {line}" for line in self.diffs.get(i, [])]
            where = f"{self.translation}:{first}-{last}" if first else self.translation
            accept = f"; {renamed}" if i in self.unstored and renamed else (f", then accept the new English: "
                                                                             f"{self.command} {i}")
            out.append(f"    revisit the Chinese at {where}{accept}")
        if self.unrecorded:
            shown = ", ".join(self.unrecorded[:8]) + (", ..." if len(self.unrecorded) > 8 else "")
            out.append(f"  unrecorded {len(self.unrecorded)} translated block(s) whose English source is not stored "
                       f"yet ({shown}): " + (renamed or f"if each translates the English cell as it is now, run: "
                                                        f"{self.command} --all-fresh"))
        out += [f"  unused   {i}: an English source is stored for a block the file does not translate; "
                + (sources.orphan_hint(self.command, i, cells[0] if cells else None) if i in orphans else renamed
                   or f"run: {self.command} --all-fresh (it drops it)") for i in self.unused]
        out += [f"  missing  {i}: {why}" for i, why in self.missing]
        out += [f"  orphan   {i}: {why}" for i, why in self.orphan]
        out += [f"  problem  {i}: {why}" for i, why in self.problems]
        out += [SKIP_HINT] if any("glossary:" in why for _, why in self.problems) else []
        out += [f"  extra    {i}: only in the Chinese edition (copied as it is, never stale)" for i in self.extra]
        if self.out_of_date:
            out.append("  the Chinese file is out of date: run python ci/translate.py build")
        return out


def review(nb: dict, blocks: list[Block], glossary_rows=None, links: Links | None = None,
           self_target: str | None = None, document: bool = False, stored: dict[str, str] | None = None) -> Report:
    """Compare one translation file's blocks with its English notebook `nb` (the paths are left blank) and, unless
    `stored` is None, with the English each block was translated from (sources.py)."""
    glossary_rows = glossary_rows or terms.glossary()
    report = Report("", "")
    cells = {cell["id"]: cell for cell in translatable(nb)}
    generated = generated_ids(nb)
    by_id = {block.cell_id: block for block in blocks}
    for block in blocks:
        cell = cells.get(block.cell_id)
        expected_kind = None if cell is None else ("cell" if cell["cell_type"] == "markdown" else "code")
        if block.kind == "extra":
            if document:
                report.extra.append(block.cell_id)
            else:
                report.orphan.append((block.cell_id, "an extra block belongs in a document, not a notebook"))
        elif block.cell_id in generated:
            report.orphan.append((block.cell_id, "the badge and the setup cell come from ci/notebook_header.py"))
        elif cell is None:
            report.orphan.append((block.cell_id, "no such cell in the English notebook"))
        elif block.kind != expected_kind:
            report.orphan.append((block.cell_id, f"a {block.kind!r} block for a {cell['cell_type']} cell"))
        elif block.todo:
            report.missing.append((block.cell_id, "not translated yet (todo)"))
        elif block.en != cell_hash(source(cell)) or stored is not None and stored.get(block.cell_id) != source(cell):
            if stored is not None and block.cell_id not in stored and block.en == cell_hash(source(cell)):
                report.unrecorded.append(block.cell_id)  # a new translation: accepted by bump --all-fresh
                continue
            report.stale.append((block.cell_id, _why_stale(block, source(cell), stored)))
            report.block_lines[block.cell_id] = block.lines
            if stored is not None:
                report.diffs[block.cell_id] = sources.english_diff(
                    stored.get(block.cell_id), source(cell), "the English it was translated from", "the English now")
                if block.cell_id not in stored:
                    report.unstored.append(block.cell_id)
            continue
        elif block.kind == "code":
            difference = guard.code_difference(source(cell), block.text)
            if difference:
                report.problems.append((block.cell_id, difference))
        else:
            report.problems += [(block.cell_id, problem) for problem in
                                guard.kept_problems(source(cell), block.text, glossary_rows, links, self_target)]
    for cell_id, cell in cells.items():
        if cell["cell_type"] == "markdown" and cell_id not in by_id:
            report.missing.append((cell_id, NO_BLOCK))
    translated = {b.cell_id for b in blocks if b.kind != "extra" and not b.todo and b.cell_id in cells}
    report.unused = sorted(set(stored or {}) - translated)
    return report


def _why_stale(block: Block, now: str, stored: dict[str, str]) -> str:
    """Why a block is stale, in words: the English changed, or the marker was bumped without accepting the change."""
    if block.en != cell_hash(now):
        return f"translated from en {block.en}; the English cell is now en {cell_hash(now)}"
    return (f"its marker says en {block.en}, the English now, but the English it was translated from is stored as "
            f"en {cell_hash(stored[block.cell_id])}: an interrupted bump or a hand-edited hash: run bump FILE ID "
            f"again")


def file_report(english: pathlib.Path, root: pathlib.Path = ROOT, glossary_rows=None) -> Report:
    """The check of one English file's translation file, including whether its Chinese file is current."""
    blocks = read_blocks(english, root)
    nb = load_english(english)
    target = built_for(english, root)
    links = links_for(english, root)
    self_target = posixpath.relpath(rel(target, root), links.zh_dir) if is_document(english) else None
    glossary_rows = glossary_rows or terms.glossary(root / "notebooks" / "glossary.md")
    translation = translation_for(english, root)
    stored = sources.load(translation, root)
    report = review(nb, blocks, glossary_rows, links, self_target, document=is_document(english), stored=stored)
    report.translation = rel(translation, root)
    report.command = sources.bump_command(english, [], root).rstrip()
    report.english = rel(english, root)
    built = built_text(english, root, blocks, nb, stored)
    report.out_of_date = not target.exists() or target.read_text(encoding="utf-8") != built
    return report


def check(root: pathlib.Path = ROOT) -> tuple[list[str], bool]:
    """The check's report lines and whether it fails (see ci/translate.py's docstring for the rule)."""
    lines, failed = [], False
    glossary_rows = terms.glossary(root / "notebooks" / "glossary.md")
    expected = set()
    for translation in translation_files(root):
        english = english_for(translation, root)
        if not english.exists():
            lines.append(f"{rel(translation, root)}: no English file {rel(english, root)} (orphan file)")
            failed = True
            continue
        expected.add(built_for(english, root))
        try:
            report = file_report(english, root, glossary_rows)
        except sources.StoreError as error:  # a merge conflict in the stored English: say so, check the rest
            lines.append(f"{rel(translation, root)}: its stored English cannot be read: {error}")
            failed = True
            continue
        lines += report.lines()
        failed |= report.failed
    for stray in zh_folder_files(root):
        if stray not in expected:
            lines.append(f"{rel(stray, root)}: no translation file (build removes it)")
            failed = True
    for english in english_notebooks(root):
        if not translation_for(english, root).exists():
            number = chapter(english)
            joined = in_edition(number, root)
            rule = (f"chapter {number} is in the Chinese edition: this fails the check" if joined
                    else f"chapter {number} is not in the Chinese edition yet")
            lines.append(f"not translated: {rel(english, root)} ({rule})")
            failed |= joined
    for english in english_documents(root):
        if not translation_for(english, root).exists():
            lines.append(f"not translated: {rel(english, root)} (a document joins the edition with its translation "
                         "file)")
    return lines, failed
