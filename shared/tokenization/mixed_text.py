"""A mixed test text for tokenizers: English, code, numbers, Chinese, Japanese, emoji, Cyrillic, Arabic and ChatML
control tokens, in pieces put together in a seeded order so that they meet at many different boundaries."""

from __future__ import annotations

import random

from ..validation import check_int

PIECES = {
    "english": [
        "The quick brown fox jumps over the lazy dog.", "I'm sure you'll see: they've gone, we'd stay, she's here.",
        "Don't SHOUT! Isn't it odd?  Two spaces, then three   and a tab\there.", "e-mail: someone@example.org",
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",
        "antidisestablishmentarianism, pneumonoultramicroscopic; naïve café, résumé, Zürich, São Paulo.",
        "  leading spaces, trailing spaces   \n\n\n",
        "Hello\r\nWindows\r\nline ends", "(parentheses) [brackets] {braces}",
        "“curly quotes” and ‘single ones’ — an em dash – an en dash … an ellipsis", "UPPER lower MiXeD CamelCaseWords",
    ],
    "code": [
        "def merge(ids, pair, new_id):\n    out = []\n    for i in range(len(ids)):\n        out.append(ids[i])\n",
        "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }", "x = torch.randn(2, 3, 4)  # (B, T, C)",
        "if __name__ == \"__main__\":\n\tmain()\n", "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
        "{\"key\": [1, 2.5, -3e-4, null, true], \"nested\": {\"a\": \"b\"}}",
        "<div class=\"x\">&amp; &lt;tag&gt;</div>",
        "$ pip install --upgrade pip && echo $HOME | grep -v '^#'", "λx.x   ->   fn(a: i32) -> Result<(), String>",
    ],
    "numbers": [
        "3.14159265358979", "1,234,567.89", "2024-12-06T07:45:00Z", "+1 (555) 010-9999", "0x7fff_ffff", "1e-10",
        "½ cup, ¾ mile, x² + y² = z², ① ② ③", "٣٤٥ and ३४५ and 三百四十五", "100%", "Ⅻ o'clock", "007 0.5 .5 5.",
    ],
    "chinese": [
        "自然语言处理是人工智能的一个重要方向。", "注意力机制让模型在每一步都能看到整个序列。",
        "你好，世界！今天天气很好。",
        "分词器把文本切成词元（token），再把词元变成编号。", "《论语》：学而时习之，不亦说乎？", "２０２４年１２月６日",
    ],
    "japanese": ["東京は日本の首都です。", "ひらがなとカタカナ、そして漢字。", "トークナイザーのテスト"],
    "emoji": [
        "👍 👍🏻 👍🏽 👍🏿", "👨‍👩‍👧‍👦 family, 👩‍💻 coder, 🏳️‍🌈 flag", "🇫🇷🇩🇪🇯🇵🇨🇳 flags", "❤️ ♥ ★☆ ✓ ✗",
        "🙂🙃😂🤖🚀🔥", "🧑🏾‍🚀 astronaut", "1️⃣ #️⃣ keycaps",
    ],
    "cyrillic": ["Привет, мир! Как дела?", "Съешь же ещё этих мягких французских булок, да выпей чаю.",
                 "Ёлка, щука, объём"],
    "other": ["مرحبا بالعالم", "שלום עולם", "Γειά σου Κόσμε", "안녕하세요 세계", "नमस्ते दुनिया", "ผู้ใหญ่บ้าน"],
    "control": [
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n", "<|im_start|>user\nHi!<|im_end|>\n",
        "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n", "<|endoftext|>", "text<|endoftext|>more",
        "<|im_start|><|im_end|>", "< |im_start| > is not a control token", "<|im_start",
    ],
}
SEPARATORS = [" ", "\n", "", "  ", "\n\n", "\t", " \n", ". ", ", "]


def mixed_text(n_chars: int = 10_000, seed: int = 0) -> str:
    """At least `n_chars` characters: every piece once, then pieces drawn at random, joined by random separators."""
    check_int("n_chars", n_chars, 1)
    rng = random.Random(seed)
    pieces = [p for group in PIECES.values() for p in group]
    order = list(pieces)
    out, length = [], 0
    while length < n_chars:
        piece = order.pop(0) if order else rng.choice(pieces)
        if rng.random() < 0.3:  # cut a piece at a random character, so that words meet in new ways
            piece = piece[rng.randrange(len(piece)):]
        text = piece + rng.choice(SEPARATORS)
        out.append(text)
        length += len(text)
    return "".join(out)
