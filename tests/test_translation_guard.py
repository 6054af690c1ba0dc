"""What a translated cell must keep of its English cell, so that a bumped marker cannot hide a change of meaning.

- Numbers, inline code spans and link targets of the English cell, in the translation (links as the build rewrites
  them).
- Glossary terms: each term the English says, as often, in the glossary's Chinese; none of the words to avoid,
  anywhere in the Chinese edition (prose, code comments and translated docstrings).
- A guard-skip line exempts one item in one cell, says why, and must be used.
"""

import re

import pytest

from .translation_helpers import (
    GLOSSARY,
    PILOT,
    ROOT,
    blocks_of,
    build,
    bump_markers,
    check,
    common,
    copy_of_the_edition,
    guard,
    links,
    load,
    rel,
    terms,
    without_exempted,
)

MASKS = ROOT / "notebooks" / "03_masks.ipynb"


def problems(english: str, chinese: str, link_rewrite=None) -> list[str]:
    return guard.kept_problems(english, chinese, GLOSSARY, link_rewrite)


# ------------------------------------------------------------------------------- the marker bump that must fail


def test_a_change_of_meaning_fails_the_check_after_only_the_marker_is_bumped(tmp_path):
    """'Only *keys* need masking' becomes 'Only *queries* need masking'; the translator bumps the hash, nothing else."""
    root = copy_of_the_edition(tmp_path, MASKS)
    english = root / rel(MASKS)
    bump_markers(root, english)  # a copy fresh to begin with, whatever the translators are doing meanwhile
    before = [line for line in check.check(root)[0] if line.startswith("  problem")]
    nb = load(english)
    cell = next(c for c in nb["cells"] if "Only *keys* need masking" in common.source(c))
    cell["source"] = common.lines(common.source(cell).replace("Only *keys*", "Only *queries*"))
    english.write_text(build.dumps(nb), encoding="utf-8")
    lines, failed = check.check(root)
    assert failed and any(line.strip().startswith(f"stale    {cell['id']}") for line in lines)
    assert bump_markers(root, english) == 1
    lines, failed = check.check(root)
    new = [line for line in lines if line.startswith("  problem") and line not in before]
    assert failed and not any(line.strip().startswith("stale") for line in lines), "\n".join(lines)
    assert len(new) == 1 and cell["id"] in new[0] and "'queries'" in new[0] and "查询" in new[0], "\n".join(lines)


# ------------------------------------------------------------------------------------ numbers, code and links


def test_numbers_are_normalised():
    text = "1,115,394 characters, loss -0.138, 10 % faster, d_k=64, (1, 2) and 3.5e-4"
    assert guard.numbers(text) == {"1115394", "0.138", "10", "64", "1", "2", "3.5", "4"}
    assert guard.numbers("1115394 个字符") == guard.numbers("1,115,394 characters")


def test_a_dropped_number_is_reported():
    nb, blocks = load(PILOT), blocks_of(common.translation_for(PILOT))
    block = next(b for b in blocks if b.kind == "cell" and re.search(r"\d", b.text) and "练习 1" in b.text)
    block.text = block.text.replace("练习 1", "练习一")  # planted: the digit spelled out
    report = check.review(nb, blocks, GLOSSARY)
    assert report.problems == [(block.cell_id, "the English number 1 is missing")]


def test_code_spans_are_found_across_line_breaks_and_outside_fences():
    text = "Use `a(x,\n  y)` and ``b`c``.\n\n```python\n`not a span`\n```\n"
    assert guard.code_spans(text) == {"a(x, y)", "b`c"}


@pytest.mark.parametrize("chinese,lost", [
    ("用 `causal_mask(T)`，见[第 3 节](03_masks.ipynb#the-causal-mask)。", []),
    ("用 `padding_mask(T)`，见[第 3 节](03_masks.ipynb#the-causal-mask)。", ["`causal_mask(T)`"]),  # planted
    ("用 `causal_mask(T)`，见[第 3 节](03_masks.ipynb)。", ["03_masks.ipynb#the-causal-mask"]),  # planted
    ("用 `causal_mask(T)`，见第 3 节。", ["03_masks.ipynb#the-causal-mask"]),
])
def test_code_spans_and_link_targets_are_kept(chinese, lost):
    english = "Use `causal_mask(T)`; see [section 3](03_masks.ipynb#the-causal-mask)."
    found = problems(english, chinese)
    assert len(found) == len(lost) and all(item in p for item, p in zip(lost, found)), found


def test_links_and_notebook_paths_compare_as_the_build_writes_them():
    rewrite = links.Links("notebooks", "notebooks/zh", frozenset({"notebooks/solutions/03_solutions.ipynb"}))
    english = "Solutions: [`notebooks/solutions/03_solutions.ipynb`](solutions/03_solutions.ipynb); [map](../README.md)"
    span_as_built = ("解答：[`notebooks/zh/solutions/03_solutions.ipynb`](solutions/03_solutions.ipynb)；"
                     "[总览](../README.md)")
    assert problems(english, span_as_built, rewrite) == []  # the build writes that span itself
    assert problems(english, english.replace("Solutions", "解答"), rewrite) == []
    link_as_built = span_as_built.replace("../README.md", "../../README.zh.md")  # links are written as in English
    assert problems(english, link_as_built, rewrite) == ["the English link target ../README.md is missing"]


