"""What a translation must keep of its English cell, so that bumping a marker's hash cannot hide a change of meaning.

A translated markdown cell keeps every number, inline code span and link target of the English cell (link targets
as the build rewrites them), and says every glossary term the English says, at least as often, in the glossary's
Chinese (whole English words, simple plurals; an English name such as RoPE or bf16, a title or `warmup = 40` may also
stay as it is); it uses no word of the glossary's table of words to avoid. A code cell's translation changes
comments and docstrings' text only. The glossary's terms and their forms are read by edition.terms.

Where an English word means something else in one cell ("key ideas" is no attention key), the block says so on a
line of its own, which the build drops and the check holds to the problems it names:

    <!-- guard-skip "key": "key ideas", not the attention key -->
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize

from edition.common import CODE_SPAN, FENCED, LINK_TARGET, SKIP_LINE
from edition.links import Links
from edition.terms import chinese_forms, term_forms

# ------------------------------------------------------------------------------------------------------ code


def _tokens(code: str, keep_comments: bool = False, docstrings: bool = False) -> list[tuple[int, str, int]] | None:
    """Python's token stream of `code` as (type, string, line), without comments and line breaks inside statements
    (NL), and with `docstrings` each docstring's text as '<docstring>'; None if it does not tokenize as Python
    (IPython magics, shell escapes)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    if any(t.type == tokenize.ERRORTOKEN for t in tokens):
        return None
    spans = _docstring_spans(code) if docstrings else []
    dropped = {tokenize.NL} if keep_comments else {tokenize.NL, tokenize.COMMENT}
    layout = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    out = []
    for t in tokens:
        if t.type in dropped:
            continue
        if t.type == tokenize.STRING and any(start <= t.start and t.end <= end for start, end in spans):
            if out[-1:] and out[-1][:2] == (tokenize.STRING, "<docstring>"):  # "a" "b" as one docstring
                continue
            out.append((tokenize.STRING, "<docstring>", t.start[0]))
            continue
        out.append((t.type, "" if t.type in layout else t.string, t.start[0]))
    return out


def _docstring_nodes(code: str) -> list[ast.Expr]:
    """The docstrings of the functions and classes of `code`, as statements: the first statement of a def or class
    body when it is a string (what help() shows); a module's first string is not one (a cell's string is output).
    [] if it does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                found.append(first)
    return found


def _docstring_spans(code: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) positions of the docstrings of the functions and classes of `code` (_docstring_nodes)."""
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in _docstring_nodes(code)]


def _syntax_error(code: str) -> SyntaxError | None:
    """Python's SyntaxError for `code`, or None if it parses."""
    try:
        ast.parse(code)
    except SyntaxError as error:
        return error
    return None


def code_difference(english: str, chinese: str) -> str | None:
    """None if a code block keeps its English code cell, else what it changes and at which line. It may change
    comments and the text of docstrings (the first string of a def or class body), nothing else: code, other
    strings (a cell's last string is its output) and names stay identical (Python's tokenizer and ast decide);
    code that does not parse as Python (a magic) must be identical."""
    if english == chinese:
        return None
    error = _syntax_error(chinese)
    if error is not None and _syntax_error(english) is None:
        return (f"the translation is not valid Python, though the English is: line {error.lineno} of the code: "
                f"{error.msg}")
    a, b = _tokens(english, docstrings=True), _tokens(chinese, docstrings=True)
    if a is None or b is None:
        return "the code differs from the English (it is not plain Python, so it must stay identical)"
    ka, kb = [t[:2] for t in a], [t[:2] for t in b]
    if ka == kb:
        return None
    matcher = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    op, i1, i2, j1, j2 = next(o for o in matcher.get_opcodes() if o[0] != "equal")
    said = "the code differs from the English beyond its comments and docstrings: "
    if op == "insert":
        return (f"{said}line {_line(b, j1, j2)} of the translation adds code the English does not have (after the "
                f"English's line {_line(a, i1 - 1)}): {_code_of(b[j1:j2])!r}")
    if op == "delete":
        return (f"{said}the translation leaves out the English's line {_line(a, i1, i2)} (after its own line "
                f"{_line(b, j1 - 1)}): {_code_of(a[i1:i2])!r}")
    x, y = a[i1], b[j1]
    kind = {tokenize.STRING: "a string literal", tokenize.NAME: "a name"}.get(x[0], "the code")
    if "<docstring>" in (x[1], y[1]):
        kind = "a docstring's place (only the text of a def's or class's first string may change)"
    where = f"line {y[2]}" + (f" (the English's line {x[2]})" if x[2] != y[2] else "")
    return f"{said}{where}: {kind} changed, English {_shown(x)}, translation {_shown(y)}"


