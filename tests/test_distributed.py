"""Data parallelism proven equal to one process: 2 gloo ranks under torchrun vs the same training in this process.

One torchrun launch (tests/ddp_worker.py) trains a tiny GPT three ways on 2 CPU processes; the tests below
compare its weights and histories with single-process runs of the same code.
"""

import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

from shared.distributed import (
    Precision,
    all_reduce_max,
    all_reduce_sum,
    auto_precision,
    backward_micro_batches,
    current_ranks,
    distributed,
    init_distributed,
    shard,
    shard_batches,
    unwrap,
    wrap,
)
from shared.reversal import LMBatch, ReversalBatches, Seq2SeqBatch
from tests.ddp_worker import (
    BUDGET_SECONDS,
    GLOBAL_BATCH,
    SLOW_STEP_SECONDS,
    global_batches,
    tiny_model,
    tiny_run,
)
from tests.helpers import run_two_ranks

ROOT = Path(__file__).resolve().parent.parent
TIGHT = 2e-5  # float sums in another order; an update of this run moves weights by ~1e-2


def max_diff(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    """Results of tests/ddp_worker.py on 2 CPU processes (gloo), one dict per rank."""
    out = tmp_path_factory.mktemp("ddp")
    run_two_ranks(ROOT / "tests" / "ddp_worker.py", out, ROOT)
    return [torch.load(out / f"results_rank{r}.pt", weights_only=True) for r in (0, 1)]


@pytest.fixture(scope="module")
def single():
    """The same training in one process on the whole global batch: plain, and with 2 micro-batches."""
    torch.set_num_threads(1)
    runs = {}
    for name, micro in (("whole", 1), ("accum", 2)):
        model = tiny_model()
        history, _ = tiny_run(model, micro_batches=micro)
        runs[name] = dict(state=model.state_dict(), history=history)
    return runs


def test_two_ranks_with_half_batches_equal_one_process_with_the_whole_batch(ddp, single):
    assert [r["ranks"]["world_size"] for r in ddp] == [2, 2] and ddp[1]["ranks"]["backend"] == "gloo"
    moved = max_diff(single["whole"]["state"], tiny_model().state_dict())
    assert moved > 1e-3  # training changed the weights, so equality below means something
    assert max_diff(ddp[0]["ddp"]["state"], single["whole"]["state"]) < TIGHT
    assert max_diff(ddp[0]["ddp"]["state"], ddp[1]["ddp"]["state"]) == 0.0  # DDP keeps the replicas identical
    half = tiny_model()  # one process that saw only rank 0's half of each batch lands elsewhere
    tiny_run(half, batch_fn=lambda step: shard(global_batches()(step), 0, 2))
    assert max_diff(half.state_dict(), single["whole"]["state"]) > 50 * TIGHT


def test_logged_loss_and_tokens_cover_all_ranks(ddp, single):
    expected = single["whole"]["history"]
    for rank in ddp:
        got = rank["ddp"]["history"]
        assert got["step"] == expected.step and got["tokens"] == expected.tokens
        assert got["loss"] == pytest.approx(expected.loss, rel=1e-5)


def test_accumulated_micro_batches_equal_one_big_batch(ddp, single):
    assert max_diff(single["accum"]["state"], single["whole"]["state"]) < TIGHT
    assert max_diff(ddp[0]["ddp_accum"]["state"], single["whole"]["state"]) < TIGHT
    # no_sync on all but the last micro-step: as many all-reduces with 2 micro-batches as with 1
    for rank in ddp:
        assert rank["ddp_accum"]["allreduces"] == rank["ddp"]["allreduces"] >= 6


def test_interrupted_and_resumed_ddp_run_equals_the_uninterrupted_one(ddp):
    assert max_diff(ddp[0]["resumed"]["state"], ddp[0]["ddp"]["state"]) < 1e-6
    assert ddp[0]["resumed"]["history"]["loss"] == pytest.approx(ddp[0]["ddp"]["history"]["loss"], rel=1e-6)
    assert [r["resumed"]["saves"] for r in ddp] == [1, 0]  # rank 0 alone wrote the checkpoint


def test_each_rank_resumes_with_its_own_random_state(ddp):
    # ranks seeded differently draw different dropout masks; a resume that gave rank 1 rank 0's state would differ
    for rank in ddp:
        assert max_diff(rank["dropout_resumed"]["state"], rank["dropout"]["state"]) < 1e-6
    assert max_diff(ddp[0]["dropout"]["state"], ddp[0]["ddp"]["state"]) > 1e-3  # dropout really changed the run


def test_a_time_budget_stops_every_rank_at_the_same_step(ddp):
    rank0, rank1 = (r["budget"] for r in ddp)
    assert rank0["steps"] == rank1["steps"] and rank0["logged"] == rank1["logged"] == [rank0["steps"]]
    assert rank0["seconds"] == rank1["seconds"] >= BUDGET_SECONDS  # one clock: the slower rank's
    # rank 0 alone would have run many more steps; the shared clock held it to what rank 1 could do in the budget
    assert rank0["steps"] <= BUDGET_SECONDS / SLOW_STEP_SECONDS + 1


def test_a_nan_loss_on_one_rank_stops_every_rank_before_the_step(ddp, single):
    rank0, rank1 = (r["nan_on_one_rank"] for r in ddp)
    assert "the loss at step 2 is nan" in rank1["error"]
    assert "the loss at step 2 is not finite on another rank" in rank0["error"]  # not stepping alone, then hanging
    assert rank0["drawn"] == rank1["drawn"] == [0, 1, 2]
    assert max_diff(rank0["state"], rank1["state"]) == 0.0  # both stopped with the weights after step 1


def test_shard_splits_every_tensor_into_disjoint_equal_parts():
    x, y = torch.arange(24).view(8, 3), torch.arange(8)
    parts = [shard((x, {"y": y}), r, 4) for r in range(4)]
    assert all(p[0].shape == (2, 3) and p[1]["y"].shape == (2,) for p in parts)
    assert torch.equal(torch.cat([p[0] for p in parts]), x) and torch.equal(parts[2][1]["y"], y[4:6])
    with pytest.raises(ValueError, match="divisible by 3"):
        shard(x, 0, 3)
    with pytest.raises(ValueError, match="index"):
        shard(x, 4, 4)
    with pytest.raises(TypeError, match="batch"):
        shard("text", 0, 2)
    batch_fn = shard_batches(global_batches())  # no process group: rank 0 of 1 keeps the whole batch
    assert batch_fn(3)[0].shape == (GLOBAL_BATCH, 16) and torch.equal(batch_fn(3)[0], global_batches()(3)[0])


def test_shard_keeps_the_course_named_tuple_batches():
    for arch, kind in (("decoder_only", LMBatch), ("encoder_decoder", Seq2SeqBatch)):
        batch = ReversalBatches(arch, 8)(0)
        half = shard(batch, 1, 2)
        assert type(half) is kind and half._fields == batch._fields
        assert all(torch.equal(h, b[4:]) for h, b in zip(half, batch))


def test_single_process_without_torchrun(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    ranks = init_distributed(device="cpu")
    assert (ranks.rank, ranks.world_size, ranks.backend, ranks.is_main) == (0, 1, None, True)
    model = nn.Linear(2, 2)
    assert wrap(model, ranks) is model and unwrap(model) is model and current_ranks() == ranks
    assert all_reduce_sum(torch.tensor(2.5), 3) == [2.5, 3.0] and all_reduce_max(1.5) == 1.5
    with pytest.raises(ValueError, match="backend"):
        init_distributed(backend="mpi")


def test_group_is_destroyed_on_success_and_on_error(monkeypatch):
    with socket.socket() as s:  # a free port on the loopback interface
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(port)).items():
        monkeypatch.setenv(key, value)
    with distributed(backend="gloo") as ranks:
        assert dist.is_initialized() and ranks.backend == "gloo" and isinstance(unwrap(wrap(nn.Linear(2, 2))),
                                                                                 nn.Linear)
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="boom"):
        with distributed(backend="gloo"):
            raise RuntimeError("boom")
    assert not dist.is_initialized()


