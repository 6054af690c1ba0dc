"""What every job of the edition's tool shares: the paths, the English cells, and the translation file's blocks."""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
from dataclasses import dataclass, field

import notebook_header

ROOT = pathlib.Path(__file__).resolve().parents[2]
LANGUAGE = "zh"
LANGUAGE_TAG = "zh-CN"  # the notebook metadata's `language`
MARKER = re.compile(r"^<!-- (?:(?P<kind>cell|code) (?P<id>\S+) \| en (?P<en>[0-9a-f]{12})(?P<todo> \| todo)?"
                    r"|extra (?P<extra>\S+)) -->$", flags=re.MULTILINE)
FENCE = re.compile(r"\A(`{3,})python\n(.*?)\n?\1\Z", flags=re.DOTALL)
FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", flags=re.MULTILINE | re.DOTALL)  # fenced code
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", flags=re.DOTALL)  # inline code
LINK_TARGET = re.compile(r"(\]\(\s*<?)([^)\s>]+)")  # the target of a markdown link [text](target) or ![alt](target)
SKIP_LINE = re.compile(r"^<!-- guard-skip (.*?) -->\n?", flags=re.MULTILINE)  # see guard.exemptions

# The markdown documents the edition translates section by section: English file -> (its translation file under
# translations/zh/, the Chinese file the build writes), as repository paths.
DOCUMENTS = {
    "notebooks/TEACHING.md": ("TEACHING.md", "notebooks/zh/TEACHING.md"),
    "README.md": ("README.md", "README.zh.md"),
    "notebooks/glossary.md": ("glossary.md", "notebooks/zh/glossary.md"),
}
HEADING = re.compile(r"^#{1,6} ")
FENCE_LINE = re.compile(r"^\s*(```|~~~)")


# ---------------------------------------------------------------------------------------------------- paths