def _line(tokens: list[tuple[int, str, int]], index: int, end: int | None = None) -> int:
    """The line of tokens[index] (clamped to the stream; 1 for an empty one), or with `end` the line of the first
    token of tokens[index:end] that is not layout (a line break, an indent)."""
    shown = [t for t in tokens[index:end] if t[1]] if end is not None else []
    if shown:
        return shown[0][2]
    return tokens[min(max(index, 0), len(tokens) - 1)][2] if tokens else 1


def _code_of(tokens: list[tuple[int, str, int]]) -> str:
    """Tokens as a reader would quote them: their strings joined by spaces, layout tokens left out."""
    return " ".join(t[1] for t in tokens if t[1]) or "a line break"


def _shown(token: tuple[int, str, int]) -> str:
    return repr(token[1]) if token[1] else tokenize.tok_name[token[0]]


def same_code(english: str, chinese: str) -> bool:
    """True if a code block keeps its English code cell: identical but for comments and docstrings' text."""
    return code_difference(english, chinese) is None


def has_docstring(code: str) -> bool:
    """True if Python code defines a function or class with a docstring (`skeleton --code` offers it too)."""
    return bool(_docstring_nodes(code))


def has_comment(code: str) -> bool:
    """True if Python code holds a comment (what `skeleton --code` offers for translation)."""
    tokens = _tokens(code, keep_comments=True)
    return tokens is not None and any(t[0] == tokenize.COMMENT for t in tokens)


def docstrings(code: str) -> str:
    """The text of the docstrings of Python code's functions and classes, one after another ('' if it does not
    parse)."""
    return "\n".join(node.value.value for node in _docstring_nodes(code))


def comments(code: str, with_docstrings: bool = False) -> str:
    """The comments of Python code, one a line (all of it where it does not tokenize: a shell escape, a magic); with
    `with_docstrings`, its docstrings' text after them: all the prose a translated code block may hold."""
    tokens = _tokens(code, keep_comments=True)
    if tokens is None:
        return code
    found = [text for kind, text, _ in tokens if kind == tokenize.COMMENT]
    return "\n".join(found + ([docstrings(code)] if with_docstrings else []))


# ------------------------------------------------------------------------------------- numbers, code and links

NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?")  # 1,115,394 | 0.683 | 12


def numbers(text: str) -> set[str]:
    """The numbers in a text, thousands separators removed (1,115,394 -> 1115394); signs and % are not part of it."""
    return {match.replace(",", "") for match in NUMBER.findall(text)}


def _untargeted(text: str) -> str:
    """Markdown without its link targets (the link rule compares those): [section 3](03_masks.ipynb) -> [section 3]("""
    return LINK_TARGET.sub(r"\1", text)


def code_spans(text: str) -> set[str]:
    """The inline code spans of markdown (outside fenced code blocks), without their backticks, each run of spaces
    and line breaks as one space (as markdown shows it)."""
    return {" ".join(match.group(2).split()) for match in CODE_SPAN.finditer(FENCED.sub(" ", text))}


def link_targets(text: str) -> list[str]:
    """The targets of the markdown links of a text, in order."""
    return [m.group(2) for m in LINK_TARGET.finditer(text)]


# ---------------------------------------------------------------------------------------------------- prose

