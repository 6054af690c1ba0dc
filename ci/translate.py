"""Build the Chinese edition (notebooks/zh/) from the English notebooks and one translation file per notebook.

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
one the code is copied verbatim) and may change comments only: docstrings and strings are code. Links are written
as in the English notebook; the build rewrites them for notebooks/zh/. A marker ending in `| todo` is a block that
`skeleton` filled with the English text and nobody has translated yet: the build shows the English cell for it.
The Colab badge and the setup cell are not translated here: ci/notebook_header.py generates them for the Chinese
notebooks as for the English ones.

    python ci/translate.py skeleton 01            # start or extend translations/zh/01_….md (todo blocks)
    python ci/translate.py skeleton solutions/01 --code   # the solutions notebook, and code cells with comments
    python ci/translate.py build                  # write notebooks/zh/ (cells, outputs and ids copied, no execution)
    python ci/translate.py check                  # list stale, missing and orphan blocks; exit 1 if any must be fixed

`check` names, per translation file, every stale block (the English cell changed since it was translated: update
the translation, then put the hash that `check` prints into its marker; until then the build keeps the old
translation of a markdown cell, and the English code of a code cell), every missing one (no block, or `todo`), every
orphan (its cell id is gone from the English notebook), every number, term or code that the translation does not
keep (the rules of tests/test_translation.py), and every notebooks/zh/ file that differs from what `build` would
write; any of these fails it. It also names every English notebook that has no translation file, as "not
translated".

Markdown documents of the course (notebooks/TEACHING.md, the teacher's guide) are translated the same way, section by
section: each heading starts a section, whose block id is the heading's slug (`translations/zh/TEACHING.md`,
built into `notebooks/zh/TEACHING.md`). Like a chapter, a document is in the edition once its translation file
exists, and from then on must stay complete and fresh.

    python ci/translate.py skeleton TEACHING.md   # start or extend translations/zh/TEACHING.md
    python ci/translate.py count                  # the Chinese characters of every translation file

The rule for a notebook without a translation file: a chapter NN is in the Chinese edition once its notebook
`notebooks/NN_*.ipynb` has a translation file. From then on every English notebook of that chapter (the notebook
and its solutions) must have a complete, fresh translation, and `check` fails until it has. A notebook of a chapter
that is not in the edition yet (a new chapter, say) is only named; it does not fail the check.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import io
import json
import pathlib
import posixpath
import re
import sys
import tokenize
from dataclasses import dataclass, field

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the other ci/ scripts
import notebook_header  # noqa: E402
from clean_notebook import dumps  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
LANGUAGE = "zh"
LANGUAGE_TAG = "zh-CN"  # the notebook metadata's `language`
MARKER = re.compile(r"^<!-- (cell|code) (\S+) \| en ([0-9a-f]{12})( \| todo)? -->$", flags=re.MULTILINE)
FENCE = re.compile(r"\A(`{3,})python\n(.*?)\n?\1\Z", flags=re.DOTALL)
NOTEBOOK_NAME = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")
EXTERNAL = ("http://", "https://", "mailto:", "#", "data:")
LINK_TARGET = re.compile(r"(\]\(\s*<?)([^)\s>]+)")  # the target of a markdown link [text](target) or ![alt](target)

# The core terms of the glossary (notebooks/glossary.md, whose 中文 column gives the Chinese): where an English
# markdown cell says these words (case-insensitive, whole words), its translation must use the glossary's term.
CORE_TERMS = {
    "attention": r"attention",
    "scaled dot-product attention": r"scaled dot-product attention",
    "multi-head attention": r"multi-head attention",
    "mask": r"masks?",
    "padding mask": r"padding masks?",
    "causal mask": r"causal masks?",
    "positional encoding": r"positional encodings?",
    "residual connection": r"residual connections?",
    "layer normalization": r"layer normali[sz]ation",
    "feed-forward network (FFN)": r"feed-forward networks?",
    "encoder": r"encoders?",
    "decoder": r"decoders?",
    "cross-attention": r"cross-attention",
    "teacher forcing": r"teacher forcing",
    "greedy decoding": r"greedy decoding",
    "beam search": r"beam search",
    "exposure bias": r"exposure bias",
    "label smoothing": r"label smoothing",
    "learning-rate warm-up": r"learning[- ]rate warm-?up",
    "KV cache": r"KV cache",
    "RoPE": r"rotary position(?:al)? embeddings?",
}


# ---------------------------------------------------------------------------------------------- paths and hashes


DOCUMENTS = ("TEACHING.md",)  # markdown documents in notebooks/ that the edition translates, section by section
HEADING = re.compile(r"^#{1,6} ")
FENCE_LINE = re.compile(r"^\s*(```|~~~)")


def english_documents(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The English markdown documents of the edition that exist (notebooks/TEACHING.md)."""
    return [root / "notebooks" / name for name in DOCUMENTS if (root / "notebooks" / name).exists()]


