"""What the tests of the Chinese edition's tool share: its modules, and small copies of the edition in tmp_path."""

import json
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT / "ci") not in sys.path:
    sys.path.insert(0, str(ROOT / "ci"))

from edition import build, bump, check, common, guard, links, skeleton, sources, terms  # noqa: E402

__all__ = ["build", "bump", "check", "common", "guard", "links", "skeleton", "sources", "terms"]

GLOSSARY = terms.glossary()
PILOT = ROOT / "notebooks" / "solutions" / "01_solutions.ipynb"  # the first translated notebook


def rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


def load(path: pathlib.Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def blocks_of(translation: pathlib.Path) -> list:
    return common.parse(translation.read_text(encoding="utf-8"), rel(translation))


def without_exempted(text: str) -> str:
    """A markdown block's prose (guard.prose of its published text) without the words its guard-skip lines exempt (the
    glossary's table of words to avoid names them)."""
    skipped, _ = guard.exemptions(text)
    prose = guard.prose(common.published(text))
    for word in sorted(skipped, key=len, reverse=True):
        prose = prose.replace(word, " ")
    return prose


def english_cells(translation: pathlib.Path, root: pathlib.Path = ROOT) -> dict:
    """The English cells by id (for a markdown document, its sections, as common.load_english makes them)."""
    return {cell["id"]: cell for cell in common.load_english(common.english_for(translation, root))["cells"]}


def copy_of_the_edition(tmp_path: pathlib.Path, *english: pathlib.Path) -> pathlib.Path:
    """A repository in tmp_path with English files (the pilot when none is named), their translation files, the
    English those were translated from (sources.py) and Chinese files, and the glossary; built for this copy (links
    depend on which Chinese files exist)."""
    paths = [ROOT / "notebooks" / "glossary.md"]
    for source in english or (PILOT,):
        paths += [source, common.translation_for(source), common.built_for(source)]
        store = sources.store_path(common.translation_for(source))
        paths += [store] if store.exists() else []
    for path in paths:
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    build.build(tmp_path)
    return tmp_path


def bump_markers(root: pathlib.Path, english: pathlib.Path) -> int:
    """What a translator does when told a block is stale, and nothing else: accept every stale block of `english`'s
    translation file with the bump command (and store the English of blocks that have none). Returns how many
    markers changed."""
    translation = common.translation_for(english, root)
    blocks = common.parse(translation.read_text(encoding="utf-8"))
    cells = {cell["id"]: cell for cell in common.load_english(english)["cells"]}
    stored = sources.load(translation, root)
    stale = [b.cell_id for b in blocks if b.kind != "extra" and not b.todo and b.cell_id in cells
             and (b.en != common.cell_hash(common.source(cells[b.cell_id]))
                  or b.cell_id in stored and stored[b.cell_id] != common.source(cells[b.cell_id]))]
    bumped = sum(b.en != common.cell_hash(common.source(cells[b.cell_id])) for b in blocks if b.cell_id in stale)
    bump.bump(english, stale, all_fresh=True, root=root)
    build.build(root)
    return bumped


def hand_bump(root: pathlib.Path, english: pathlib.Path) -> int:
    """What the bump command exists to prevent: put the English cell's new hash into every stale marker by hand,
    storing nothing. Returns how many markers changed."""
    translation = common.translation_for(english, root)
    blocks = common.parse(translation.read_text(encoding="utf-8"))
    cells = {cell["id"]: cell for cell in common.load_english(english)["cells"]}
    bumped = 0
    for block in blocks:
        if block.kind != "extra" and block.cell_id in cells:
            now = common.cell_hash(common.source(cells[block.cell_id]))
            bumped += block.en != now
            block.en = now
    translation.write_text(common.render(blocks, common.rel(english, root)), encoding="utf-8")
    build.build(root)
    return bumped
