"""The glossary's choices for three terms the Chinese edition once said in several ways hold in every translation file.

- n-gram is n 元语法 (d2l-zh's word, and the course's own 二元语法), never n 元组 (a tuple), nor $n$ 元组: the
  glossary's words to avoid hold that in prose; here it is held in code comments and around math too.
- dropout is 暂退法: the English word stands in Chinese prose only as the first use's gloss, 暂退法（dropout）, once per
  file at most, at the file's first 暂退法.
- learned position embedding has one name, 可学习的位置嵌入 (its table may be called 可学习的位置表), never
  可学习的位置编码, 可学习位置(嵌入) or a bare 可学习的位置.
A gloss in brackets is never inside another bracket (（…（English）…）, nor （…(English)…）).
The words are looked for in each translation file's markdown (without code, math and links: guard.prose), and n 元组
and the learned-position names in its code blocks' comments and translated docstrings too (a comment may name the
attribute `dropout`).
"""

import re

import pytest

from .translation_helpers import GLOSSARY, ROOT, common, guard, rel, terms, without_exempted

TRANSLATIONS = common.translation_files()
N_TUPLE = re.compile(r"(?<![A-Za-z])[nN0-9]\s*元组")  # 'n 元组', 'n元组', '4 元组'; 二元组 (a pair) is a tuple
MATH_N_TUPLE = re.compile(r"\$\s*[nN]\s*\$\s*元组")  # '$n$ 元组': guard.prose drops the math, so the raw text is read
DROPOUT = re.compile(r"(?<![A-Za-z_])dropout(?![A-Za-z_])", flags=re.IGNORECASE)
DROPOUT_GLOSS = re.compile(r"暂退法\s*[（(]\s*dropout\s*[）)]", flags=re.IGNORECASE)
LEARNED_POSITION = re.compile(r"可学习\s*位置|可学习的\s*位置(?!\s*嵌入|\s*表)")  # 可学习位置(嵌入), 可学习的位置(编码)


def texts(translation, comments=True, raw=False):
    """(cell id, what a reader reads) for every translated block, in the file's order: the prose of a markdown block
    (its published text before guard.prose when `raw`, math and all), the comments and docstrings of a code block
    (unless `comments` is False); a todo block is still English and is left out."""
    for block in common.parse(translation.read_text(encoding="utf-8"), translation.name):
        if block.todo or (block.kind == "code" and not comments):
            continue
        if block.kind == "code":
            yield block.cell_id, guard.comments(block.text, with_docstrings=True)
        else:
            yield block.cell_id, common.published(block.text) if raw else without_exempted(block.text)


def named(translation):
    """How a failure names a translation file (a planted copy outside the repository by its name)."""
    return rel(translation) if translation.is_relative_to(ROOT) else translation.name


def n_tuples(text, raw=""):
    """'n 元组' in prose, and '$n$ 元组' in the raw text (math and all) of the same block."""
    return N_TUPLE.findall(text) + MATH_N_TUPLE.findall(raw)


def bare_dropouts(text):
    """The English word dropout outside the gloss 暂退法（dropout）."""
    return DROPOUT.findall(DROPOUT_GLOSS.sub(" ", text))


def learned_position_names(text):
    return [match.group(0) for match in LEARNED_POSITION.finditer(text)]


def test_the_glossary_holds_the_choices():
    rows, avoid = GLOSSARY
    assert terms.chinese_term(rows["no-repeat n-gram"]) == "禁止重复 n 元语法"
    assert rows["dropout"] == "暂退法（dropout）"
    assert terms.chinese_term(rows["learned position embedding"]) == "可学习的位置嵌入"
    assert terms.chinese_term(rows["batch normalization"]) == "批量归一化"
    assert "d2l-zh 译作批量规范化" in rows["batch normalization"]
    avoided = {word: unless for word, _, unless in avoid}
    assert {"n 元组", "n元组", "可学习的位置编码", "可学习位置", "采样旋钮", "采样游乐场", "秩",
            "注意力汇聚点"} <= set(avoided)
    assert avoided["秩"] == "low-rank"


def test_a_note_that_names_d2l_zh_is_not_an_accepted_chinese_name():
    rows, avoid = GLOSSARY
    assert terms.chinese_forms(rows["attention sink"]) == ["注意力汇点", "attention sink"]
    cell = "层归一化（layer normalization；d2l-zh 译作层规范化）"
    assert terms.chinese_forms(cell, "layer normalization") == ["层归一化"]