def test_precision_is_chosen_automatically_and_can_be_overridden():
    assert auto_precision("cuda", True) == "bf16" and auto_precision("cuda", False) == "fp16"
    # CPU bf16 autocast runs everywhere, but without bf16 instructions it can be several times slower than fp32
    assert auto_precision("cpu", True) == auto_precision("cpu", False) == auto_precision("mps", False) == "fp32"
    assert Precision("auto", "cpu").name == "fp32" and Precision("auto", "cpu").scaler is None
    assert Precision("fp32", "cpu").scaler is None
    assert Precision("fp16", "cpu").scaler is not None  # fp16 needs loss scaling, bf16 does not
    with pytest.raises(ValueError, match="precision"):
        Precision("fp8", "cpu")
    with Precision("bf16", "cpu").autocast():
        assert nn.Linear(4, 4)(torch.randn(2, 4)).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="micro_batches"):
        backward_micro_batches(nn.Linear(2, 2), None, torch.zeros(2, 2), 0, Precision("fp32"))
    with pytest.raises(ValueError, match=r"batch size \(4,\) must be divisible by 3 .* or micro_batches"):
        backward_micro_batches(nn.Linear(2, 2), None, torch.zeros(4, 2), 3, Precision("fp32"))


@pytest.mark.parametrize("capability, expected",
                         [((6, 1), "fp16"), ((7, 5), "fp16"), ((8, 0), "bf16"), ((9, 0), "bf16")])
