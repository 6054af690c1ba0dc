"""Notebook 14's exercise checkers accept right answers and reject the usual mistakes with the right hint."""

import torch

from shared import exercises as ex
from shared.pretrained import chatml_prompt, dequantize_q4_1, permute_qk, unpermute_qk
from shared.pretrained.chat import DEFAULT_SYSTEM

from .helpers import accepts, rejects, verdict

ALL = ex.CHECKERS["14"]


def q4_1(swap=False, minimum=True, interleave=False, centred=False):
    def dequantize(block):
        d, m = (block[i : i + 2].view(torch.float16).float() for i in ((2, 0) if swap else (0, 2)))
        low, high = block[4:] & 0x0F, block[4:] >> 4
        q = (torch.stack([low, high], 1).flatten() if interleave else torch.cat([low, high])).float()
        return d * (q - 8 if centred else q) + (m if minimum else 0)

    return dequantize


def test_dequantize_q4_1(capsys):
    accepts(ex.check_dequantize_q4_1, q4_1(), capsys)
    accepts(ex.check_dequantize_q4_1, dequantize_q4_1, capsys)
    rejects(ex.check_dequantize_q4_1, q4_1(swap=True), capsys, "scale and the minimum are swapped")
    rejects(ex.check_dequantize_q4_1, q4_1(minimum=False), capsys, "add the minimum")
    rejects(ex.check_dequantize_q4_1, q4_1(interleave=True), capsys, "not neighbours")
    rejects(ex.check_dequantize_q4_1, q4_1(centred=True, minimum=False), capsys, "not centred")
    rejects(ex.check_dequantize_q4_1, lambda b: torch.cat([b[4:] & 15, b[4:] >> 4]).float()[:16], capsys,
            "two weights")


def test_unpermute_qk(capsys):
    accepts(ex.check_unpermute_qk, lambda q, k, h, h_kv: (unpermute_qk(q, h), unpermute_qk(k, h_kv)), capsys)
    rejects(ex.check_unpermute_qk, lambda q, k, h, h_kv: (permute_qk(q, h), permute_qk(k, h_kv)), capsys,
            "converter's own reshape used again")
    rejects(ex.check_unpermute_qk, lambda q, k, h, h_kv: (unpermute_qk(q, h), unpermute_qk(k, h)), capsys,
            "K has n_kv_heads heads")
    rejects(ex.check_unpermute_qk, lambda q, k, h, h_kv: (q, k), capsys, "unchanged")
    d_k_of_q = lambda q, h: q.size(0) // h  # noqa: E731
    rejects(ex.check_unpermute_qk, lambda q, k, h, h_kv: (unpermute_qk(q, h), k.reshape(
        h, d_k_of_q(q, h) // 2, 2, -1).transpose(1, 2).reshape(k.shape)), capsys, "K has n_kv_heads heads")
    rejects(ex.check_unpermute_qk, lambda q, k, h, h_kv: unpermute_qk(q, h), capsys, "tuple (w_q, w_k)")


def test_chatml_prompt(capsys):
    accepts(ex.check_chatml_prompt, chatml_prompt, capsys)
    rejects(ex.check_chatml_prompt, lambda m: chatml_prompt(m).removesuffix("<|im_start|>assistant\n"), capsys,
            "assistant's cue")
    rejects(ex.check_chatml_prompt, lambda m: chatml_prompt(m).replace("<|im_end|>\n", "<|im_end|>"), capsys,
            "AND a newline")
    rejects(ex.check_chatml_prompt, lambda m: "".join(f"<|im_start|>{x['role']}\n{x['content']}<|im_end|>\n"
                                                      for x in m) + "<|im_start|>assistant\n", capsys,
            "default")
    rejects(ex.check_chatml_prompt, lambda m: "".join(f"<|im_start|>{x['role']}: {x['content']}<|im_end|>\n"
                                                      for x in m if x["role"] != "system") and chatml_prompt(m)
            .replace("user\nWhat", "user: What"), capsys, "not ': '")
    rejects(ex.check_chatml_prompt, lambda m: chatml_prompt([{"role": "system", "content": DEFAULT_SYSTEM}, *m]),
            capsys, "only when")
    result, out = verdict(ex.check_chatml_prompt, lambda m: None, capsys)
    assert result is False and "return" in out