def is_document(path: pathlib.Path) -> bool:
    """True for a markdown document (an English one, its translation file or its Chinese build), not a notebook."""
    return path.name in DOCUMENTS


def english_notebooks(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The English course notebooks and solutions (notebooks/NN_*.ipynb, notebooks/solutions/NN_*.ipynb)."""
    folder = root / "notebooks"
    return sorted(folder.glob("[0-9][0-9]_*.ipynb")) + sorted((folder / "solutions").glob("[0-9][0-9]_*.ipynb"))


def translation_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """Every translation file: translations/zh/NN_*.md and translations/zh/solutions/NN_*.md."""
    folder = root / "translations" / LANGUAGE
    documents = [folder / name for name in DOCUMENTS if (folder / name).exists()]
    return (sorted(folder.glob("[0-9][0-9]_*.md")) + sorted((folder / "solutions").glob("[0-9][0-9]_*.md"))
            + documents)


def translation_for(english: pathlib.Path, root: pathlib.Path = ROOT) -> pathlib.Path:
    """notebooks/[solutions/]X.ipynb -> translations/zh/[solutions/]X.md"""
    rel = english.relative_to(root / "notebooks")
    return root / "translations" / LANGUAGE / rel.with_suffix(".md")


def english_for(translation: pathlib.Path, root: pathlib.Path = ROOT) -> pathlib.Path:
    """translations/zh/[solutions/]X.md -> notebooks/[solutions/]X.ipynb (a document: notebooks/X.md)"""
    rel = translation.relative_to(root / "translations" / LANGUAGE)
    return root / "notebooks" / (rel if is_document(rel) else rel.with_suffix(".ipynb"))


def built_for(english: pathlib.Path, root: pathlib.Path = ROOT) -> pathlib.Path:
    """notebooks/[solutions/]X.ipynb -> notebooks/zh/[solutions/]X.ipynb"""
    return root / "notebooks" / LANGUAGE / english.relative_to(root / "notebooks")


def chapter(path: pathlib.Path) -> str:
    """The chapter number 'NN' of a notebook or translation file."""
    return path.name[:2]


def in_edition(number: str, root: pathlib.Path = ROOT) -> bool:
    """True once chapter `number`'s notebook (not only its solutions) has a translation file."""
    return any((root / "translations" / LANGUAGE).glob(f"{number}_*.md"))


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
    for lines in sections:
        body = "".join(lines).strip("\n")
        first = body.splitlines()[0]
        slug = re.sub(r"[^a-z0-9]+", "-", first.lstrip("#").lower()).strip("-")[:48].strip("-") or "top"
        seen[slug] = seen.get(slug, 0) + 1
        cell_id = slug if seen[slug] == 1 else f"{slug}-{seen[slug]}"
        cells.append({"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": _lines(body)})
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


def _generated(nb: dict) -> set[str]:
    """Ids of the cells that ci/notebook_header.py writes (the badge and the setup cell): never translated here."""
    ids = {c.get("id") for c in nb["cells"] if notebook_header.BADGE_TAG in c.get("metadata", {}).get("tags", [])}
    setup = next((c for c in nb["cells"] if c["cell_type"] == "code"), None)
    return ids | ({setup.get("id")} if setup else set())


def translatable(nb: dict) -> list[dict]:
    """The English cells that a translation file speaks about: all but the badge and the setup cell."""
    generated = _generated(nb)
    for index, cell in enumerate(nb["cells"]):
        if not cell.get("id"):
            raise ValueError(f"nb: cell {index} has no id (nbformat 4.5 gives every cell one)")
    return [c for c in nb["cells"] if c["id"] not in generated]


def has_comment(code: str) -> bool:
    """True if Python code holds a comment (what `skeleton --code` offers for translation)."""
    tokens = _tokens(code, keep_comments=True)
    return tokens is not None and any(kind == tokenize.COMMENT for kind, _ in tokens)


# ------------------------------------------------------------------------------------------ the translation file


@dataclass
class Block:
    """One block of a translation file: a markdown cell ('cell') or a code cell ('code') in Chinese."""

    kind: str  # "cell" (markdown) or "code"
    cell_id: str
    en: str  # the hash of the English source it was translated from
    text: str  # markdown, or the code without its fence
    todo: bool = False  # still the English text that `skeleton` put there

    def render(self) -> str:
        body = self.text
        if self.kind == "code":
            fence = "````" if "```" in body else "```"
            body = f"{fence}python\n{body}\n{fence}"
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
        kind, cell_id, en, todo = match.groups()
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
        blocks.append(Block(kind, cell_id, en, body, bool(todo)))
    return blocks


def render(blocks: list[Block], english_rel: str) -> str:
    """A translation file's text: a one-line header, then the blocks separated by blank lines."""
    header = (f"<!-- Chinese translation of {english_rel}: keep each block's marker line; "
              f"see ci/translate.py and README.zh.md -->\n")
    return header + "".join("\n" + block.render() for block in blocks)


def _skeleton_blocks(nb: dict, blocks: list[Block], code: bool) -> tuple[list[Block], int]:
    """The file's blocks with a todo block added for every translatable cell that has none, in cell order."""
    by_id = {block.cell_id: block for block in blocks}
    ordered, added = [], 0
    for cell in translatable(nb):
        text = source(cell)
        if cell["id"] in by_id:
            ordered.append(by_id.pop(cell["id"]))
        elif cell["cell_type"] == "markdown" or (code and cell["cell_type"] == "code" and has_comment(text)):
            kind = "cell" if cell["cell_type"] == "markdown" else "code"
            ordered.append(Block(kind, cell["id"], cell_hash(text), text, todo=True))
            added += 1
    return ordered + list(by_id.values()), added  # blocks whose cell is gone stay at the end (check names them)


def skeleton(english: pathlib.Path, code: bool = False, root: pathlib.Path = ROOT) -> tuple[pathlib.Path, int]:
    """Write or extend `english`'s translation file with todo blocks; returns (the file, the number of blocks added)."""
    target = translation_for(english, root)
    blocks = parse(target.read_text(encoding="utf-8"), str(target)) if target.exists() else []
    nb = load_english(english)
    ordered, added = _skeleton_blocks(nb, blocks, code)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(ordered, english.relative_to(root).as_posix()), encoding="utf-8")
    return target, added


