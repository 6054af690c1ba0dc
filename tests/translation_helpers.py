"""What the tests of the Chinese edition's tool share: its modules, and small copies of the edition in tmp_path."""

import json
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT / "ci") not in sys.path:
    sys.path.insert(0, str(ROOT / "ci"))

from edition import build, check, common, guard, links, skeleton, terms  # noqa: E402

__all__ = ["build", "check", "common", "guard", "links", "skeleton", "terms"]

GLOSSARY = terms.glossary()
PILOT = ROOT / "notebooks" / "solutions" / "01_solutions.ipynb"  # the first translated notebook


def rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


def load(path: pathlib.Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def blocks_of(translation: pathlib.Path) -> list:
    return common.parse(translation.read_text(encoding="utf-8"), rel(translation))


def english_cells(translation: pathlib.Path, root: pathlib.Path = ROOT) -> dict:
    """The English cells by id (for a markdown document, its sections, as common.load_english makes them)."""
    return {cell["id"]: cell for cell in common.load_english(common.english_for(translation, root))["cells"]}


def copy_of_the_edition(tmp_path: pathlib.Path, *english: pathlib.Path) -> pathlib.Path:
    """A repository in tmp_path with English files (the pilot when none is named), their translation files and
    Chinese files, and the glossary; built for this copy (links depend on which Chinese files exist)."""
    paths = [ROOT / "notebooks" / "glossary.md"]
    for source in english or (PILOT,):
        paths += [source, common.translation_for(source), common.built_for(source)]
    for path in paths:
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    build.build(tmp_path)
    return tmp_path


def bump_markers(root: pathlib.Path, english: pathlib.Path) -> int:
    """What a translator does when told a block is stale, and nothing else: put the English cell's new hash into
    every stale marker of `english`'s translation file. Returns how many markers changed."""
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
