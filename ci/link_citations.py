"""Link every author-year citation in the notebooks' markdown to its entry in notebooks/references.md.

"Xiong et al. (2020) analyse" becomes "[Xiong et al. (2020)](references.md#xiong2020) analyse" (in
notebooks/solutions/: `../references.md#…`). The anchor is the first author's surname, lower case and without
accents, then the year: every entry of references.md carries one (`<a id="xiong2020"></a>`).

Only markdown cells change, and in them only the citation text; a citation that is already inside a link is left
alone, so running the script twice changes nothing. A citation whose anchor is missing from references.md is
reported and left as it is (add the entry, then run again).

    python ci/link_citations.py notebooks/01_scaled_dot_product_attention.ipynb ...   # rewrite these notebooks
    python ci/link_citations.py --check notebooks/*.ipynb notebooks/solutions/*.ipynb # exit 1 if any would change

tests/test_references.py uses `citations()` and `anchor_for()` from here to check every notebook.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import unicodedata

_SURNAME = r"[A-Z][a-zà-öø-ÿ]+(?:['’-]?[A-Z]?[a-zà-öø-ÿ]+)*"  # Vaswani, Delétang, Lee-Thorp, McLeish, D'Amour
_YEAR = r"(?:19|20)\d\d[a-z]?"
CITATION = re.compile(
    rf"(?<!\w)(?P<first>{_SURNAME})"
    rf"(?:\s+et\s+al\.,?\s+(?:\((?P<y1>{_YEAR})\)|(?P<y2>{_YEAR}))"  # Su et al. 2021, et al. (2020), et al., 2017
    rf"|\s+(?:&|and)\s+{_SURNAME},?\s+(?:\((?P<y3>{_YEAR})\)|(?P<y4>{_YEAR}))"  # Zhang & Sennrich (2019)
    rf"|\s+\((?P<y5>{_YEAR})\)"  # Shazeer (2020)
    rf"|,\s+(?P<y6>{_YEAR}))"  # (Shazeer, 2019)
    r"(?!\d)"
)
# Capitalised words that can stand before "(2017)" or ", 2017" without being an author.
NOT_AUTHORS = {"The", "In", "See", "Since", "From", "Until", "Before", "After", "And", "Or", "Version", "Notebook",
               "Section", "Table", "Figure", "Paper", "Python", "Colab", "December", "November", "October",
               "September", "August", "July", "June", "May", "April", "March", "February", "January"}
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\([^)]*\)")  # [text](target), text may hold one [..] pair
CODE = re.compile(r"`[^`\n]*`")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def anchor_for(first_author: str, year: str) -> str:
    """The references.md anchor for a citation: 'Delétang', '2023' -> 'deletang2023'."""
    plain = unicodedata.normalize("NFKD", first_author).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z]", "", plain.lower()) + year


def _protected(text: str) -> list[tuple[int, int]]:
    """Spans of existing links and inline code, where nothing is linked."""
    return [m.span() for pattern in (LINK, CODE) for m in pattern.finditer(text)]


def citations(text: str, linked: bool = False) -> list[tuple[int, int, str, str]]:
    """(start, end, citation text, anchor) for each author-year citation in markdown `text`.

    With linked=False only the citations that are not already inside a link or code span; with linked=True only those
    inside a link's text.
    """
    spans = _protected(text) if not linked else [m.span() for m in LINK.finditer(text)]
    found = []
    for m in CITATION.finditer(text):
        if m.group("first") in NOT_AUTHORS:
            continue
        inside = any(a <= m.start() and m.end() <= b for a, b in spans)
        if inside != linked:
            continue
        year = next(y for y in m.group("y1", "y2", "y3", "y4", "y5", "y6") if y)
        found.append((m.start(), m.end(), m.group(0), anchor_for(m.group("first"), year)))
    return found


def known_anchors(references: pathlib.Path) -> set[str]:
    return set(ANCHOR.findall(references.read_text(encoding="utf-8")))


def link_text(text: str, prefix: str, anchors: set[str]) -> tuple[str, int, list[str]]:
    """Markdown with its unlinked citations linked; also the number linked and the citations with no entry."""
    missing, count = [], 0
    for start, end, cited, anchor in reversed(citations(text)):
        if anchor not in anchors:
            missing.append(f"{cited} (no '{anchor}' in references.md)")
            continue
        text = f"{text[:start]}[{cited}]({prefix}references.md#{anchor}){text[end:]}"
        count += 1
    return text, count, missing[::-1]


def _references_for(notebook: pathlib.Path) -> pathlib.Path:
    for folder in notebook.resolve().parents:
        if (folder / "references.md").exists() and folder.name == "notebooks":
            return folder / "references.md"
    raise SystemExit(f"{notebook}: no notebooks/references.md above it")


def link_notebook(path: pathlib.Path, write: bool = True) -> tuple[int, list[str]]:
    """Link the citations of one notebook's markdown cells; returns (citations linked, citations with no entry)."""
    references = _references_for(path)
    prefix = pathlib.Path(*([".."] * len(path.resolve().parent.relative_to(references.parent).parts))).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    anchors = known_anchors(references)
    nb = json.loads(path.read_text(encoding="utf-8"))
    total, missing = 0, []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        new, count, lacking = link_text(source, prefix, anchors)
        missing += lacking
        if count:
            total += count
            cell["source"] = new.splitlines(keepends=True) if isinstance(cell["source"], list) else new
    if total and write:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return total, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook would change")
    args = parser.parse_args(argv)
    status = 0
    for path in args.notebooks:
        if ".ipynb_checkpoints" in path.parts:
            continue
        count, missing = link_notebook(path, write=not args.check)
        verb = "would link" if args.check else "linked"
        print(f"{path}: {verb} {count} citation(s)")
        for item in missing:
            print(f"  not linked: {item}")
        if missing or (args.check and count):
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