def test_a_word_to_avoid_is_not_found_inside_another_word():
    rows, avoid = GLOSSARY
    assert not guard.avoid_problems("", "社会秩序井然", rows, avoid)  # 秩序 is order, not a rank
    assert [word for word, _ in guard.avoid_problems("", "按秩合并，秩序不变", rows, avoid)] == ["秩"]
    assert not guard.avoid_problems("a low-rank update", "低秩更新", rows, avoid)


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=lambda p: rel(p))
def test_no_n_tuple_for_n_gram(translation):
    raw = dict(texts(translation, comments=False, raw=True))
    found = [(cell_id, hit) for cell_id, text in texts(translation) for hit in n_tuples(text, raw.get(cell_id, ""))]
    assert not found, f"{named(translation)}: n-gram is n 元语法 (glossary), not {found}"


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=lambda p: rel(p))
def test_dropout_is_said_as_zan_tui_fa(translation):
    prose = list(texts(translation, comments=False))
    bare = [cell_id for cell_id, text in prose if bare_dropouts(text)]
    assert not bare, f"{named(translation)}: 'dropout' outside 暂退法（dropout） in blocks {bare}"
    glossed = [cell_id for cell_id, text in prose for _ in DROPOUT_GLOSS.finditer(text)]
    assert len(glossed) <= 1, f"{named(translation)}: 暂退法（dropout） glossed in {glossed}: at its first use only"
    if translation.name == "glossary.md":  # a table, not read in order: the gloss is the dropout row's own term
        return
    assert gloss_at_first_use("\n".join(text for _, text in prose)), \
        f"{named(translation)}: 暂退法（dropout） is glossed at the first use of 暂退法 in the file, not later"


def gloss_at_first_use(text):
    """Whether the gloss 暂退法（dropout）, where `text` (a file's prose, in order) has it, is at the first 暂退法."""
    gloss = DROPOUT_GLOSS.search(text)
    return gloss is None or gloss.start() == text.index("暂退法")


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=lambda p: rel(p))
def test_learned_position_embedding_has_one_name(translation):
    found = [(cell_id, name) for cell_id, text in texts(translation) for name in learned_position_names(text)]
    assert not found, f"{named(translation)}: learned positions are 可学习的位置嵌入 (glossary), not {found}"


# an English gloss in ASCII brackets, (Pre-LN), not a call, sqrt(d), nor a label, 错误 (c)
ASCII_GLOSS = re.compile(r"(?<![A-Za-z0-9_])\([A-Za-z][A-Za-z \-]+\)")


def nested_brackets(text):
    """The places where a bracket opens inside a full-width one: （…（English）…）, an aside inside an aside, also
    when the inner gloss is in ASCII brackets, （…(Pre-LN)…）."""
    found, depth = [], 0
    for index, char in enumerate(text):
        if char == "\n":
            depth = 0
        elif char == "（":
            depth += 1
            if depth == 2:
                found.append(text[max(0, index - 20):index + 20])
        elif char == "）":
            depth = max(0, depth - 1)
        elif char == "(" and depth and ASCII_GLOSS.match(text, index):  # the look-behind sees text before index
            found.append(text[max(0, index - 20):index + 20])
    return found


@pytest.mark.parametrize("translation", TRANSLATIONS, ids=lambda p: rel(p))
def test_no_brackets_inside_brackets(translation):
    """A term's English gloss is in brackets, so the sentence around it keeps its asides out of brackets."""
    found = [(cell_id, place) for cell_id, text in texts(translation, comments=False)
             for place in nested_brackets(text)]
    assert not found, f"{named(translation)}: brackets inside brackets in {found}"


def test_the_bracket_rule_catches_the_old_text_of_notebook_08():
    old = "用课程中的模块组装出一个 GPT（前置层归一化（Pre-LN）块、GELU、可学习的位置、权重绑定（weight tying））。"
    assert len(nested_brackets(old)) == 2
    assert len(nested_brackets(old.replace("（Pre-LN）", "(Pre-LN)"))) == 2
    assert not nested_brackets("返回二元组（见 `f(x)` 与 (out, weights)）")
    assert not nested_brackets("层归一化 (LN) 在前")
    assert not nested_brackets("用课程中的模块组装出一个 GPT：前置层归一化（Pre-LN）块、权重绑定（weight tying）。")