_NOT_PROSE = [  # (pattern, replacement)
    (FENCED, " "),  # fenced code
    (CODE_SPAN, " "),  # inline code
    (re.compile(r"\b[\w.]+/s\b"), " "),  # units: tokens/s, steps/s
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


# ------------------------------------------------------------------------------------------------------ terms


def _chinese_pattern(chinese: tuple[str, ...]) -> re.Pattern:
    """Any of the Chinese forms, the longest first; 'KV 缓存' matches 'KV 缓存' and 'KV缓存'."""
    forms = sorted(chinese, key=len, reverse=True)
    return re.compile("|".join(r"\s*".join(map(re.escape, form.split())) for form in forms), flags=re.IGNORECASE)


def _times(n: int) -> str:
    return {0: "never", 1: "once", 2: "twice"}.get(n, f"{n} times")


GLOSS = re.compile(r"[（(][A-Za-z][A-Za-z \-]*[）)]")  # the English in brackets after a Chinese term
# Words that hold a word to avoid but are other words ('秩' is avoided for a merge's or a process's rank; 秩序 is
# order): a word to avoid is not looked for inside them.
NOT_THE_WORD = {"秩": ("秩序",)}
D2L_CITED = re.compile(r"d2l-zh\s*(?:译作|作|称为|：|:)\s*[“\"]?[^，。；）)”\"\s]*")


def term_problems(english: str, chinese: str, rows: dict[str, str],
                  avoid: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(item, problem) for each glossary term the English cell says more often than the translation says it in
    Chinese (longer terms first: what 'padding mask' matched is not counted again for 'mask'), and each word to
    avoid it uses (not inside a glossary term, 可学习的位置嵌入, nor where it is named as d2l-zh's word:
    'd2l-zh 译作层规范化'). Counting, not just presence, is what catches 'keys' become 'queries' in a cell that
    speaks of both."""
    english_words, chinese_words = prose(english), prose(chinese)
    unbracketed = GLOSS.sub(" ", chinese_words)  # 词元（token）says the term once, not twice
    problems = []
    for form in term_forms(rows):
        found = form.pattern.findall(english_words)
        if not found:
            continue
        english_words = form.pattern.sub(" ", english_words)
        said = len(_chinese_pattern(form.chinese).findall(chinese_words))
        kept = len(form.pattern.findall(chinese_words)) if form.verbatim else 0  # a name kept: RoPE, bf16
        surface = {word for word in found if not form.verbatim}  # 'warmup = 40', a title, a class name
        kept += sum(len(re.findall(rf"(?<![A-Za-z]){re.escape(word)}(?![A-Za-z])", unbracketed)) for word in surface)
        if said + kept < len(found):
            wanted = " or ".join(form.chinese)
            problems.append((form.english, f"the English says {found[0]!r} {_times(len(found))} (glossary: "
                                           f"{form.row}), the translation {wanted} {_times(said + kept)}"))
    return problems + avoid_problems(prose(english), chinese_words, rows, avoid)


def avoid_problems(english: str, chinese: str, rows: dict[str, str],
                   avoid: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(word, problem) for each word to avoid in `chinese` (plain text: prose or comments), unless `english` says the
    words of its last column; not inside a glossary term (可学习的位置嵌入) nor named as d2l-zh's word."""
    cited = D2L_CITED.sub(" ", chinese)  # 层归一化（d2l-zh 译作层规范化）: d2l-zh's word, named as such
    terms = {c for cell_text in rows.values() for c in chinese_forms(cell_text)}
    problems = []
    for word, instead, unless in avoid:
        inside = sorted({t for t in terms if word in t and t != word} | set(NOT_THE_WORD.get(word, ())), key=len,
                        reverse=True)  # 可学习的位置嵌入, 秩序
        text = re.sub("|".join(map(re.escape, inside)), " ", cited) if inside else cited
        if word in text and not (unless and unless.lower() in english.lower()):
            problems.append((word, f"{word!r} is a word to avoid (glossary): use {instead}"))
    return problems


# ------------------------------------------------------------------------------------------ the rule, per cell


SKIP_BODY = re.compile(r'((?:"[^"]+"\s*,\s*)*"[^"]+")\s*:\s*(\S.*)', flags=re.DOTALL)  # "a", "b": why


def exemptions(text: str) -> tuple[set[str], list[str]]:
    """The items a block's guard-skip lines exempt (`<!-- guard-skip "item", "item": why -->`), and the lines that
    are malformed (no quoted item, or no reason after the colon)."""
    items, malformed = set(), []
    for match in SKIP_LINE.finditer(text):
        parsed = SKIP_BODY.fullmatch(match.group(1).strip())
        if parsed:
            items.update(re.findall(r'"([^"]+)"', parsed.group(1)))
        else:
            malformed.append(match.group(0).strip())
    return items, malformed


def kept_problems(english: str, chinese: str, glossary_rows, links: Links | None = None,
                  self_target: str | None = None) -> list[str]:
    """What a translated markdown cell loses of its English cell: numbers, code spans and link targets (compared as
    `links` rewrites them; a link to `self_target`, the Chinese file itself, is the language switch and is not
    asked for), glossary terms, and words to avoid; guard-skip lines exempt an item each and must be used."""
    links = links or Links("notebooks", "notebooks/zh", frozenset())
    rows, avoid = glossary_rows
    skipped, malformed = exemptions(chinese)
    chinese = SKIP_LINE.sub("", chinese)
    found = []
    lost = sorted(numbers(_untargeted(english)) - numbers(_untargeted(chinese)), key=lambda n: (len(n), n))
    found += [(n, f"the English number {n} is missing") for n in lost]
    spans = {links.span(s) for s in code_spans(chinese)}
    found += [(s, f"the English code `{s}` is missing") for s in sorted(code_spans(english))
              if links.span(s) not in spans]
    targets = {links.target(t) for t in link_targets(chinese)}
    for target in dict.fromkeys(link_targets(english)):
        if links.target(target) not in targets and links.target(target) != self_target:
            found.append((target, f"the English link target {target} is missing"))
    found += term_problems(english, chinese, rows, avoid)
    problems = [message for item, message in found if item not in skipped]
    used = {item for item, _ in found}
    problems += [f'guard-skip "{item}" exempts nothing: remove it' for item in sorted(skipped - used)]
    problems += [f"guard-skip line needs a quoted item and a reason: {line}" for line in malformed]
    return problems
