"""Muon for the hidden matrices, AdamW for the rest (shared.training.make_muon), through everything train() does.

The parameter split, learning, a bit-identical resume from a checkpoint, gradient accumulation, fp16's
GradScaler and DDP on 2 gloo ranks. For DDP this file is also the worker that torchrun starts:

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/test_muon.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.checkpoint import load_checkpoint, restore_model, restore_training, save_checkpoint  # noqa: E402
from shared.distributed import Precision, distributed, shard, shard_batches, unwrap, wrap  # noqa: E402
from shared.gpt import GPT, GPTConfig  # noqa: E402
from shared.shakespeare import block_batches  # noqa: E402
from shared.training import MuonWithAdamW, lm_loss, make_muon, train, warmup_cosine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = GPTConfig(vocab_size=13, block_size=16, n_layers=2, n_heads=2, d_model=32)
MODERN = GPTConfig(vocab_size=13, block_size=16, n_layers=2, n_heads=4, d_model=32, norm="rmsnorm", position="rope",
                   activation="swiglu", n_kv_heads=2, fused_qkv=True, bias=False)
GLOBAL_BATCH, STEPS, LR = 8, 6, 3e-3


def tiny_model(seed: int = 0, config: GPTConfig = CONFIG) -> GPT:
    torch.manual_seed(seed)
    return GPT(config)


def global_batches():
    """batch_fn(step) -> (x, y) of (GLOBAL_BATCH, block_size): a repeating pattern with noise, the same everywhere."""
    tokens = torch.arange(3000) % 7 + torch.randint(2, (3000,), generator=torch.Generator().manual_seed(1)) * 6
    return block_batches(tokens, CONFIG.block_size, GLOBAL_BATCH, seed=0)


def loss_fn(model, batch):
    x, y = batch
    return lm_loss(model(x), y)


def run(model, *, optimizer=None, max_steps=STEPS, batch_fn=None, history=None, micro_batches=1, precision="fp32",
        checkpoint_fn=None, checkpoint_every=0):
    """Train `model` (plain or DDP) with make_muon; returns (history, optimizer)."""
    optimizer = optimizer or make_muon(unwrap(model), lr=LR)
    history = train(model, optimizer, batch_fn or shard_batches(global_batches()), loss_fn, max_steps=max_steps,
                    schedule=warmup_cosine(2), log_every=3, history=history, micro_batches=micro_batches,
                    precision=precision, checkpoint_fn=checkpoint_fn, checkpoint_every=checkpoint_every,
                    progress=False)
    return history, optimizer


def ids(params) -> list[int]:
    return [id(p) for p in params]


def max_diff(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


# --- which parameters go where ---


@pytest.mark.parametrize("config", [CONFIG, MODERN], ids=["gpt2_block", "modern_block"])
def test_hidden_matrices_go_to_muon_and_everything_else_to_adamw_once(config):
    model = tiny_model(config=config)
    optimizer = make_muon(model, lr=LR)
    muon = ids(p for g in optimizer.muon.param_groups for p in g["params"])
    adamw = ids(p for g in optimizer.adamw.param_groups for p in g["params"])
    everything = ids(p for p in model.parameters() if p.requires_grad)  # the tied head counted once
    assert sorted(muon + adamw) == sorted(everything)  # every trainable parameter in exactly one optimizer
    assert len(set(muon + adamw)) == len(muon + adamw)
    hidden = {id(p) for n, p in model.named_parameters() if n.startswith("blocks.") and p.ndim == 2}
    assert set(muon) == hidden and len(muon) == config.n_layers * (5 if config.activation == "swiglu" else 6)
    assert model.lm_head.weight is model.tok_emb.weight and adamw.count(id(model.tok_emb.weight)) == 1
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}  # tokens (and positions)
    assert id(model.norm.weight) in adamw and all(p.ndim == 1 for p in model.parameters()
                                                  if id(p) in set(adamw) - embeddings)  # norms and biases
    decayed, undecayed = optimizer.adamw.param_groups
    assert decayed["weight_decay"] == 0.1 and decayed["params"] == []  # no Linear weight is left for AdamW to decay
    assert undecayed["weight_decay"] == 0.0 and id(model.tok_emb.weight) in ids(undecayed["params"])
    group = optimizer.muon.param_groups[0]
    assert group["adjust_lr_fn"] == "match_rms_adamw" and group["weight_decay"] == 0.1 and group["nesterov"]
    assert optimizer.param_groups == optimizer.muon.param_groups + optimizer.adamw.param_groups


def test_a_parameter_in_both_optimizers_is_refused():
    model = tiny_model()
    muon = torch.optim.Muon([model.blocks[0].attn.w_o.weight])
    with pytest.raises(ValueError, match="in both optimizers"):
        MuonWithAdamW(muon, torch.optim.AdamW(model.parameters()))


def test_the_learning_rates_and_their_checks():
    model = tiny_model()
    optimizer = make_muon(model, lr=0.02, adamw_lr=1e-3, adjust_lr_fn="original")
    assert [g["lr"] for g in optimizer.param_groups] == [0.02, 1e-3, 1e-3]
    assert make_muon(model, lr=3e-3).adamw.param_groups[0]["lr"] == 3e-3  # adamw_lr None: the same lr
    with pytest.raises(ValueError, match="adjust_lr_fn"):
        make_muon(model, lr=LR, adjust_lr_fn="match_rms")
    with pytest.raises(ValueError, match="momentum"):
        make_muon(model, lr=LR, momentum=1.0)
    with pytest.raises(TypeError, match="blocks"):
        make_muon(nn.Linear(4, 4), lr=LR)
    with pytest.raises(ValueError, match="another optimizer"):
        optimizer.load_state_dict(torch.optim.AdamW(model.parameters()).state_dict())


# --- training, resuming, accumulating ---


def test_train_lowers_the_loss_and_steps_both_optimizers():
    model = tiny_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    history, optimizer = run(model, max_steps=30)
    assert history.loss[-1] < history.loss[0] - 0.5  # 2.5 -> below 1.6 in 30 steps
    moved = {n: (p.detach() - before[n]).abs().max().item() for n, p in model.named_parameters()}
    assert moved["blocks.0.attn.w_q.weight"] > 1e-3 and moved["tok_emb.weight"] > 1e-3 and moved["norm.weight"] > 0
    # the schedule reached every group: all of them end at base_lr * the last factor
    factor = warmup_cosine(2)(29, 29 / 30)
    assert all(g["lr"] == pytest.approx(g["base_lr"] * factor) for g in optimizer.param_groups)
    assert history.lr[-1] == optimizer.muon.param_groups[0]["lr"]


class Interrupted(Exception):
    """Stands for a crash in the middle of a run."""


def test_a_resumed_run_is_bit_identical_to_the_uninterrupted_one(tmp_path):
    full = tiny_model()
    full_history, _ = run(full)

    crashed = tiny_model()
    batches = shard_batches(global_batches())

    def crashing(step):
        if step == 4:
            raise Interrupted
        return batches(step)

    optimizer = make_muon(crashed, lr=LR)
    save = lambda history: save_checkpoint(tmp_path / "run.pt", crashed, CONFIG, optimizer=optimizer,  # noqa: E731
                                           history=history)
    with pytest.raises(Interrupted):
        run(crashed, optimizer=optimizer, batch_fn=crashing, checkpoint_fn=save, checkpoint_every=3)
    state = load_checkpoint(tmp_path / "run.pt")  # weights_only=True
    assert set(state["optimizer"]) == {"muon", "adamw"} and len(state["optimizer"]["muon"]["state"]) == 12
    assert len(state["optimizer"]["adamw"]["state"]) == len(optimizer.adamw.state) > 0
    resumed = restore_model(state, tiny_model(seed=123), CONFIG)  # other weights and RNG: restoring wins
    resumed_optimizer = make_muon(resumed, lr=LR)
    history, _ = run(resumed, optimizer=resumed_optimizer, history=restore_training(state, resumed_optimizer))
    assert all(torch.equal(a, b) for a, b in zip(resumed.state_dict().values(), full.state_dict().values()))
    assert history.loss == full_history.loss
    with pytest.raises(ValueError, match="MuonWithAdamW's state but `optimizer` is a single torch optimizer"):
        restore_training(state, torch.optim.AdamW(resumed.parameters()))
    adamw_run = tiny_model()
    adamw_state = {"optimizer": torch.optim.AdamW(adamw_run.parameters()).state_dict(), "history": {}}
    with pytest.raises(ValueError, match="a single torch optimizer's state but `optimizer` is MuonWithAdamW"):
        restore_training(adamw_state, make_muon(adamw_run, lr=LR))


def test_a_failed_load_leaves_both_optimizers_as_they_were():
    model = tiny_model()
    history, optimizer = run(model, max_steps=3)
    before = optimizer.state_dict()
    muon_buffers = {id(p): optimizer.muon.state[p]["momentum_buffer"].clone() for p in optimizer.muon.state}
    other = make_muon(tiny_model(), lr=LR)
    bad = {"muon": other.muon.state_dict(), "adamw": {"state": {}, "param_groups": []}}  # AdamW's half refused
    with pytest.raises(ValueError):
        optimizer.load_state_dict(bad)
    assert len(optimizer.muon.state) == len(before["muon"]["state"]) == 12  # not emptied by the fresh Muon's state
    assert all(torch.equal(optimizer.muon.state[p]["momentum_buffer"], muon_buffers[id(p)])
               for p in optimizer.muon.state)


def test_the_optimizer_settings_reach_both_optimizers():
    model = tiny_model()
    optimizer = make_muon(model, lr=0.01, adamw_lr=2e-3, weight_decay=0.05, betas=(0.8, 0.9), momentum=0.9,
                          adjust_lr_fn="original")
    muon_group = optimizer.muon.param_groups[0]
    assert (muon_group["momentum"], muon_group["weight_decay"], muon_group["adjust_lr_fn"]) == (0.9, 0.05, "original")
    assert all(g["betas"] == (0.8, 0.9) and g["lr"] == 2e-3 for g in optimizer.adamw.param_groups)
    assert sorted(g["weight_decay"] for g in optimizer.adamw.param_groups) == [0.0, 0.05]  # norms and biases: none


def recorded_run(model, **kwargs):
    """run() that also returns the gradients each optimizer step received (a list per step) and what each step
    changed (a dict per step: parameter name -> the change of its tensor), after its history."""
    optimizer, grads, steps = make_muon(unwrap(model), lr=LR), [], []
    step = optimizer.step
    named = dict(unwrap(model).named_parameters(remove_duplicate=False))  # a tied weight under each of its names

    def recording_step():
        grads.append([p.grad.clone() for group in optimizer.param_groups for p in group["params"]])
        before = {name: p.detach().clone() for name, p in named.items()}
        step()
        steps.append({name: p.detach() - before[name] for name, p in named.items()})

    optimizer.step = recording_step
    history, _ = run(model, optimizer=optimizer, **kwargs)
    return history, grads, steps


# What "the same training" can promise. Muon's Newton-Schulz iterates in bfloat16 (float32 where bf16 is not
# native, which rounds less): 5 iterations of 3 matmuls, each result rounded to bf16's 8 significant bits. So each
# Muon update can carry a relative error of up to about 15 roundings, in norm; the iteration does not amplify it
# in the directions it has converged (singular values near 1). Two runs whose gradients agree to float rounding
# (checked at the first step) then differ, per matrix, by at most that fraction of the sum of its steps' norms.
# The AdamW tensors inherit the difference through the forward pass; Adam normalises each element's step, so an
# element can move by at most the same fraction of the largest element step, summed over the steps. Both bounds
# grow with the size of the updates and the number of steps; neither depends on which CPU kernels ran.
# "15 roundings" is a model of the error, not a proven bound, and the headroom is modest: correct runs measured up
# to 0.70 of it (bf16 against bf16), and 0.99 for a float32 iteration against a bfloat16 one. What it separates
# is real bugs, which land far above it: no all-reduce of the gradients 24.8x, only the last micro-batch's 23.9x.
BF16_ROUNDING = 2.0**-8  # bfloat16's unit roundoff (8 significant bits)
NEWTON_SCHULZ_ROUNDINGS = 5 * 3  # torch.optim.Muon's default: 5 iterations, 3 matmuls each


def training_difference(state: dict, expected: dict, steps: list[dict]) -> dict[str, float]:
    """Each tensor's difference between two trainings as a fraction of what rounding allows (<= 1: the same
    training). `steps` are the reference run's changes per step (recorded_run), `expected` its final weights.

    Muon's matrices: the Frobenius norm of the difference against 15 bf16 roundings of the summed step norms.
    AdamW's tensors: the largest element difference against 15 bf16 roundings of the summed largest element steps.
    """
    allowed = NEWTON_SCHULZ_ROUNDINGS * BF16_ROUNDING
    muon = {n for n, p in tiny_model().named_parameters() if n.startswith("blocks.") and p.ndim == 2}
    adamw_moves = sum(max(change.abs().max().item() for n, change in step.items() if n not in muon) for step in steps)
    ratios = {}
    for name in expected:
        if name in muon:
            moves = sum(step[name].norm().item() for step in steps)
            ratios[name] = (state[name] - expected[name]).norm().item() / (allowed * moves)
        else:
            ratios[name] = (state[name] - expected[name]).abs().max().item() / (allowed * adamw_moves)
    return ratios


def assert_same_training(state: dict, expected: dict, steps: list[dict]) -> None:
    """Weights equal up to what bf16 Newton-Schulz rounding allows (training_difference <= 1 for every tensor)."""
    ratios = training_difference(state, expected, steps)
    worst = max(ratios, key=ratios.get)
    assert ratios[worst] <= 1.0, f"{worst}: {ratios[worst]:.2f} times the difference rounding allows"


def test_two_micro_batches_equal_one_batch():
    whole, accumulated, half = tiny_model(), tiny_model(), tiny_model()
    _, whole_grads, whole_steps = recorded_run(whole)
    _, accumulated_grads, _ = recorded_run(accumulated, micro_batches=2)
    run(half, batch_fn=lambda step: shard(global_batches()(step), 0, 2))  # half of each batch: elsewhere
    # the first step starts from the same weights: its summed gradients are the whole batch's
    for a, b in zip(accumulated_grads[0], whole_grads[0]):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)
    assert_same_training(accumulated.state_dict(), whole.state_dict(), whole_steps)
    assert max_diff(whole.state_dict(), tiny_model().state_dict()) > 1e-2  # training moved the weights
    # other data (half of each batch) is another training: many times what rounding allows
    assert max(training_difference(half.state_dict(), whole.state_dict(), whole_steps).values()) > 5


# --- fp16: one GradScaler for both optimizers ---


def one_step(model, precision):
    """One train() step at lr 0 (weights unchanged), then each optimizer's first moment, divided by its (1 - beta)."""
    optimizer = make_muon(model, lr=0.0)  # lr 0: weights stay, momentum buffers still fill
    train(model, optimizer, lambda step: global_batches()(0), loss_fn, max_steps=1, grad_clip=None,
          precision=precision, progress=False)
    muon = {id(p): optimizer.muon.state[p]["momentum_buffer"] / 0.05 for p in optimizer.muon.state}
    adamw = {id(p): optimizer.adamw.state[p]["exp_avg"] / 0.1 for p in optimizer.adamw.state}
    return muon, adamw, optimizer


