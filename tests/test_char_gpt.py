"""The character-level GPT: causality, block_size, tying, GPT-2 init, AdamW groups, resume from a checkpoint."""

import math

import pytest
import torch

from shared.checkpoint import load_checkpoint, restore_model, restore_training, save_checkpoint
from shared.gpt import GPT, GPTConfig
from shared.shakespeare import CharTokenizer, block_batches
from shared.training import lm_loss, make_adamw, train, warmup_cosine

TEXT = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n" * 20


def small_gpt(dropout=0.0, **sizes):
    torch.manual_seed(0)
    config = GPTConfig(**{**dict(vocab_size=20, block_size=16, n_layers=2, n_heads=2, d_model=16), **sizes},
                       dropout=dropout)
    return GPT(config), config


def test_changing_the_future_never_changes_the_past():
    model, _ = small_gpt()
    model.eval()
    tokens = torch.randint(0, 20, (2, 12))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 20
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6)
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_block_size_is_enforced():
    model, _ = small_gpt()
    model(torch.zeros(1, 16, dtype=torch.long))  # exactly block_size is fine
    with pytest.raises(ValueError, match="block_size=16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_weights_are_tied():
    model, config = small_gpt()
    assert model.lm_head.weight is model.tok_emb.weight
    untied = sum(p.numel() for p in model.parameters()) + config.vocab_size * config.d_model
    assert model.num_parameters() == untied - config.vocab_size * config.d_model  # counted once


def test_gpt2_init_scales_residual_projections():
    model, config = small_gpt(d_model=128, n_layers=4, n_heads=4)
    expected = 0.02 / math.sqrt(2 * config.n_layers)
    for block in model.blocks:
        for proj in (block.attn.w_o, block.ff.linear2):
            assert proj.weight.std().item() == pytest.approx(expected, rel=0.05)
        assert block.attn.w_q.weight.std().item() == pytest.approx(0.02, rel=0.05)
        assert torch.all(block.ff.linear1.bias == 0)


def test_adamw_decays_only_linear_weight_matrices():
    model, _ = small_gpt()
    optimizer = make_adamw(model, lr=1e-3, weight_decay=0.1)
    decay_of = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    assert len(decay_of) == len(list(model.parameters()))  # every parameter exactly once
    for name, p in model.named_parameters():
        no_decay = p.dim() < 2 or "emb" in name or "norm" in name
        assert decay_of[id(p)] == (0.0 if no_decay else 0.1), name
    assert decay_of[id(model.tok_emb.weight)] == 0.0  # also the tied output matrix


def _run(steps, history=None, model=None, optimizer=None, fail_at=None, ckpt=None):
    tok = CharTokenizer.from_text(TEXT)
    batches = block_batches(tok.encode(TEXT), block_size=16, batch_size=4, seed=1)

    def batch_fn(step):
        if step == fail_at:
            raise KeyboardInterrupt("interrupted")
        return batches(step)

    def loss_fn(model, batch):
        return lm_loss(model(batch[0]), batch[1])

    def checkpoint_fn(history):
        save_checkpoint(ckpt, model, model.config, optimizer=optimizer, history=history)

    return train(model, optimizer, batch_fn, loss_fn, max_steps=steps, schedule=warmup_cosine(3), log_every=2,
                 history=history, checkpoint_fn=checkpoint_fn if ckpt else None, checkpoint_every=4, progress=False)


def test_interrupted_run_resumes_with_identical_losses(tmp_path):
    vocab = CharTokenizer.from_text(TEXT).vocab_size
    full_model, config = small_gpt(dropout=0.1, vocab_size=vocab)  # dropout: the RNG state must be restored too
    full = _run(12, model=full_model, optimizer=make_adamw(full_model, lr=3e-3))

    ckpt = tmp_path / "run.pt"
    model, _ = small_gpt(dropout=0.1, vocab_size=vocab)
    optimizer = make_adamw(model, lr=3e-3)
    with pytest.raises(KeyboardInterrupt):
        _run(12, model=model, optimizer=optimizer, fail_at=10, ckpt=ckpt)  # last checkpoint: after step 8
    torch.manual_seed(123)  # a fresh process would start from other random state

    state = load_checkpoint(ckpt)
    resumed_model = restore_model(state, GPT(config), config)
    resumed_opt = make_adamw(resumed_model, lr=3e-3)
    history = restore_training(state, resumed_opt)
    assert history.next_step == 8
    resumed = _run(12, history=history, model=resumed_model, optimizer=resumed_opt)
    assert resumed.step == full.step
    assert resumed.loss == full.loss  # exactly the same numbers, not just close
    assert resumed.lr == full.lr
    for a, b in zip(resumed_model.parameters(), full_model.parameters()):
        assert torch.equal(a, b)  # and the same final weights