@pytest.mark.parametrize("text, n_tuple, dropout, learned", [
    ("禁止重复 n 元组（no-repeat n-gram）", 1, 0, 0),  # the old text of 08 and TEACHING
    ("一个 4 元组只有四个字符", 1, 0, 0),
    ("即 $n$ 元组模型", 1, 0, 0),
    ("即 $ N $元组模型；$n$ 元语法", 1, 0, 0),
    ("返回二元组 `(out, weights)`；禁止重复 n 元语法", 0, 0, 0),
    ("GPU 规模（dropout 为 0.2）", 0, 1, 0),  # the old text of 08 section 11
    ("对这个和施加暂退法（dropout），CPU 运行时概率为 0", 0, 0, 0),
    ("暂退法 (Dropout) 与 DropoutLayer", 0, 0, 0),
    ("可学习的位置编码（learned positional embedding，04）", 0, 0, 1),  # the old text of 08 cell 1
    ("GELU、可学习的位置、权重绑定", 0, 0, 1),
    ("使用可学习位置的仅解码器 GPT", 0, 0, 1),
    ("使用可学习位置嵌入的仅解码器 GPT", 0, 0, 1),
    ("可学习的位置嵌入（04），可学习的位置表的第 26 行", 0, 0, 0),
])
def test_the_rules_catch_the_old_wording(text, n_tuple, dropout, learned):
    assert len(n_tuples(guard.prose(text), text)) == n_tuple
    assert len(bare_dropouts(text)) == dropout
    assert len(learned_position_names(text)) == learned


def test_the_tests_fail_on_the_old_text_of_notebook_08(tmp_path):
    """The rules read a real translation file: 08 with its old wording planted back fails each of them."""
    source = ROOT / "translations" / "zh" / "08_char_gpt.md"
    text = source.read_text(encoding="utf-8")
    planted = (text.replace("禁止重复 n 元语法（no-repeat n-gram）", "禁止重复 n 元组（no-repeat n-gram）", 1)
               .replace("**CPU 运行不用暂退法。**", "**CPU 运行不用 dropout。**", 1)
               .replace("可学习的位置嵌入（learned positions）", "可学习的位置（learned positions）", 1))
    assert planted != text
    copy = tmp_path / source.name
    copy.write_text(planted, encoding="utf-8")
    for path, failing in ((copy, True), (source, False)):
        prose = "\n".join(text for _, text in texts(path, comments=False))
        assert bool(n_tuples(prose)) is bool(bare_dropouts(prose)) is bool(learned_position_names(prose)) is failing


def test_the_file_tests_fail_on_a_planted_math_n_tuple_and_a_late_dropout_gloss(tmp_path):
    """The file tests themselves, on 08 with '$n$ 元组' planted (guard.prose drops the math) and with the gloss
    暂退法（dropout） moved from the first 暂退法 to the last."""
    source = ROOT / "translations" / "zh" / "08_char_gpt.md"
    text = source.read_text(encoding="utf-8")
    first, last = text.index("暂退法（dropout）"), text.rindex("暂退法")
    assert first < last
    moved = text[:first] + "暂退法" + text[first + len("暂退法（dropout）"):last] + "暂退法（dropout）" + \
        text[last + len("暂退法"):]
    for test, planted in ((test_no_n_tuple_for_n_gram, text.replace("n 元语法", "$n$ 元组", 1)),
                          (test_dropout_is_said_as_zan_tui_fa, moved)):
        assert planted != text
        copy = tmp_path / source.name
        copy.write_text(planted, encoding="utf-8")
        with pytest.raises(AssertionError):
            test(copy)
        test(source)


def test_the_rules_read_translated_docstrings(tmp_path):
    """A translated docstring is prose a reader reads: a word the rules reject there fails as in a comment."""
    translation = tmp_path / "99_x.md"
    code = 'def f(x):\n    """返回 x 的 n 元组和可学习的位置编码。"""\n    return x  # 注释\n'
    translation.write_text(f"<!-- code c1 | en 000000000000 -->\n```python\n{code}```\n", encoding="utf-8")
    [(cell_id, text)] = texts(translation)
    assert cell_id == "c1" and "# 注释" in text
    assert n_tuples(text) == ["n 元组"] and learned_position_names(text) == ["可学习的位置"]