# ---------------------------------------------------------------------------------------------- glossary terms

ISSUE_TERMS = {  # the terms the Chinese edition fixed once (issue 19); the glossary's 中文 column must agree
    "attention": "注意力", "scaled dot-product attention": "缩放点积注意力", "multi-head attention": "多头注意力",
    "mask": "掩码", "padding mask": "填充掩码", "causal mask": "因果掩码", "positional encoding": "位置编码",
    "residual connection": "残差连接", "layer normalization": "层归一化", "feed-forward network (FFN)": "前馈网络",
    "encoder": "编码器", "decoder": "解码器", "cross-attention": "交叉注意力", "teacher forcing": "教师强制",
    "greedy decoding": "贪心解码", "beam search": "束搜索", "exposure bias": "曝光偏差", "label smoothing": "标签平滑",
    "learning-rate warm-up": "学习率预热", "KV cache": "KV 缓存", "RoPE": "旋转位置编码",
}
SECOND_PASS = {  # one term per idea, decided in the second pass of the Chinese edition
    "batch": "批量", "masking": "掩蔽", "encoder-decoder": "编码器-解码器", "perplexity": "困惑度",
    "exact match": "精确匹配", "probe set": "抽查集", "residual stream": "残差流",
    "fused attention kernel": "融合注意力算子", "decoder-only model (GPT)": "仅解码器模型",
}


def test_the_glossary_holds_one_term_per_idea_and_the_words_to_avoid():
    rows, avoid = GLOSSARY
    assert {term: terms.chinese_term(rows[term]) for term in {**ISSUE_TERMS, **SECOND_PASS}} == \
        {**ISSUE_TERMS, **SECOND_PASS}
    assert rows["layer normalization"] == "层归一化（layer normalization；d2l-zh 译作层规范化）"
    assert "暴露偏差" in terms.chinese_forms(rows["exposure bias"]) and "EM" in terms.chinese_forms(rows["exact match"])
    avoided = {word for word, _, _ in avoid}
    assert {"遮罩", "蒙版", "前向网络", "位置嵌入", "批次", "屏蔽", "完全匹配率", "探针集", "编码器–解码器"} <= avoided
    assert "暴露偏差" not in avoided
    assert not avoided & {terms.chinese_term(cell) for cell in rows.values()}, "a word to avoid is also a glossary term"


def test_the_shifted_targets_row_shifts_the_input_right_and_the_labels_left():
    rows, _ = GLOSSARY
    definition = next(line for line in (ROOT / "notebooks" / "glossary.md").read_text(encoding="utf-8").splitlines()
                      if line.startswith("| shifted targets |"))
    assert "`tgt_in`" in definition and "shifted right" in definition and "shifted left" in definition
    assert "右移" in rows["shifted targets"] and "左移" in rows["shifted targets"]


ENGLISH = "A padding **mask** hides keys; see [the KV cache](08_char_gpt.ipynb)."


@pytest.mark.parametrize("chinese,expected", [
    ("填充掩码（padding mask）会遮住键；见 [KV 缓存](08_char_gpt.ipynb)。", []),
    ("填充掩码会遮住键；见 [KV缓存](08_char_gpt.ipynb)。", []),  # with or without the space after KV
    ("填充遮罩会遮住键；见 [KV 缓存](08_char_gpt.ipynb)。", ["'padding mask'", "'遮罩'"]),  # planted
    ("填充掩码会遮住查询；见 [KV 缓存](08_char_gpt.ipynb)。", ["'keys'"]),  # planted: another word
    ("填充掩码会遮住键；见 [键值对缓存](08_char_gpt.ipynb)。", ["'KV cache'"]),  # planted
])
def test_term_problems_name_the_missing_term_and_the_word_to_avoid(chinese, expected):
    found = guard.term_problems(ENGLISH, chinese, *GLOSSARY)
    assert len(found) == len(expected) and all(e in p for e, (_, p) in zip(expected, found)), found


def test_terms_are_counted_so_a_cell_that_speaks_of_both_still_catches_a_swap():
    english = "Padding queries attend to real tokens; only *queries* need masking, and every query sees key 0."
    chinese = "填充查询仍会关注真实的词元；只有*键*需要掩蔽，而每个查询都能看到键 0。"
    assert [item for item, _ in guard.term_problems(english, chinese, *GLOSSARY)] == ["query"]


def test_english_forms_are_whole_words_with_plurals_and_both_spellings():
    forms = {form.english: form for form in terms.term_forms(GLOSSARY[0])}
    assert forms["query"].pattern.search("two queries") and forms["layer normalization"].pattern.search(
        "Layer normalisation")
    assert forms["learning-rate warm-up"].pattern.search("a learning-rate warmup")
    assert not forms["mask"].pattern.search("masking") and not forms["decoder-only"].pattern.search("decoder only")
    assert not forms["multi-head attention"].pattern.search("MultiHeadAttention")