# -------------------------------------------------------------------------------------------------- the build


def rewrite_links(text: str, english_dir: str, zh_dir: str, translated: set[str]) -> str:
    """Markdown whose relative links, written for the English notebook's folder, resolve from the Chinese one.

    `english_dir` and `zh_dir` are folders inside the repository ('notebooks', 'notebooks/zh'); `translated` holds
    the repository paths of the English notebooks that have a Chinese version. A link to one of those goes to the
    Chinese version, a link to README.md goes to README.zh.md, any other to the same file as before.
    """

    def one(match: re.Match) -> str:
        target = match.group(2)
        if target.startswith(EXTERNAL):
            return match.group(0)
        path, hash_sign, anchor = target.partition("#")
        if not path:
            return match.group(0)
        goal = posixpath.normpath(posixpath.join(english_dir, path))
        if goal == "README.md":
            goal = "README.zh.md"
        elif goal in translated:
            goal = "notebooks/" + LANGUAGE + "/" + goal.removeprefix("notebooks/")
        return match.group(1) + posixpath.relpath(goal, zh_dir) + hash_sign + anchor

    return LINK_TARGET.sub(one, text)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def build_notebook(english: pathlib.Path, root: pathlib.Path = ROOT, blocks: list[Block] | None = None,
                   nb: dict | None = None) -> dict:
    """The Chinese notebook for `english`: its cells in order, markdown from the translation file, code from a fresh
    code block or else verbatim, outputs, ids and metadata copied, links rewritten, the badge and setup cell set."""
    if nb is None:
        nb = json.loads(english.read_text(encoding="utf-8"))
    if blocks is None:
        blocks = parse(translation_for(english, root).read_text(encoding="utf-8"), str(translation_for(english, root)))
    out = copy.deepcopy(nb)
    by_id = {block.cell_id: block for block in blocks}
    english_dir = english.parent.relative_to(root).as_posix()
    zh_path = built_for(english, root).relative_to(root)
    translated = {e.relative_to(root).as_posix() for e in english_notebooks(root) + english_documents(root)
                  if translation_for(e, root).exists()}
    generated = _generated(out)
    for cell in out["cells"]:
        block = by_id.get(cell.get("id"))
        if cell.get("id") in generated or block is None or block.todo:
            pass  # the English cell as it is
        elif cell["cell_type"] == "markdown" and block.kind == "cell":
            cell["source"] = _lines(block.text)  # a stale translation still stands until it is updated
        elif cell["cell_type"] == "code" and block.kind == "code" and block.en == cell_hash(source(cell)):
            cell["source"] = _lines(block.text)  # code only from a fresh block: the code never diverges
        if cell["cell_type"] == "markdown":
            cell["source"] = _lines(rewrite_links(source(cell), english_dir, zh_path.parent.as_posix(), translated))
    notebook_header.with_header(out, zh_path, notebook_header.repo_url())
    out["metadata"]["language"] = LANGUAGE_TAG
    return out


