"""Talking to an instruction-tuned model: the ChatML prompt written out, and a reply generated with the KV cache.

ChatML (SmolLM2's template): every message is `<|im_start|>{role}\\n{content}<|im_end|>\\n`; a conversation that
does not open with a system message gets SmolLM2's default one; the prompt ends with `<|im_start|>assistant\\n`, the
cue for the model to write the assistant's turn, which it closes with `<|im_end|>`.
"""

from __future__ import annotations

import torch

from ..generation.lm import generate
from ..gpt import GPT

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
ROLES = ("system", "user", "assistant")
END = "<|im_end|>"


def chatml_prompt(messages: list[dict], add_generation_prompt: bool = True, system: str = DEFAULT_SYSTEM) -> str:
    """[{"role": ..., "content": ...}, ...] -> the ChatML text; with add_generation_prompt, the assistant's cue."""
    if not isinstance(system, str):
        raise TypeError(f"system must be a str (the default system message), got {type(system).__name__}")
    if not isinstance(add_generation_prompt, bool):
        raise TypeError(f"add_generation_prompt must be a bool, got {type(add_generation_prompt).__name__}")
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"messages must be a non-empty list of {{'role', 'content'}} dicts, got {messages!r}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ValueError(f"messages[{i}] must be a dict with a role in {ROLES} and a str content, got {m!r}")
    if messages[0]["role"] != "system":
        messages = [{"role": "system", "content": system}, *messages]
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}{END}\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def reply(model: GPT, tokenizer, messages: list[dict], max_new_tokens: int, **knobs) -> str:
    """The assistant's answer to `messages`: up to max_new_tokens tokens, cut at <|im_end|>.

    tokenizer: encode(text) -> ids (ChatML's markers as their ids) and decode(ids) -> text. knobs: those of
    `shared.generation.lm.generate` (temperature, top_k, top_p, repetition_penalty, generator, ...).
    """
    end = tokenizer.encode(END)
    if len(end) != 1:
        raise ValueError(f"the tokenizer must encode {END} as one id (a special token), got {end}")
    prompt = torch.tensor([tokenizer.encode(chatml_prompt(messages))])  # (1, T)
    new = generate(model, prompt, max_new_tokens, **knobs)[0, prompt.size(1):].tolist()
    return tokenizer.decode(new[: new.index(end[0])] if end[0] in new else new)