def test_fp16_unscales_both_optimizers_gradients_once():
    model = tiny_model()
    fp32_muon, fp32_adamw, _ = one_step(model, "fp32")  # the gradients themselves
    amp = Precision("fp16", "cpu")
    fp16_muon, fp16_adamw, optimizer = one_step(model, amp)
    assert amp.scaler.get_scale() == 2.0**16  # this step did not overflow: it was taken
    assert fp16_muon.keys() == fp32_muon.keys() and len(fp16_muon) == 12
    assert fp16_adamw.keys() == fp32_adamw.keys() and len(fp16_adamw) == len(optimizer.adamw.state) > 0
    for fp16, fp32 in ((fp16_muon, fp32_muon), (fp16_adamw, fp32_adamw)):
        for key in fp32:  # fp16's matmuls differ by ~5e-4; a gradient left scaled would be 65536x larger
            assert (fp16[key] - fp32[key]).norm() <= 0.01 * fp32[key].norm() + 1e-6  # + 1e-6: w_k.bias's is 0


def test_fp16_overflow_skips_both_optimizers():
    model = tiny_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    amp = Precision("fp16", "cpu")
    amp.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**60)  # the scaled gradients overflow fp16
    optimizer = make_muon(model, lr=LR)
    history = train(model, optimizer, global_batches(), loss_fn, max_steps=1, precision=amp, progress=False)
    assert history.grad_scaler["scale"] == 2.0**59  # the scaler saw inf and lowered its scale
    assert optimizer.muon.state == {} and optimizer.adamw.state == {}  # neither optimizer stepped
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


