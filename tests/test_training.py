import math

import pytest
import torch
from torch import nn

from shared.gpt import GPT, GPTConfig
from shared.runtime import choose, fast_mode, get_device, seed_everything
from shared.training import History, lm_loss, make_adamw, noam_schedule, train, warmup_cosine


def test_lm_loss_ignores_masked_targets():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 2, -100], [-100, 4, 0]])
    loss, n = lm_loss(logits, targets)
    keep = targets != -100
    expected = nn.functional.cross_entropy(logits[keep], targets[keep])
    assert n == 4 and loss.item() == pytest.approx(expected.item())
    with pytest.raises(ValueError, match="disagree"):
        lm_loss(logits, targets[:, :2])


def test_schedules():
    noam = noam_schedule(d_model=512, warmup=4000)
    peak = max(noam(s, 0.0) for s in range(0, 8000, 50))
    assert noam(3999, 0.0) == pytest.approx(peak, rel=1e-3) and noam(0, 0.0) < noam(100, 0.0)
    sched = warmup_cosine(warmup=10, min_ratio=0.1)
    assert sched(0, 0.0) == pytest.approx(0.1) and sched(9, 0.05) == pytest.approx(1.0, abs=0.01)
    assert sched(500, 0.5) == pytest.approx(0.55) and sched(999, 1.0) == pytest.approx(0.1)


def test_adamw_decays_only_linear_weights():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layers=1, n_heads=2, d_model=8))
    decay, no_decay = make_adamw(model, lr=1e-3).param_groups
    decayed = {id(p) for p in decay["params"]}
    assert id(model.tok_emb.weight) not in decayed and id(model.pos_emb.embedding.weight) not in decayed
    assert id(model.blocks[0].attn.w_q.weight) in decayed and id(model.blocks[0].attn.w_q.bias) not in decayed
    assert id(model.norm.weight) not in decayed
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_train_learns_and_logs_token_weighted_history():
    seed_everything(0)
    model = nn.Sequential(nn.Embedding(4, 16), nn.Linear(16, 4))
    data = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3]])

    def loss_fn(m, batch):
        return lm_loss(m(batch[:, :-1]), batch[:, 1:])

    history = train(model, torch.optim.Adam(model.parameters(), 0.05), lambda step: data, loss_fn,
                    max_steps=60, log_every=5, schedule=warmup_cosine(5), progress=False,
                    eval_fn=lambda m: loss_fn(m, data)[0], eval_every=30)
    assert history.step == list(range(5, 61, 5)) and history.tokens[-1] == 60 * 7 and history.next_step == 60
    assert history.loss[0] > 1.0 and history.loss[-1] < 0.05
    assert history.val_loss[-1] < 0.05 and history.val_step == [30, 60]
    assert history.lr[-1] == pytest.approx(0.05 * 0.1, rel=0.05)


def test_train_stops_at_max_seconds():
    model = nn.Linear(2, 2)
    history = train(model, torch.optim.SGD(model.parameters(), 0.1), lambda s: torch.randn(4, 2),
                    lambda m, b: (m(b).pow(2).mean(), 4), max_steps=10**6, max_seconds=0.2, progress=False)
    assert 0 < history.next_step < 10**6 and history.seconds[-1] >= 0.2


def test_train_rejects_bad_arguments():
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        train(model, opt, None, None, max_steps=0)
    with pytest.raises(ValueError, match="log_every"):
        train(model, opt, None, None, max_steps=5, log_every=3, checkpoint_every=10)


def test_runtime_helpers(monkeypatch):
    monkeypatch.setenv("COURSE_FAST", "1")
    assert fast_mode() and choose(fast=1, cpu=2, cuda=3) == 1
    monkeypatch.setenv("COURSE_FAST", "0")
    assert not fast_mode() and choose(fast=1, cpu=2, cuda=3, device="cpu") == 2
    assert choose(fast=1, cpu=2, cuda=3, device="cuda") == 3
    assert get_device("cpu").type == "cpu" and get_device().type in {"cpu", "cuda", "mps"}
    seed_everything(3)
    a = torch.rand(3)
    seed_everything(3)
    assert torch.equal(a, torch.rand(3))
    with pytest.raises(TypeError, match="seed must be an int"):
        seed_everything(1.5)
    assert math.isclose(warmup_cosine(0)(0, 0.0), 1.0)
    assert History().next_step == 0
