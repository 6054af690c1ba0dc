"""Exercise checkers for notebook 14 (a real LLM in your own code): dequantize a Q4_1 block, undo the converter's
q/k row permutation, and write the ChatML prompt.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import gguf
import numpy as np
import torch

from ..pretrained import chatml_prompt, dequantize_q4_1, permute_qk, unpermute_qk
from ..pretrained.chat import DEFAULT_SYSTEM
from .feedback import Checker, exercise, random_tensor


def _q4_1_block(seed: int) -> torch.Tensor:
    """(20,) uint8: one Q4_1 block of 32 random weights, made by gguf's own quantizer."""
    w = np.random.default_rng(seed).normal(0.3, 1.0, (1, 32)).astype(np.float32)
    return torch.from_numpy(gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q4_1)[0])


def _q4_1_mistakes(block: torch.Tensor) -> list[tuple[torch.Tensor, str]]:
    d, m = (block[i : i + 2].view(torch.float16).float() for i in (0, 2))
    codes = block[4:]
    low, high = codes & 0x0F, codes >> 4
    q = torch.cat([low, high]).float()
    return [
        (m * q + d, "the scale and the minimum are swapped: the first float16 (bytes 0-1) is the scale d, the second "
                    "(bytes 2-3) the minimum m, and w = d * q + m."),
        (d * q, "add the minimum: Q4_1 stores w = d * q + m (Q4_0, without a minimum, is d * (q - 8))."),
        (d * (q - 8), "Q4_1's codes are not centred: w = d * q + m, with q in 0..15."),
        (d * torch.stack([low, high], 1).flatten().float() + m, "a byte's two nibbles are not neighbours: byte j holds "
         "weight j in its low nibble and weight j + 16 in its high one, so all low nibbles come first "
         "(weights 0..15)."),
        (d * torch.cat([high, low]).float() + m, "the low nibble (x & 0x0F) is weight j, the high one (x >> 4) weight "
                                                 "j + 16: they are the other way round."),
    ]


@exercise("dequantize one Q4_1 block")
def check_dequantize_q4_1(c: Checker) -> None:
    """fn(block (20,) uint8) -> (32,) float32: d = bytes 0-1, m = bytes 2-3 (float16), codes in 16 bytes; d q + m."""
    for case, block in {"a block of gguf's quantizer": _q4_1_block(0), "another block": _q4_1_block(1)}.items():
        expected = dequantize_q4_1(block)
        c.close(c.call(case, block.clone()), expected, case, "weights", "(32 weights per block)",
                variants=_q4_1_mistakes(block), atol=1e-6, rtol=1e-6,
                shape_hints={(16,): "every byte holds two weights: its low and its high nibble.",
                             (18,): "bytes 0-3 are two float16 numbers, not codes: the codes are bytes 4-19."})
        c.passed()


@exercise("undo the q/k row permutation")
def check_unpermute_qk(c: Checker) -> None:
    """fn(w_q, w_k, n_heads, n_kv_heads) -> (w_q, w_k) in Hugging Face's (half-split) row order."""
    cases = {"4 query heads, 2 key/value heads, d_k = 8": (4, 2, 8, 12),
             "2 query heads, 1 key/value head, d_k = 4": (2, 1, 4, 6)}
    for case, (h, h_kv, d_k, d_model) in cases.items():
        hf_q, hf_k = random_tensor(h * d_k, d_model, seed=1), random_tensor(h_kv * d_k, d_model, seed=2)
        w_q, w_k = permute_qk(hf_q, h), permute_qk(hf_k, h_kv)  # the file's rows
        got = c.unpack(c.call(case, w_q.clone(), w_k.clone(), h, h_kv), case, ("w_q", "w_k"))
        for name, out, w, heads, expected in (("w_q", got[0], w_q, h, hf_q), ("w_k", got[1], w_k, h_kv,
                                                                                          hf_k)):
            variants = [(permute_qk(w, heads), "that is the converter's own reshape used again: to undo it, "
                         "reshape the rows as (heads, d_k/2, 2) and swap the last two, (heads, 2, d_k/2)."),
                        (w, "the rows come back unchanged: the file's rows must be reordered.")]
            if name == "w_k":
                k_hint = ("K has n_kv_heads heads, not n_heads: take K's head count from n_kv_heads (its rows are "
                          "n_kv_heads * d_k).")
                if (h_kv * d_k) % (2 * h) == 0:
                    variants.append((unpermute_qk(w, h), k_hint))
                if (h_kv * d_k * d_model) % (h * d_k) == 0:  # Q's heads and d_k, the rest left to -1
                    variants.append((w.reshape(h, d_k // 2, 2, -1).transpose(1, 2).reshape(w.shape), k_hint))
            c.close(out, expected, case, name, "(heads * d_k, d_model)", variants=variants, atol=0, rtol=0)
        c.passed()


def _chat_mistakes(messages: list[dict]) -> list[tuple[str, str]]:
    right = chatml_prompt(messages)
    system = messages[0]["role"] == "system"
    wrong = [
        (right.removesuffix("<|im_start|>assistant\n"), "end with the assistant's cue '<|im_start|>assistant\\n', "
                                                        "so that the model writes the next turn."),
        (right.replace("<|im_end|>\n", "<|im_end|>"), "each message ends with '<|im_end|>' AND a newline."),
        (right.replace("<|im_end|>\n<|im_start|>", "\n<|im_end|>\n<|im_start|>"), "no newline before <|im_end|>: "
                                                                                  "it follows the content directly."),
    ]
    if system:
        wrong.append((chatml_prompt([{"role": "system", "content": DEFAULT_SYSTEM}, *messages]), "the default system "
                      "message goes first only when the conversation has no system message of its own."))
    else:
        wrong.append((chatml_prompt([{"role": "system", "content": ""}, *messages])[len(
            "<|im_start|>system\n<|im_end|>\n"):], "a conversation without a system message gets SmolLM2's default "
                     "one first (shared.pretrained.chat.DEFAULT_SYSTEM)."))
    for m in messages:
        wrong.append((right.replace(f"{m['role']}\n{m['content']}", f"{m['role']}: {m['content']}"),
                      "the role and the content are separated by a newline, not ': '."))
    return wrong


@exercise("the ChatML prompt")
def check_chatml_prompt(c: Checker) -> None:
    """fn(messages: list of {"role", "content"}) -> str: ChatML with SmolLM2's default system message and the cue."""
    cases = {
        "one user message": [{"role": "user", "content": "What is the capital of France?"}],
        "a system message and two turns": [{"role": "system", "content": "Answer in one word."},
                                           {"role": "user", "content": "Capital of Italy?"},
                                           {"role": "assistant", "content": "Rome."},
                                           {"role": "user", "content": "And of Spain?"}],
    }
    for case, messages in cases.items():
        got = c.call(case, [dict(m) for m in messages])
        expected = chatml_prompt(messages)
        if not isinstance(got, str):
            c.fail(case, f"the prompt should be a str, got {type(got).__name__}.",
                   "did you forget the `return` statement?" if got is None else "join the pieces into one string.")
        hint = next((h for text, h in _chat_mistakes(messages) if got == text), "")
        c.equal(got, expected, case, "the prompt", hint)
        c.passed()