def build_document(english: pathlib.Path, root: pathlib.Path = ROOT, blocks: list[Block] | None = None,
                   nb: dict | None = None) -> str:
    """The Chinese text of a markdown document: each section from its fresh or stale block (an untranslated one in
    English), links rewritten for notebooks/zh/, under a line that names the English source."""
    if nb is None:
        nb = load_english(english)
    if blocks is None:
        blocks = parse(translation_for(english, root).read_text(encoding="utf-8"), str(translation_for(english, root)))
    by_id = {block.cell_id: block for block in blocks if block.kind == "cell" and not block.todo}
    english_dir = english.parent.relative_to(root).as_posix()
    zh_dir = built_for(english, root).parent.relative_to(root).as_posix()
    translated = {e.relative_to(root).as_posix() for e in english_notebooks(root) + english_documents(root)
                  if translation_for(e, root).exists()}
    sections = [by_id[cell["id"]].text if cell["id"] in by_id else source(cell) for cell in nb["cells"]]
    sections = [rewrite_links(text, english_dir, zh_dir, translated) for text in sections]
    note = (f"<!-- Generated by ci/translate.py from {english.relative_to(root).as_posix()} and "
            f"{translation_for(english, root).relative_to(root).as_posix()}: edit those, not this file. -->\n\n")
    return note + "\n\n".join(sections) + "\n"


def built_text(english: pathlib.Path, root: pathlib.Path = ROOT, blocks: list[Block] | None = None,
               nb: dict | None = None) -> str:
    """What `build` writes for `english`: a notebook's JSON text, or a document's markdown."""
    if is_document(english):
        return build_document(english, root, blocks, nb)
    return dumps(build_notebook(english, root, blocks, nb))


def build(root: pathlib.Path = ROOT) -> list[str]:
    """Write notebooks/zh/ for every translation file and remove Chinese notebooks that have none; returns what
    changed, as repository paths."""
    changed, expected = [], set()
    for translation in translation_files(root):
        english = english_for(translation, root)
        if not english.exists():
            raise SystemExit(f"{translation.relative_to(root)}: no English notebook {english.relative_to(root)}")
        target = built_for(english, root)
        expected.add(target)
        text = built_text(english, root)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            changed.append(target.relative_to(root).as_posix())
    for stray in _built_notebooks(root):
        if stray not in expected:
            stray.unlink()
            changed.append(stray.relative_to(root).as_posix() + " (removed: no translation file)")
    return changed