# --- DDP: 2 gloo ranks under torchrun (this file is the worker) ---


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    from tests.helpers import run_two_ranks  # here, not at the top: this file is also the ranks' script

    out = tmp_path_factory.mktemp("muon_ddp")
    run_two_ranks(__file__, out, ROOT)
    return [torch.load(out / f"muon_rank{r}.pt", weights_only=True) for r in (0, 1)]


def test_two_ddp_ranks_with_half_batches_equal_one_process_with_the_whole_batch(ddp):
    torch.set_num_threads(1)
    whole = tiny_model()
    history, _, whole_steps = recorded_run(whole)
    assert ddp[0]["world_size"] == 2
    assert max_diff(ddp[0]["state"], ddp[1]["state"]) == 0.0  # the same averaged gradients: identical replicas
    assert_same_training(ddp[0]["state"], whole.state_dict(), whole_steps)
    assert ddp[0]["loss"] == pytest.approx(history.loss, rel=1e-5)  # the logged loss covers both ranks


def ddp_worker(out: Path) -> None:
    """Each rank trains DDP(tiny_model()) with make_muon on its half of every global batch."""
    with distributed(backend="gloo") as ranks:
        torch.set_num_threads(1)
        model = wrap(tiny_model())
        history, _ = run(model)
        torch.save(dict(state=unwrap(model).state_dict(), loss=history.loss, world_size=ranks.world_size),
                   out / f"muon_rank{ranks.rank}.pt")


if __name__ == "__main__":
    ddp_worker(Path(sys.argv[1]))
