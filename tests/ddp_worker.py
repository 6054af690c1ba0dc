"""Run by tests/test_distributed.py under torchrun (2 CPU processes, gloo): train a tiny GPT six ways.

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/ddp_worker.py OUT_DIR

Each rank writes OUT_DIR/results_rank<r>.pt (per run: weights, history, all-reduce count, checkpoint calls)
for the test to compare with single-process runs of `tiny_run` in the test process.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.checkpoint import load_checkpoint, restore_model, restore_training, save_checkpoint  # noqa: E402
from shared.distributed import current_ranks, distributed, shard_batches, unwrap, wrap  # noqa: E402
from shared.gpt import GPT, GPTConfig  # noqa: E402
from shared.shakespeare import block_batches  # noqa: E402
from shared.training import lm_loss, make_adamw, train, warmup_cosine  # noqa: E402

CONFIG = GPTConfig(vocab_size=13, block_size=16, n_layers=2, n_heads=2, d_model=32)
DROPOUT_CONFIG = replace(CONFIG, dropout=0.1)
GLOBAL_BATCH, STEPS, LR, RANK_SEED = 8, 6, 3e-3, 100
BUDGET_SECONDS, SLOW_STEP_SECONDS = 0.3, 0.02  # time_budget_run: rank 1 alone could do at most 15 steps


def tiny_model(seed: int = 0, config: GPTConfig = CONFIG) -> GPT:
    """The same tiny GPT in every process (same seed, same initial weights)."""
    torch.manual_seed(seed)
    return GPT(config)


def global_batches():
    """batch_fn(step) -> the global batch (GLOBAL_BATCH, block_size), the same in every process."""
    tokens = torch.randint(CONFIG.vocab_size, (3000,), generator=torch.Generator().manual_seed(1))
    return block_batches(tokens, CONFIG.block_size, GLOBAL_BATCH, seed=0)


def loss_fn(model, batch):
    x, y = batch
    return lm_loss(model(x), y)


def tiny_run(model, *, max_steps=STEPS, micro_batches=1, precision="fp32", batch_fn=None, history=None,
             optimizer=None, checkpoint_fn=None, checkpoint_every=0):
    """Train `model` (plain or DDP) on this rank's shard of the global batches; returns (history, optimizer)."""
    optimizer = optimizer or make_adamw(unwrap(model), lr=LR)
    batch_fn = batch_fn or shard_batches(global_batches())
    history = train(model, optimizer, batch_fn, loss_fn, max_steps=max_steps, schedule=warmup_cosine(2),
                    log_every=3, micro_batches=micro_batches, precision=precision, history=history,
                    checkpoint_fn=checkpoint_fn, checkpoint_every=checkpoint_every, progress=False)
    return history, optimizer


def counting_wrap(model):
    """DDP(model) with a comm hook that counts its all-reduces (one per gradient bucket per sync)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    ddp, calls = wrap(model), [0]

    def hook(state, bucket):
        calls[0] += 1
        return allreduce_hook(None, bucket)

    ddp.register_comm_hook(None, hook)
    return ddp, calls


class Interrupted(Exception):
    """Stands for a crash in the middle of a run."""


def crash_and_resume(path: Path, config: GPTConfig = CONFIG, rank_seed: int | None = None) -> dict:
    """Crash at step 4 after a checkpoint at step 3 (rank 0 alone writes it), then resume from it in new objects.

    rank_seed: seed rank r's RNG with rank_seed + r before training, so that ranks draw different dropout masks.
    """
    saves = [0]
    model = wrap(tiny_model(config=config))
    if rank_seed is not None:
        torch.manual_seed(rank_seed + current_ranks().rank)

    def checkpoint_fn(history):
        saves[0] += 1
        save_checkpoint(path, unwrap(model), config, optimizer=optimizer, history=history)

    batches = shard_batches(global_batches())

    def crashing(step):
        if step == 4:
            raise Interrupted
        return batches(step)

    optimizer = make_adamw(unwrap(model), lr=LR)
    try:
        tiny_run(model, batch_fn=crashing, optimizer=optimizer, checkpoint_fn=checkpoint_fn, checkpoint_every=3)
    except Interrupted:
        pass
    torch.distributed.barrier()  # the checkpoint is complete before anyone reads it
    state = load_checkpoint(path)
    fresh = restore_model(state, tiny_model(seed=123, config=config), config)  # other weights and RNG: restore wins
    optimizer = make_adamw(fresh, lr=LR)
    history = restore_training(state, optimizer)
    model = wrap(fresh)
    history, _ = tiny_run(model, optimizer=optimizer, history=history)
    return dict(state=unwrap(model).state_dict(), history=history.__dict__, saves=saves[0])


def time_budget_run(rank: int) -> dict:
    """Train under a time budget with rank 1 slower than rank 0 (it sleeps SLOW_STEP_SECONDS in every step).

    The model is not DDP-wrapped, so no gradient all-reduce holds the ranks together: only train()'s shared
    clock (the largest time over the ranks) can make both stop at the same step.
    """
    batches = shard_batches(global_batches())

    def batch_fn(step):
        if rank == 1:
            time.sleep(SLOW_STEP_SECONDS)
        return batches(step)

    model = tiny_model()
    history = train(model, make_adamw(model, lr=LR), batch_fn, loss_fn, max_steps=10**6, max_seconds=BUDGET_SECONDS,
                    log_every=10**6, progress=False)  # one log line, at the last step
    return dict(steps=history.next_step, seconds=history.seconds[-1], logged=history.step)


def nan_on_one_rank(rank: int) -> dict:
    """Rank 1's loss is NaN at step 2 (its gradients stay finite): every rank must stop there, weights untouched."""
    model, drawn = wrap(tiny_model()), []
    batches = shard_batches(global_batches())

    def batch_fn(step):
        drawn.append(step)
        return batches(step)

    def nan_loss(model, batch):
        loss, n = loss_fn(model, batch)
        return (loss + float("nan") if rank == 1 and len(drawn) == 3 else loss), n  # a constant: grads finite

    optimizer = make_adamw(unwrap(model), lr=LR)
    try:
        train(model, optimizer, batch_fn, nan_loss, max_steps=STEPS, progress=False)
        error = None
    except FloatingPointError as err:
        error = str(err)
    return dict(error=error, drawn=drawn, state=unwrap(model).state_dict())


def main(out: Path) -> None:
    with distributed(backend="gloo") as ranks:
        torch.set_num_threads(1)
        results = {}
        for name, micro in (("ddp", 1), ("ddp_accum", 2)):
            model, calls = counting_wrap(tiny_model())
            history, _ = tiny_run(model, micro_batches=micro)
            results[name] = dict(state=unwrap(model).state_dict(), history=history.__dict__, allreduces=calls[0])
        results["resumed"] = crash_and_resume(out / "resume.pt")

        # with dropout and a different seed on each rank, each rank's own random state must come back
        model = wrap(tiny_model(config=DROPOUT_CONFIG))
        torch.manual_seed(RANK_SEED + ranks.rank)
        tiny_run(model)
        results["dropout"] = dict(state=unwrap(model).state_dict())
        results["dropout_resumed"] = crash_and_resume(out / "dropout.pt", DROPOUT_CONFIG, RANK_SEED)
        results["budget"] = time_budget_run(ranks.rank)
        results["nan_on_one_rank"] = nan_on_one_rank(ranks.rank)
        results["ranks"] = dict(rank=ranks.rank, world_size=ranks.world_size, backend=ranks.backend,
                                seen=current_ranks().world_size)
        torch.save(results, out / f"results_rank{ranks.rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
