"""The glossary (notebooks/glossary.md) as the guard reads it: each term's English forms and the Chinese that says
it, and the words to avoid."""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass

from edition.common import ROOT

# Rows whose English name does not give the words to look for, or whose Chinese needs a shorter form as well:
# {row: [(English form, [Chinese forms that say it])]}; a Chinese form None stands for the glossary's own.
FORMS = {
    "RoPE": [("RoPE", [None]), ("rotary position embedding", [None]), ("rotary positional embedding", [None]),
             ("rotary embedding", [None])],
    "ALiBi": [("ALiBi", [None]), ("attention with linear biases", [None])],
    "split / merge heads": [("split heads", ["拆分"]), ("merge heads", ["合并"])],
    "decoder-only model (GPT)": [("decoder-only", ["仅解码器"])],
    "learning-rate warm-up": [("learning-rate warm-up", [None]), ("learning rate warm-up", [None]),
                              ("warm-up", ["预热"])],
    "cross-entropy loss": [("cross-entropy", ["交叉熵"]), ("cross entropy", ["交叉熵"])],
    "rank, world size": [("world size", ["进程总数", "world size"])],  # 'rank' also ranks things (09, 10, 12)
    "first non-finite value": [("first non-finite value", ["非有限值"])],
    "greedy decoding": [("greedy decoding", [None]), ("greedy", ["贪心"])],
    "bigram baseline": [("bigram baseline", [None]), ("bigram", ["二元"])],
    "learned position embedding": [("learned position embedding", [None]), ("learned positions", ["可学习"])],
    "randomized positions": [("randomized positions", ["随机化位置", "随机位置"])],
    "permutation equivariance": [("permutation equivariance", ["置换等变"])],
    "top-k sampling": [("top-k sampling", ["top-k"])],
    "top-p (nucleus) sampling": [("top-p sampling", ["top-p"]), ("nucleus sampling", ["核采样"])],
    "no-repeat n-gram": [("no-repeat n-gram", ["n 元语法"])],
    "Noam schedule": [("Noam schedule", ["Noam"])],
    "fused QKV": [("fused QKV", ["融合 QKV"])],
    "mixed precision": [("mixed precision", ["混合精度"])],
    "backend (gloo, nccl)": [("backend", ["后端"])],
    "torchrun": [("torchrun", ["torchrun"])],
    "checker": [("checker", ["检查器"])],
    "ablation": [("ablation", ["消融"])],
    "overfit one batch": [("overfit one batch", ["过拟合"])],
}
# Rows not held to the prose, with the reason: their English word has a second, everyday sense in the course.
NOT_IN_PROSE = {
    "memory": "also CPU or GPU memory; the encoder's output is written `memory`, which the code-span rule keeps",
    "parameter and FLOP count": "a heading of the glossary, not a phrase the notebooks use",
}


@dataclass(frozen=True)
class Form:
    """One English way of saying a glossary term, and the Chinese that says it."""

    row: str  # the glossary row
    english: str  # as written, e.g. 'learning-rate warm-up'
    pattern: re.Pattern  # whole words, simple plurals; case-sensitive where the form has a capital
    chinese: tuple[str, ...]  # any one of them will do
    verbatim: bool  # a name (a capital or a digit in it): the English itself may also stand in the translation


def chinese_term(cell_text: str) -> str:
    """The term of a glossary 中文 cell: '层归一化（layer normalization；d2l-zh 译作层规范化）' -> '层归一化'."""
    return re.split(r"[（(]", cell_text, maxsplit=1)[0].strip()


def chinese_forms(cell_text: str, row: str = "") -> list[str]:
    """The Chinese that a 中文 cell accepts: its term and the other names in its brackets, but not a part that
    names d2l-zh (its word, or a note comparing with it) nor the English given beside it
    ('层归一化（layer normalization；d2l-zh 译作层规范化）' -> ['层归一化'])."""
    inside = re.findall(r"[（(]([^）)]*)[）)]", cell_text)
    others = [part.strip() for group in inside for part in re.split(r"[；;]", group)]
    own = re.sub(r"\s*\([^)]*\)", "", row).lower() if "d2l-zh" in cell_text else None  # given for comparison
    return [chinese_term(cell_text)] + [part for part in others
                                        if part and "d2l-zh" not in part and part.lower() != own]


def _english_pattern(form: str) -> re.Pattern:
    """'learning-rate warm-up' matches 'learning-rate warmup' and 'Learning-rate warm-ups' (not 'learning rate
    warm-up': a hyphen may go, not become a space); 'query' matches 'queries'."""
    words = []
    for word in form.split():
        parts = [re.sub(r"i[sz](?=ation|e\b|ed\b)", "i[sz]", re.escape(part)) for part in word.split("-")]
        words.append("-?".join(parts))  # warm-up, warmup; normalisation, normalization
    last = words[-1]
    words[-1] = f"(?:{last[:-1]}(?:y|ies)|{last}s?)" if last.endswith("y") else f"{last}(?:s|es)?"
    flags = 0 if re.search(r"[A-Z]", form) else re.IGNORECASE
    return re.compile(r"(?<![A-Za-z0-9_-])" + r"[\s-]+".join(words) + r"(?![A-Za-z0-9_-])", flags)


def _default_forms(row: str, cell_text: str) -> list[tuple[str, list[str | None]]]:
    """The English forms of a row from its name: 'query, key, value' gives three, each with its Chinese part."""
    acronyms = [a for a in re.findall(r"\(([A-Z][A-Za-z0-9]*)\)", row)]
    base = re.sub(r"\s*\([^)]*\)", "", row).strip()
    english = [part.strip() for part in re.split(r" / |, ", base) if part.strip()]
    chinese = [part.strip() for part in re.split(r" / |、", cell_text) if part.strip()]
    if len(english) > 1 and len(chinese) == len(english):
        pairs = [(e, chinese_forms(c, e)) for e, c in zip(english, chinese)]
    else:
        pairs = [(e, [None]) for e in english]
    return pairs + [(a, [None]) for a in acronyms]


def term_forms(rows: dict[str, str]) -> list[Form]:
    """Every English form of every glossary row (but NOT_IN_PROSE and symbols such as $d_k$), longest first."""
    forms = []
    for row, cell_text in rows.items():
        if row in NOT_IN_PROSE or row.startswith("$"):
            continue
        for english, chinese in FORMS.get(row) or _default_forms(row, cell_text):
            said = [c for c in chinese if c] + (chinese_forms(cell_text, row) if None in chinese else [])
            verbatim = bool(re.search(r"[A-Z0-9]", english))
            forms.append(Form(row, english, _english_pattern(english), tuple(dict.fromkeys(said)), verbatim))
    return sorted(forms, key=lambda f: -len(f.english))


def glossary(path: pathlib.Path | None = None) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """From notebooks/glossary.md: {English term: its 中文 cell} from the term tables, and the words to avoid as
    (avoid, use instead, unless the English says) from the table headed `avoid`."""
    path = path or ROOT / "notebooks" / "glossary.md"
    text_lines = path.read_text(encoding="utf-8").splitlines()
    rows, avoid, header = {}, [], None
    separator = re.compile(r"^\|[-| :]+\|$")
    for index, line in enumerate(text_lines):
        if not line.startswith("|") or separator.match(line):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if index + 1 < len(text_lines) and separator.match(text_lines[index + 1]):
            header = cells
        elif header and header[0] == "term":
            rows[cells[0]] = cells[-1]
        elif header and header[0] == "avoid":
            avoid.append((cells[0], cells[1], cells[2]))
    return rows, avoid
