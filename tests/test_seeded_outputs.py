"""Seeded models give the outputs stored in tests/data/seeded_model_outputs.pt.

The file was written before the package was split into its layers (model, tasks, training, generation,
teaching), by the code that `outputs()` below calls, so a restructuring that changes what any model computes
fails here. The outputs must agree to 1e-5: not bit for bit, since even the torch version that wrote the file
may round differently on another CPU, whose kernels take other instructions.
"""

import math
from pathlib import Path

import pytest
import torch

from shared.gpt import GPT, GPTConfig
from shared.lengthgen import CoupledGPT
from shared.reversal import make_model
from shared.transformer import Transformer, TransformerConfig

STORED = Path(__file__).parent / "data" / "seeded_model_outputs.pt"


def gpt_configs() -> dict[str, GPTConfig]:
    small = dict(vocab_size=17, block_size=16, n_layers=2, n_heads=2, d_model=16)
    return {
        "gpt_default": GPTConfig(**small),
        "gpt_modern": GPTConfig(**{**small, "n_heads": 4}, norm="rmsnorm", activation="swiglu", n_kv_heads=2,
                                fused_qkv=True, bias=False, position="rope"),
        "gpt_alibi": GPTConfig(**small, position="alibi"),
        "gpt_sinusoidal": GPTConfig(**{**small, "n_layers": 1}, position="sinusoidal"),
    }


@torch.no_grad()
def outputs() -> dict:
    tokens = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(1))
    out = {}
    for name, config in gpt_configs().items():
        torch.manual_seed(0)
        model = GPT(config).eval()
        out[name] = model(tokens)
        out[name + "_weights"] = (model(tokens, need_weights=True), model.attention_maps())
    for position in ("sinusoidal", "rope", "learned"):
        torch.manual_seed(0)
        config = TransformerConfig(17, 15, d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=32,
                                   dropout=0.1, max_len=16, position=position)
        model = Transformer(config).eval()
        src = tokens.clone()
        src[1, 9:] = 0  # padding
        out["transformer_" + position] = model(src, tokens[:, :10] % 15, need_weights=True)
        out["transformer_" + position + "_cross"] = model.attention_maps("cross")
    for arch, gpt_class in (("decoder_only", CoupledGPT), ("encoder_decoder", GPT)):
        torch.manual_seed(0)
        model = make_model(arch, 16, 2, 1, gpt_class=gpt_class).eval()
        x = torch.randint(3, 13, (2, 9), generator=torch.Generator().manual_seed(2))
        out[f"reversal_{arch}"] = model(x) if arch == "decoder_only" else model(x, x)
    return out | training_and_cache_outputs(tokens)


@torch.no_grad()
def training_and_cache_outputs(tokens) -> dict:
    """Training mode (dropout masks, randomized position ids drawn after a seed) and decoding with KV caches."""
    small = dict(vocab_size=17, block_size=16, n_layers=2, n_heads=2, d_model=16)
    out = {}
    for name, config in (("gpt_train_dropout", GPTConfig(**small, dropout=0.1)),
                         ("gpt_train_randomized_rope", GPTConfig(**small, position="rope", randomized_positions=True,
                                                                 max_position=40))):
        torch.manual_seed(0)
        model = GPT(config).train()
        torch.manual_seed(3)  # the dropout masks and the random position ids
        out[name] = model(tokens)
    torch.manual_seed(0)
    model = GPT(GPTConfig(**small)).eval()
    caches = model.new_caches()
    steps = [model(tokens[:, :5], caches=caches)] + [model(tokens[:, t : t + 1], caches=caches) for t in range(5, 12)]
    out["gpt_cached"] = torch.cat(steps, dim=1)  # (2, 12, 17): a 5-token prompt, then one token per step
    torch.manual_seed(0)
    config = TransformerConfig(17, 15, d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=32,
                               dropout=0.1, max_len=16)
    model = Transformer(config).train()
    torch.manual_seed(3)
    out["transformer_train_dropout"] = model(tokens, tokens[:, :10] % 15)
    return out


def flatten(value) -> list[torch.Tensor]:
    return [t for item in value for t in flatten(item)] if isinstance(value, tuple) else [value]


def test_seeded_models_compute_what_they_computed_before_the_restructuring():
    stored = torch.load(STORED, weights_only=True)
    stored.pop("torch")  # the version that wrote the file
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the file was written with one thread
    try:
        now = outputs()
    finally:
        torch.set_num_threads(threads)
    assert sorted(now) == sorted(stored)
    for name in stored:
        for got, want in zip(flatten(now[name]), flatten(stored[name]), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=name)


def test_the_comparison_sees_a_changed_model(monkeypatch):
    """A planted change (GPT-2's residual-projection init scaled by 1 instead of 1/sqrt(2 n_layers)) is seen.

    The change is made on the built model (its public blocks), not inside gpt.py, so it does not depend on how
    gpt.py computes anything; it draws no random numbers, so every other weight stays as it was."""
    build = GPT.__init__

    def unscaled(self, config, *args, **kwargs):
        build(self, config, *args, **kwargs)
        with torch.no_grad():
            for block in self.blocks:
                for proj in (block.attn.w_o, block.ff.linear2):
                    proj.weight.mul_(math.sqrt(2 * config.n_layers))  # std 0.02, not 0.02 / sqrt(2 n_layers)

    monkeypatch.setattr(GPT, "__init__", unscaled)
    stored = torch.load(STORED, weights_only=True)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(outputs()["gpt_default"], stored["gpt_default"], rtol=1e-5, atol=1e-5)