def _built_notebooks(root: pathlib.Path) -> list[pathlib.Path]:
    folder = root / "notebooks" / LANGUAGE
    documents = [folder / name for name in DOCUMENTS if (folder / name).exists()]
    return (sorted(folder.glob("[0-9][0-9]_*.ipynb")) + sorted((folder / "solutions").glob("[0-9][0-9]_*.ipynb"))
            + documents)


# ------------------------------------------------------------------------------------- what a translation keeps


def _tokens(code: str, keep_comments: bool = False) -> list[tuple[int, str]] | None:
    """Python's token stream of `code` as (type, string), without comments and line breaks inside statements
    (NL); None if it does not tokenize as Python (IPython magics, shell escapes)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    if any(t.type == tokenize.ERRORTOKEN for t in tokens):
        return None
    dropped = {tokenize.NL} if keep_comments else {tokenize.NL, tokenize.COMMENT}
    layout = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    return [(t.type, "" if t.type in layout else t.string) for t in tokens if t.type not in dropped]


def same_code(english: str, chinese: str) -> bool:
    """True if two code cells are identical, or identical once comments are removed (Python's tokenizer decides
    what a comment is); code that does not tokenize must be identical."""
    if english == chinese:
        return True
    tokens = _tokens(english)
    return tokens is not None and tokens == _tokens(chinese)


NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?")  # 1,115,394 | 0.683 | 12


def numbers(text: str) -> set[str]:
    """The numbers in a text, thousands separators removed (1,115,394 -> 1115394); signs and % are not part of it."""
    return {match.replace(",", "") for match in NUMBER.findall(text)}


_NOT_PROSE = [  # (pattern, replacement)
    (re.compile(r"^(`{3,}|~{3,}).*?^\1", flags=re.MULTILINE | re.DOTALL), " "),  # fenced code
    (re.compile(r"`[^`\n]*`"), " "),  # inline code
    (re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", flags=re.DOTALL), " "),  # math
    (re.compile(r"\]\([^)]*\)"), " "),  # link targets (the link text stays)
    (re.compile(r"https?://\S+"), " "),  # bare URLs
    (re.compile(r"<[^>]+>"), " "),  # HTML tags and comments
    (re.compile(r"\*+"), ""),  # emphasis, which may split a term: **causal** mask
]


def prose(text: str) -> str:
    """Markdown without code, math, link targets, URLs, HTML and emphasis: the words whose terms are checked."""
    for pattern, replacement in _NOT_PROSE:
        text = pattern.sub(replacement, text)
    return text


def _chinese_term(cell_text: str) -> str:
    """The term of a glossary 中文 cell: '掩码（d2l-zh：掩蔽）' -> '掩码', 'KV 缓存（键值缓存）' -> 'KV 缓存'."""
    return re.split(r"[（(]", cell_text, maxsplit=1)[0].strip()


def glossary(path: pathlib.Path | None = None) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """From notebooks/glossary.md: {English term: Chinese term} from the term tables, and the words to avoid as
    (avoid, use instead, unless the English says) from the table headed `avoid`."""
    path = path or ROOT / "notebooks" / "glossary.md"
    lines = path.read_text(encoding="utf-8").splitlines()
    terms, avoid, header = {}, [], None
    separator = re.compile(r"^\|[-| :]+\|$")
    for index, line in enumerate(lines):
        if not line.startswith("|") or separator.match(line):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if index + 1 < len(lines) and separator.match(lines[index + 1]):
            header = cells
        elif header and header[0] == "term":
            terms[cells[0]] = _chinese_term(cells[-1])
        elif header and header[0] == "avoid":
            avoid.append((cells[0], cells[1], cells[2]))
    return terms, avoid


def _term_pattern(chinese: str) -> re.Pattern:
    """'KV 缓存' matches 'KV 缓存' and 'KV缓存'."""
    return re.compile(r"\s*".join(re.escape(part) for part in chinese.split()))


def term_problems(english: str, chinese: str, terms: dict[str, str], avoid: list[tuple[str, str, str]]) -> list[str]:
    """Where a translated markdown cell strays from the glossary: a core term the English uses whose Chinese term is
    missing, or a word to avoid."""
    english_words, chinese_words = prose(english), prose(chinese)
    problems = []
    for term, pattern in CORE_TERMS.items():
        wanted = terms[term]
        if re.search(rf"\b{pattern}\b", english_words, flags=re.IGNORECASE) and not \
                _term_pattern(wanted).search(chinese_words):
            problems.append(f"the English says {term!r}, the translation lacks the glossary's {wanted!r}")
    for word, instead, unless in avoid:
        if word in chinese_words and not (unless and unless.lower() in english_words.lower()):
            problems.append(f"{word!r} is a word to avoid (glossary): use {instead}")
    return problems


# ---------------------------------------------------------------------------------------------------- the check


@dataclass
class Report:
    """What `check` found for one translation file."""

    translation: str
    english: str
    stale: list[tuple[str, str, str]] = field(default_factory=list)  # (cell id, hash translated from, hash now)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (cell id, why)
    orphan: list[tuple[str, str]] = field(default_factory=list)  # (cell id, why)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (cell id, a number, term or code that differs)
    out_of_date: bool = False  # notebooks/zh/ differs from what `build` writes

    @property
    def failed(self) -> bool:
        return bool(self.stale or self.missing or self.orphan or self.problems or self.out_of_date)

    def lines(self) -> list[str]:
        counts = (f"{len(self.stale)} stale, {len(self.missing)} missing, {len(self.orphan)} orphan, "
                  f"{len(self.problems)} other problems")
        out = [f"{self.translation} ({self.english}): {counts}"]
        out += [f"  stale    {i}: translated from en {old}; the English cell is now en {new}"
                for i, old, new in self.stale]
        out += [f"  missing  {i}: {why}" for i, why in self.missing]
        out += [f"  orphan   {i}: {why}" for i, why in self.orphan]
        out += [f"  problem  {i}: {why}" for i, why in self.problems]
        if self.out_of_date:
            out.append("  notebooks/zh/ is out of date: run python ci/translate.py build")
        return out


def review(nb: dict, blocks: list[Block], glossary_terms=None) -> Report:
    """Compare one translation file's blocks with its English notebook `nb` (the paths are left blank)."""
    terms, avoid = glossary_terms or glossary()
    report = Report("", "")
    cells = {cell["id"]: cell for cell in translatable(nb)}
    generated = _generated(nb)
    by_id = {block.cell_id: block for block in blocks}
    for block in blocks:
        cell = cells.get(block.cell_id)
        expected_kind = None if cell is None else ("cell" if cell["cell_type"] == "markdown" else "code")
        if block.cell_id in generated:
            report.orphan.append((block.cell_id, "the badge and the setup cell come from ci/notebook_header.py"))
        elif cell is None:
            report.orphan.append((block.cell_id, "no such cell in the English notebook"))
        elif block.kind != expected_kind:
            report.orphan.append((block.cell_id, f"a {block.kind!r} block for a {cell['cell_type']} cell"))
        elif block.todo:
            report.missing.append((block.cell_id, "not translated yet (todo)"))
        elif block.en != cell_hash(source(cell)):
            report.stale.append((block.cell_id, block.en, cell_hash(source(cell))))
        elif block.kind == "code":
            if not same_code(source(cell), block.text):
                report.problems.append((block.cell_id, "the code differs from the English beyond its comments"))
        else:
            lost = sorted(numbers(source(cell)) - numbers(block.text), key=lambda n: (len(n), n))
            if lost:
                report.problems.append((block.cell_id, f"numbers of the English missing: {', '.join(lost)}"))
            report.problems += [(block.cell_id, problem)
                                for problem in term_problems(source(cell), block.text, terms, avoid)]
    for cell_id, cell in cells.items():
        if cell["cell_type"] == "markdown" and cell_id not in by_id:
            report.missing.append((cell_id, "no block for this markdown cell"))
    return report


