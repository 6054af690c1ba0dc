"""Build the Chinese edition (notebooks/zh/, README.zh.md) from the English files and one translation file each.

The English notebooks are the one source. For `notebooks/NN_name.ipynb` the translation lives in
`translations/zh/NN_name.md` (for `notebooks/solutions/NN_solutions.ipynb` in `translations/zh/solutions/`), as
blocks in cell order, each opened by a marker that names the cell's id and a hash of the English text it was made
from (the first 12 hex digits of the SHA-256 of the cell's source):

    <!-- cell 16653dc5 | en 3f2a9c0d1b7e -->
    # 01 · 缩放点积注意力
    ...the markdown cell, translated...

    <!-- code e61a7119 | en 9a8b7c6d5e4f -->
    ```python
    ...the English code with its comments translated...
    ```

A block's text runs to the next marker. Every markdown cell needs a `cell` block; a `code` block is optional (without
one the code is copied verbatim) and may change comments and the text of docstrings (the first string of a def or
class body) only: every other string, name and token is code and stays identical. Links are written
as in the English notebook; the build rewrites them for notebooks/zh/ (and a code span that names an English
notebook, `notebooks/solutions/03_solutions.ipynb`, to its Chinese version); a target written `en:path` links the
English file on purpose. A marker ending in `| todo` is a block that `skeleton` filled with the English text and
nobody has translated yet: the build shows the English cell for it. The Colab badge and the setup cell are not
translated here: ci/notebook_header.py generates them for the Chinese notebooks as for the English ones.

    python ci/translate.py skeleton 01            # start or extend translations/zh/01_….md (todo blocks)
    python ci/translate.py skeleton solutions/01 --code   # the solutions notebook, and code cells with comments
                                                          # or docstrings
    python ci/translate.py build                  # write notebooks/zh/ (cells, outputs and ids copied, no execution)
    python ci/translate.py check                  # list stale, missing and orphan blocks; exit 1 if any must be fixed
    python ci/translate.py bump 05 2fec21a2       # accept blocks for the English as it is now (prints the diff)
    python ci/translate.py bump 13 --all-fresh    # store the English of a new translation's blocks
    python ci/translate.py bump README.md data-and-files --was data   # a section whose heading (so id) changed

The English each block was translated from is kept in translations/zh/.source/ (one JSON file per translation file,
block id -> lines; see ci/edition/sources.py). `check` names, per translation file, every stale block: the English
cell is not the stored English it was translated from (or not the marker's hash). For each it prints the English
diff, old -> new, with the changed words marked ([-old-]{+new+}), the translation file's lines to revisit, and the
command that accepts it: `bump FILE ID ...` prints the diff again, stores the new English and writes its hash into
the marker. A marker's hash edited by hand does not pass: the stored English still differs. Until a block is
accepted the build keeps the old translation of a markdown cell, and the English code of a code cell. A translated
block with no stored English (a new translation: `skeleton` stores nothing for a todo block) is named `unrecorded`
until `bump FILE --all-fresh` stores the English of every such block whose marker's hash is the English cell's
(never one whose English changed: that needs `bump FILE ID`, which shows what changed); stored English with no
translated block is named `unused`, and the same command drops it (but not an orphan block's: only `--drop`
does). A block whose id changed (a section's heading,
so its id, was edited, and the marker given the new id) is a block with no stored English beside an unused one:
then `--all-fresh` adopts and drops nothing, and `bump FILE NEW --was OLD` shows the diff from the English stored
under OLD, stores the English under NEW and drops OLD (`bump FILE --drop OLD` drops the stored English of a cell
that is gone). Where no English is stored the check and bump say that no diff can be shown. The check also names
every missing block (no block, or `todo`), every orphan (its cell id is gone from the English notebook), everything
a translation loses of its English cell, and every Chinese file that differs from what `build` would write; any of
these fails it.

A translated markdown cell keeps every number, inline code span and link target of the English cell, and says
every glossary term the English says in the glossary's Chinese (notebooks/glossary.md), with none of its words to
avoid: so even a deliberate bump over an English change of meaning ("keys" become "queries") fails where a term's
count changes. Where an English word means something else in one cell, a line `<!-- guard-skip "word": why -->` in
its block exempts that word there (see ci/edition/guard.py). The check
also names every English notebook that has no translation file, as "not translated".

Markdown documents (notebooks/TEACHING.md, the teacher's guide; notebooks/glossary.md; and README.md) are translated
the same way, section by section: each heading starts a section, whose block id is the heading's slug.
`translations/zh/TEACHING.md` is built into `notebooks/zh/TEACHING.md`, `translations/zh/glossary.md` into
`notebooks/zh/glossary.md`, `translations/zh/README.md` into `README.zh.md`. A document's translation may
hold sections that only the Chinese edition has, each opened by `<!-- extra ID -->`: copied as they are (links
written for the Chinese file) after the block before them, named by the check, never stale. Like a chapter, a
document is in the edition once its translation file exists, and from then on must stay complete and fresh.

    python ci/translate.py skeleton TEACHING.md   # start or extend translations/zh/TEACHING.md (glossary.md too)
    python ci/translate.py count                  # the Chinese characters of every translation file

The rule for a notebook without a translation file: a chapter NN is in the Chinese edition once its notebook
`notebooks/NN_*.ipynb` has a translation file. From then on every English notebook of that chapter (the notebook
and its solutions) must have a complete, fresh translation, and `check` fails until it has. A notebook of a chapter
that is not in the edition yet (a new chapter, say) is only named; it does not fail the check.

The code lives in ci/edition/, one module per job: common (paths, the translation file), guard (what a translation
keeps), links, build, check, skeleton, sources (the stored English and its diffs) and bump.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # ci/: the edition package, the other scripts
from edition.build import build  # noqa: E402
from edition.bump import bump  # noqa: E402
from edition.check import check  # noqa: E402
from edition.common import (  # noqa: E402
    DOCUMENTS,
    LANGUAGE,
    ROOT,
    english_documents,
    english_for,
    english_notebooks,
    rel,
    translation_files,
)
from edition.skeleton import skeleton  # noqa: E402
from edition.sources import StoreError  # noqa: E402


def chinese_characters(text: str) -> int:
    """The CJK characters and full-width punctuation in `text` (the size of a translation, as Chinese counts it)."""
    return len(re.findall(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]", text))


def resolve_target(name: str, root: pathlib.Path = ROOT) -> pathlib.Path:
    """'01' -> notebooks/01_….ipynb, 'solutions/01' -> notebooks/solutions/01_solutions.ipynb, 'TEACHING.md' or
    'README.md' -> that document, or an English notebook's path."""
    match = re.fullmatch(r"(solutions/)?(\d\d)", name)
    if match:
        folder = root / "notebooks" / (match.group(1) or "")
        found = sorted(folder.glob(f"{match.group(2)}_*.ipynb"))
        if len(found) != 1:
            raise SystemExit(f"notebook: expected one notebooks/{match.group(1) or ''}{match.group(2)}_*.ipynb, "
                             f"found {len(found)}")
        return found[0]
    by_name = {pathlib.PurePosixPath(path).name: path for path in DOCUMENTS}
    if name in by_name:
        return root / by_name[name]
    path = (pathlib.Path.cwd() / name).resolve()
    if path in translation_files(root):
        path = english_for(path, root)
    if path not in english_notebooks(root) + english_documents(root):
        raise SystemExit(f"notebook: expected NN, solutions/NN, {', '.join(by_name)}, an English notebook's "
                         f"path or translations/{LANGUAGE}/…, got {name!r}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="write notebooks/zh/ and README.zh.md from the English and the translation files")
    commands.add_parser("check", help="list stale, missing and orphan blocks and what translations lose; exit 1 if "
                                      "the edition needs work")
    commands.add_parser("count", help="count the Chinese characters of every translation file")
    start = commands.add_parser("skeleton", help="add a todo block for every cell that has none")
    start.add_argument("notebook", help="NN (the chapter's notebook), solutions/NN, TEACHING.md, README.md, or an "
                                        "English notebook's path")
    start.add_argument("--code", action="store_true", help="also code cells that hold comments or docstrings")
    accept = commands.add_parser("bump", help="accept blocks for the English as it is now: print each one's English "
                                              "diff, store the new English and write its hash into the marker")
    accept.add_argument("notebook", help="NN, solutions/NN, TEACHING.md, README.md, or a notebook's or translation "
                                         "file's path")
    accept.add_argument("ids", nargs="*", help="the ids of the blocks to accept (as the check names them)")
    accept.add_argument("--all-fresh", action="store_true", help="also every translated block with no stored "
                        "English whose marker's hash is the English cell's (a new translation); refused while the "
                        "file stores English for a block it no longer has (a renamed block: use --was)")
    accept.add_argument("--was", metavar="OLD", help="the one block named is block OLD renamed (a section whose "
                        "heading changed): show the diff from OLD's stored English, store it under the new id")
    accept.add_argument("--drop", metavar="OLD", nargs="+", default=[], help="drop the stored English of blocks "
                        "whose cells are gone")
    args = parser.parse_args(argv)
    try:
        return run(parser, args)
    except StoreError as error:  # the stored English of a file is corrupt (a merge conflict): no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Do what the command line `args` asks; the exit status."""
    if args.command == "bump":
        if not args.ids and not args.all_fresh and not args.drop:
            parser.error("bump: name the blocks to accept, or --all-fresh, or --drop OLD")
        print("\n".join(bump(resolve_target(args.notebook), args.ids, args.all_fresh, was=args.was,
                             drop=args.drop)))
        print("then run: python ci/translate.py build && python ci/translate.py check")
        return 0
    if args.command == "build":
        changed = build()
        print(f"{len(changed)} Chinese file(s) written" + "".join(f"\n  {name}" for name in changed))
        return 0
    if args.command == "skeleton":
        target, added = skeleton(resolve_target(args.notebook), code=args.code)
        print(f"{rel(target)}: {added} todo block(s) added")
        return 0
    if args.command == "count":
        total = 0
        for translation in translation_files():
            n = chinese_characters(translation.read_text(encoding="utf-8"))
            total += n
            print(f"{n:8,d}  {rel(translation)}")
        print(f"{total:8,d}  Chinese characters in all")
        return 0
    lines, failed = check()
    print("\n".join(lines))
    print("check failed" if failed else "check passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