def test_auto_precision_on_cuda_picks_bf16_only_where_the_gpu_has_it(monkeypatch, capability, expected):
    """bf16 needs CUDA capability 8.0 (Ampere) or later; a T4 (7.5) gets fp16 with the GradScaler, although
    torch.cuda.is_bf16_supported() answers True there by default (it counts bf16 emulated in fp32)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # its default answer
    precision = Precision("auto", "cuda")
    assert precision.name == expected and precision.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[expected]
    assert (precision.scaler is not None) == (expected == "fp16")  # fp16 needs loss scaling, bf16 does not
    assert Precision("auto", "cpu").name == "fp32"  # a CPU keeps fp32 whatever the GPU has


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_mixed_precision_loss_matches_fp32(single, name):
    model = tiny_model()
    history, _ = tiny_run(model, precision=name)
    fp32 = single["whole"]["history"].loss
    assert history.loss == pytest.approx(fp32, rel=1e-2) and history.loss != fp32  # close, and really autocast
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_micro_batches_weigh_each_token_the_same_whatever_their_token_counts():
    """Each micro-batch's mean loss counts by its share of the batch's tokens: the whole batch's gradient."""
    torch.manual_seed(0)
    model, x = nn.Linear(3, 4), torch.randn(4, 3)
    y = torch.tensor([-100, 1, 2, 3])  # micro-batch 0 (rows 0-1) holds 1 target, micro-batch 1 (rows 2-3) holds 2

    def loss_fn(m, batch):
        inputs, targets = batch
        return nn.functional.cross_entropy(m(inputs), targets), (targets != -100).sum()

    def grads(loss):
        model.zero_grad()
        loss.backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    equal = grads(0.5 * loss_fn(model, (x[:2], y[:2]))[0] + 0.5 * loss_fn(model, (x[2:], y[2:]))[0])
    per_token = grads(loss_fn(model, (x, y))[0])  # one pass over the whole batch: 1/3 per target
    model.zero_grad()
    loss_sum, tokens = backward_micro_batches(model, loss_fn, (x, y), 2, Precision("fp32"))
    accumulated = torch.cat([p.grad.flatten() for p in model.parameters()])
    torch.testing.assert_close(accumulated, per_token)
    assert not torch.allclose(accumulated, equal, atol=1e-3)  # what weighing micro-batches equally would give
    # the logged loss is the mean over all targets too
    assert int(tokens) == 3 and float(loss_sum) / 3 == pytest.approx(loss_fn(model, (x, y))[0].item(), rel=1e-6)


@pytest.mark.parametrize("env, named", [
    (dict(WORLD_SIZE="2"), "RANK"), (dict(WORLD_SIZE="2", RANK="one"), "RANK"),
    (dict(WORLD_SIZE="two", RANK="0"), "WORLD_SIZE"), (dict(WORLD_SIZE="2", RANK="0", LOCAL_RANK="x"), "LOCAL_RANK"),
    (dict(WORLD_SIZE="2", RANK="2"), "RANK"),
])
def test_init_distributed_names_a_missing_or_broken_torchrun_variable(monkeypatch, env, named):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match=f"environment variable {named} must be"):
        init_distributed(backend="gloo")
    assert not dist.is_initialized()