def check(root: pathlib.Path = ROOT) -> tuple[list[str], bool]:
    """The check's report lines and whether it fails (see the module docstring for the rule)."""
    lines, failed = [], False
    terms = glossary(root / "notebooks" / "glossary.md")
    expected = set()
    for translation in translation_files(root):
        english = english_for(translation, root)
        rel = translation.relative_to(root).as_posix()
        if not english.exists():
            lines.append(f"{rel}: no English notebook {english.relative_to(root).as_posix()} (orphan file)")
            failed = True
            continue
        report = file_report(english, root, terms)
        expected.add(built_for(english, root))
        lines += report.lines()
        failed |= report.failed
    for stray in _built_notebooks(root):
        if stray not in expected:
            lines.append(f"{stray.relative_to(root).as_posix()}: no translation file (build removes it)")
            failed = True
    for english in english_notebooks(root):
        if not translation_for(english, root).exists():
            number = chapter(english)
            joined = in_edition(number, root)
            rule = (f"chapter {number} is in the Chinese edition: this fails the check" if joined
                    else f"chapter {number} is not in the Chinese edition yet")
            lines.append(f"not translated: {english.relative_to(root).as_posix()} ({rule})")
            failed |= joined
    for english in english_documents(root):
        if not translation_for(english, root).exists():
            lines.append(f"not translated: {english.relative_to(root).as_posix()} (a document joins the edition "
                         "with its translation file)")
    return lines, failed