def rel(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    """A path as the repository names it ('notebooks/01_x.ipynb')."""
    return path.relative_to(root).as_posix()


def is_document(english: pathlib.Path) -> bool:
    """True for a markdown document (TEACHING.md, README.md), False for a notebook."""
    return english.suffix == ".md"


def english_notebooks(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The English course notebooks and solutions (notebooks/NN_*.ipynb, notebooks/solutions/NN_*.ipynb)."""
    folder = root / "notebooks"
    return sorted(folder.glob("[0-9][0-9]_*.ipynb")) + sorted((folder / "solutions").glob("[0-9][0-9]_*.ipynb"))


def english_documents(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The English documents of the edition that exist (notebooks/TEACHING.md, README.md)."""
    return [root / name for name in DOCUMENTS if (root / name).exists()]


def translation_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """Every translation file: translations/zh/NN_*.md, translations/zh/solutions/NN_*.md, then the documents'."""
    folder = root / "translations" / LANGUAGE
    documents = [folder / name for name, _ in DOCUMENTS.values() if (folder / name).exists()]
    return (sorted(folder.glob("[0-9][0-9]_*.md")) + sorted((folder / "solutions").glob("[0-9][0-9]_*.md"))
            + documents)


def translation_for(english: pathlib.Path, root: pathlib.Path = ROOT) -> pathlib.Path:
    """notebooks/[solutions/]X.ipynb -> translations/zh/[solutions/]X.md; README.md -> translations/zh/README.md"""
    folder = root / "translations" / LANGUAGE
    if is_document(english):
        return folder / DOCUMENTS[rel(english, root)][0]
    return folder / english.relative_to(root / "notebooks").with_suffix(".md")


def english_for(translation: pathlib.Path, root: pathlib.Path = ROOT) -> pathlib.Path:
    """translations/zh/[solutions/]X.md -> notebooks/[solutions/]X.ipynb, or the English document it translates."""
    name = translation.relative_to(root / "translations" / LANGUAGE).as_posix()
    for english, (translated, _) in DOCUMENTS.items():
        if name == translated:
            return root / english
    return root / "notebooks" / pathlib.Path(name).with_suffix(".ipynb")


def built_for(english: pathlib.Path, root: pathlib.Path = ROOT) -> pathlib.Path:
    """notebooks/[solutions/]X.ipynb -> notebooks/zh/[solutions/]X.ipynb; README.md -> README.zh.md"""
    if is_document(english):
        return root / DOCUMENTS[rel(english, root)][1]
    return root / "notebooks" / LANGUAGE / english.relative_to(root / "notebooks")


def zh_folder_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The notebooks and documents in notebooks/zh/ (what the build writes there; anything else there is stray)."""
    folder = root / "notebooks" / LANGUAGE
    documents = [root / built for _, built in DOCUMENTS.values()
                 if built.startswith("notebooks/zh/") and (root / built).exists()]
    return (sorted(folder.glob("[0-9][0-9]_*.ipynb")) + sorted((folder / "solutions").glob("[0-9][0-9]_*.ipynb"))
            + documents)


def translated_paths(root: pathlib.Path = ROOT) -> set[str]:
    """The repository paths of the English notebooks and documents that have a translation file."""
    return {rel(e, root) for e in english_notebooks(root) + english_documents(root)
            if translation_for(e, root).exists()}


def chapter(path: pathlib.Path) -> str:
    """The chapter number 'NN' of a notebook or translation file."""
    return path.name[:2]


def in_edition(number: str, root: pathlib.Path = ROOT) -> bool:
    """True once chapter `number`'s notebook (not only its solutions) has a translation file."""
    return any((root / "translations" / LANGUAGE).glob(f"{number}_*.md"))


# ---------------------------------------------------------------------------------------------- English cells


def lines(text: str) -> list[str]:
    """A text as a notebook stores it: a list of lines with their line ends."""
    return text.splitlines(keepends=True)


def slug(heading: str) -> str:
    """A section's block id: '## CPU, GPU and Colab' -> 'cpu-gpu-and-colab' (at most 48 characters)."""
    return re.sub(r"[^a-z0-9]+", "-", heading.lstrip("#").lower()).strip("-")[:48].strip("-") or "top"


def document_cells(text: str) -> dict:
    """A markdown document as a notebook of markdown cells, one per section (a heading and what follows it, up to
    the next heading outside a code fence); each cell's id is its heading's slug, made unique with -2, -3, ..."""
    sections, current, fenced = [], [], False
    for line in text.splitlines(keepends=True):
        if FENCE_LINE.match(line):
            fenced = not fenced
        if HEADING.match(line) and not fenced and any(part.strip() for part in current):
            sections.append(current)
            current = []
        current.append(line)
    if any(part.strip() for part in current):
        sections.append(current)
    cells, seen = [], {}
    for section in sections:
        body = "".join(section).strip("\n")
        name = slug(body.splitlines()[0])
        seen[name] = seen.get(name, 0) + 1
        cell_id = name if seen[name] == 1 else f"{name}-{seen[name]}"
        cells.append({"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": lines(body)})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def load_english(english: pathlib.Path) -> dict:
    """An English notebook, or a markdown document as a notebook of its sections (document_cells)."""
    text = english.read_text(encoding="utf-8")
    return document_cells(text) if is_document(english) else json.loads(text)


def source(cell: dict) -> str:
    """A cell's source as one string (notebooks store it as a list of lines)."""
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def cell_hash(text: str) -> str:
    """The first 12 hex digits of the SHA-256 of a cell's source: what a block records as `en`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def generated_ids(nb: dict) -> set[str]:
    """Ids of the cells that ci/notebook_header.py writes (the badge and the setup cell): never translated here."""
    ids = {c.get("id") for c in nb["cells"] if notebook_header.BADGE_TAG in c.get("metadata", {}).get("tags", [])}
    setup = next((c for c in nb["cells"] if c["cell_type"] == "code"), None)
    return ids | ({setup.get("id")} if setup else set())


def translatable(nb: dict) -> list[dict]:
    """The English cells that a translation file speaks about: all but the badge and the setup cell."""
    generated = generated_ids(nb)
    for index, cell in enumerate(nb["cells"]):
        if not cell.get("id"):
            raise ValueError(f"nb: cell {index} has no id (nbformat 4.5 gives every cell one)")
    return [c for c in nb["cells"] if c["id"] not in generated]


# ------------------------------------------------------------------------------------------ the translation file


@dataclass
class Block:
    """One block of a translation file: a markdown cell ('cell'), a code cell ('code'), or, in a document, a
    section that only the Chinese edition has ('extra', placed after the block before it; it has no `en`)."""

    kind: str  # "cell", "code" or "extra"
    cell_id: str
    en: str  # the hash of the English source it was translated from ("" for an extra block)
    text: str  # markdown, or the code without its fence
    todo: bool = False  # still the English text that `skeleton` put there
    lines: tuple[int, int] = field(default=(0, 0), compare=False)  # the file's lines of the marker and the text's end

    def render(self) -> str:
        body = self.text
        if self.kind == "code":
            fence = "````" if "```" in body else "```"
            body = f"{fence}python\n{body}\n{fence}"
        if self.kind == "extra":
            return f"<!-- extra {self.cell_id} -->\n{body}\n"
        todo = " | todo" if self.todo else ""
        return f"<!-- {self.kind} {self.cell_id} | en {self.en}{todo} -->\n{body}\n"


def parse(text: str, name: str = "translation") -> list[Block]:
    """The blocks of a translation file, in order; ValueError (naming the file and line) if it is malformed."""
    if not isinstance(text, str):
        raise TypeError(f"text must be the translation file's text (str), got {type(text).__name__}")
    markers = list(MARKER.finditer(text))
    preamble = text[: markers[0].start() if markers else len(text)]
    stray = re.sub(r"<!--.*?-->", "", preamble, flags=re.DOTALL).strip()
    if stray:
        raise ValueError(f"{name}: text before the first block marker (only <!-- comments --> may stand there): "
                         f"{stray[:60]!r}")
    blocks, seen = [], set()
    for index, match in enumerate(markers):
        kind, cell_id = (match["kind"], match["id"]) if match["kind"] else ("extra", match["extra"])
        line = text.count("\n", 0, match.start()) + 1
        if cell_id in seen:
            raise ValueError(f"{name}, line {line}: a second block for cell {cell_id}")
        seen.add(cell_id)
        end = markers[index + 1].start() if index + 1 < len(markers) else len(text)
        body = text[match.end():end].strip("\n").rstrip()
        if kind == "code":
            fenced = FENCE.match(body)
            if not fenced:
                raise ValueError(f"{name}, line {line}: a code block must be one ```python fenced block")
            body = fenced.group(2)
        last = line + text[match.start():match.end() + len(text[match.end():end].rstrip())].count("\n")
        blocks.append(Block(kind, cell_id, match["en"] or "", body, bool(match["todo"]), (line, last)))
    return blocks


def render(blocks: list[Block], english_rel: str) -> str:
    """A translation file's text: a one-line header, then the blocks separated by blank lines."""
    header = (f"<!-- Chinese translation of {english_rel}: keep each block's marker line; "
              f"see ci/translate.py and README.zh.md -->\n")
    return header + "".join("\n" + block.render() for block in blocks)


def read_blocks(english: pathlib.Path, root: pathlib.Path = ROOT) -> list[Block]:
    """The blocks of `english`'s translation file."""
    translation = translation_for(english, root)
    return parse(translation.read_text(encoding="utf-8"), rel(translation, root))


def published(text: str) -> str:
    """A block's markdown as the Chinese edition shows it: without its guard-skip lines (guard.exemptions)."""
    return SKIP_LINE.sub("", text)