def test_names_and_titles_may_stay_in_english():
    assert guard.term_problems("RoPE and ALiBi.", "RoPE 与 ALiBi。", *GLOSSARY) == []
    assert guard.term_problems("See *What Algorithms Can Transformers Learn? A Study in Length Generalization*.",
                               "见 *What Algorithms Can Transformers Learn? A Study in Length Generalization*。",
                               *GLOSSARY) == []
    assert guard.term_problems("With warmup = 4000 the rate stays low.", "warmup = 4000 时学习率一直很低。",
                               *GLOSSARY) == []


def test_terms_inside_code_links_and_math_are_ignored():
    english = "Call `causal_mask(T)` or read [this](https://example.org/attention) on $\\text{mask}$."
    assert guard.term_problems(english, "调用 `causal_mask(T)`，或阅读[这篇](https://example.org/attention)。",
                               *GLOSSARY) == []
    assert guard.term_problems("A mask.", "一个掩码，不是 `遮罩`。", *GLOSSARY) == []


def test_a_word_to_avoid_is_allowed_where_the_english_says_it_or_the_glossary_term_holds_it():
    english = "Learned position embeddings end at max_len; a positional encoding does not."
    assert guard.term_problems(english, "可学习的位置嵌入止于 max_len，位置编码则不然。", *GLOSSARY) == []
    assert guard.term_problems("A positional encoding.", "一个位置嵌入。", *GLOSSARY)
    cited = "层归一化（layer normalization；d2l-zh 译作层规范化）"
    assert guard.term_problems("Layer normalization.", cited, *GLOSSARY) == []
    assert guard.term_problems("Layer normalization.", "层归一化，也叫层规范化。", *GLOSSARY)


def test_review_reports_a_planted_wrong_term():
    nb, blocks = load(PILOT), blocks_of(common.translation_for(PILOT))
    block = next(b for b in blocks if "键（key）" in b.text)
    block.text = block.text.replace("在键（key）上做 softmax", "对遮罩后的键（key）做 softmax")  # planted
    report = check.review(nb, blocks, GLOSSARY)
    assert report.problems and "遮罩" in report.problems[0][1]


# -------------------------------------------------------------------------------------------- the escape hatch


def test_a_guard_skip_line_exempts_one_item_of_one_cell_and_must_be_used():
    english = "Its key ideas, in 3 steps."
    chinese = "它的核心思想，分 3 步。"
    assert [p for p in problems(english, chinese)] and "'key'" in problems(english, chinese)[0]
    skipped = '<!-- guard-skip "key": "key ideas", not an attention key -->\n' + chinese
    assert problems(english, skipped) == []
    unused = '<!-- guard-skip "value": no reason to -->\n' + skipped
    assert problems(english, unused) == ['guard-skip "value" exempts nothing: remove it']
    assert "needs a quoted item and a reason" in problems(english, '<!-- guard-skip "key" -->\n' + chinese)[-1]
    assert common.published(skipped) == chinese  # the build drops the line


# ---------------------------------------------------------------------- the words to avoid, in the whole edition


def _comments_and_docstrings(code):
    """What a reader reads in a code cell: its comments and its docstrings' text."""
    return guard.comments(code, with_docstrings=True)


def chinese_cells():
    """(Chinese file, cell id, the English text, the Chinese text) for every cell of every Chinese notebook (prose
    of markdown cells, comments and docstrings of code cells) and the whole of each Chinese document."""
    for built in sorted(common.zh_folder_files(ROOT)) + [ROOT / "README.zh.md"]:
        english = next(e for e in common.english_notebooks() + common.english_documents()
                       if common.built_for(e) == built)
        if common.is_document(english):  # section by section, so that a block's guard-skip lines hold
            english_text = guard.prose(english.read_text(encoding="utf-8"))
            for block in blocks_of(common.translation_for(english)):
                yield built, block.cell_id, english_text, without_exempted(block.text)
            continue
        cells = {cell["id"]: cell for cell in load(english)["cells"]}
        for cell in load(built)["cells"]:
            text = guard.prose if cell["cell_type"] == "markdown" else _comments_and_docstrings
            yield built, cell["id"], text(common.source(cells[cell["id"]])), text(common.source(cell))


def test_no_chinese_notebook_or_document_uses_a_word_to_avoid():
    found = [f"{rel(built)} {cell_id}: {message}" for built, cell_id, english, chinese in chinese_cells()
             for _, message in guard.avoid_problems(english, chinese, *GLOSSARY)]
    assert not found, "\n".join(found)


def test_a_word_to_avoid_in_a_translated_docstring_is_found():
    code = 'def f(x):\n    """用可学习的位置编码。"""\n    return x  # 返回 x\n'
    assert "返回 x" in _comments_and_docstrings(code)
    found = [word for word, _ in guard.avoid_problems("", _comments_and_docstrings(code), *GLOSSARY)]
    assert found == ["可学习的位置编码"]