def file_report(english: pathlib.Path, root: pathlib.Path = ROOT, glossary_terms=None) -> Report:
    """The check of one English notebook's translation file, including whether its notebooks/zh/ file is current."""
    translation = translation_for(english, root)
    blocks = parse(translation.read_text(encoding="utf-8"), str(translation.relative_to(root)))
    nb = load_english(english)
    report = review(nb, blocks, glossary_terms or glossary(root / "notebooks" / "glossary.md"))
    report.translation = translation.relative_to(root).as_posix()
    report.english = english.relative_to(root).as_posix()
    target = built_for(english, root)
    built = built_text(english, root, blocks, nb)
    report.out_of_date = not target.exists() or target.read_text(encoding="utf-8") != built
    return report


# -------------------------------------------------------------------------------------------- the command line


def chinese_characters(text: str) -> int:
    """The CJK characters and full-width punctuation in `text` (the size of a translation, as Chinese counts it)."""
    return len(re.findall(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]", text))



def resolve_target(name: str, root: pathlib.Path = ROOT) -> pathlib.Path:
    """'01' -> notebooks/01_….ipynb, 'solutions/01' -> notebooks/solutions/01_solutions.ipynb, or a notebook path."""
    match = re.fullmatch(r"(solutions/)?(\d\d)", name)
    if match:
        folder = root / "notebooks" / (match.group(1) or "")
        found = sorted(folder.glob(f"{match.group(2)}_*.ipynb"))
        if len(found) != 1:
            raise SystemExit(f"notebook: expected one notebooks/{match.group(1) or ''}{match.group(2)}_*.ipynb, "
                             f"found {len(found)}")
        return found[0]
    if name in DOCUMENTS:
        return root / "notebooks" / name
    path = (pathlib.Path.cwd() / name).resolve()
    if path not in english_notebooks(root) + english_documents(root):
        raise SystemExit(f"notebook: expected NN, solutions/NN, {', '.join(DOCUMENTS)} or an English notebook's "
                         f"path, got {name!r}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="write notebooks/zh/ from the English notebooks and the translation files")
    commands.add_parser("check", help="list stale, missing and orphan blocks; exit 1 if the edition needs work")
    commands.add_parser("count", help="count the Chinese characters of every translation file")
    start = commands.add_parser("skeleton", help="add a todo block for every cell that has none")
    start.add_argument("notebook", help="NN (the chapter's notebook), solutions/NN, or an English notebook's path")
    start.add_argument("--code", action="store_true", help="also code cells that hold comments")
    args = parser.parse_args(argv)
    if args.command == "build":
        changed = build()
        print(f"{len(changed)} Chinese notebook(s) written" + "".join(f"\n  {name}" for name in changed))
        return 0
    if args.command == "skeleton":
        target, added = skeleton(resolve_target(args.notebook), code=args.code)
        print(f"{target.relative_to(ROOT).as_posix()}: {added} todo block(s) added")
        return 0
    if args.command == "count":
        total = 0
        for translation in translation_files():
            n = chinese_characters(translation.read_text(encoding="utf-8"))
            total += n
            print(f"{n:8,d}  {translation.relative_to(ROOT).as_posix()}")
        print(f"{total:8,d}  Chinese characters in all")
        return 0
    lines, failed = check()
    print("\n".join(lines))
    print("check failed" if failed else "check passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
