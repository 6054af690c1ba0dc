"""Train a list-reversal model from scratch for a fixed wall-clock budget, then measure exact match.

    python benchmarks/reversal.py --seconds 60 [--arch encoder_decoder|decoder_only] [--save PATH]

Trains on sequences made on the fly (lengths 3-12, the held-out test set excluded), with warm-up and a
cosine decay that follows the clock, then greedy-decodes 1,000 held-out sequences and prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from shared.generation.seq2seq import exact_match, save_reverser  # noqa: E402
from shared.reversal import ARCHS, ReversalBatches, loss_for, make_model, make_test_set  # noqa: E402
from shared.runtime import seed_everything  # noqa: E402
from shared.training import train, warmup_cosine  # noqa: E402

# Per-architecture defaults, tuned on a 2-core CPU for a 60-second budget.
RECIPES = {
    "encoder_decoder": dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, batch_size=128, lr=3e-3, warmup=100),
    "decoder_only": dict(d_model=64, n_heads=4, n_layers=2, d_ff=None, batch_size=128, lr=3e-3, warmup=100),
}
TEST_SEED, TRAIN_SEED = 1234, 0  # different seeds: the test set is held out and excluded from training


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, required=True, help="training budget in seconds of wall time")
    parser.add_argument("--arch", choices=ARCHS, default="encoder_decoder")
    parser.add_argument("--save", type=pathlib.Path, help="write the trained model to this checkpoint path")
    parser.add_argument("--seed", type=int, default=TRAIN_SEED)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--n-test", type=int, default=1000)
    for name in ("d_model", "n_heads", "n_layers", "d_ff", "batch_size", "warmup"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int)
    parser.add_argument("--lr", type=float)
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error(f"--seconds must be positive, got {args.seconds}")
    recipe = dict(RECIPES[args.arch])
    recipe.update({k: getattr(args, k) for k in recipe if getattr(args, k, None) is not None})

    torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    started = time.perf_counter()
    test_set = make_test_set(args.n_test, seed=TEST_SEED)
    model = make_model(args.arch, recipe["d_model"], recipe["n_heads"], recipe["n_layers"], recipe["d_ff"])
    batches = ReversalBatches(args.arch, recipe["batch_size"], seed=args.seed, exclude=test_set)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe["lr"], betas=(0.9, 0.98), weight_decay=0.0)
    budget = args.seconds - (time.perf_counter() - started)  # setup counts against the budget too
    history = train(model, optimizer, batches, loss_for(args.arch), max_steps=10**9, max_seconds=budget,
                    schedule=warmup_cosine(recipe["warmup"], min_ratio=0.0), grad_clip=1.0, log_every=50,
                    progress=False)
    train_wall = time.perf_counter() - started
    score = exact_match(model, test_set)
    if args.save:
        save_reverser(args.save, model, history=history, extra={"recipe": recipe})
    result = {
        "arch": args.arch,
        "seconds": args.seconds,
        "steps": history.next_step,
        "exact_match": round(score, 4),
        "n_test": len(test_set),
        "parameters": model.num_parameters(),
        "train_wall_seconds": round(train_wall, 1),
        "final_loss": round(history.loss[-1], 5) if history.loss else None,  # None: setup used the whole budget
        "threads": args.threads,
        **recipe,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
