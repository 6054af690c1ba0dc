"""Train a reversal model on 1-12 digits with one position scheme for a wall-clock budget; score lengths 1-32.

    python benchmarks/length_generalisation.py --scheme coupled --arch decoder_only --seconds 300 [--seed 0]
        [--steps N]  (stop at N steps if that comes first: on a busy shared machine, a step count repeats)

Schemes: see shared.lengthgen.SCHEMES (sinusoidal, learned, rope, alibi, nope, random_sinusoidal,
random_learned, random_rope, coupled). Test lists: 200 per length (all 10 / 100 lists of lengths 1 / 2),
distinct, and from length 3 on excluded from training. Prints ONE JSON line with the exact match of
greedy decoding per length 1-32 and the means over 1-12, 13-16 and 17-24, the command, the commit it ran from
and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import torch  # noqa: E402
from char_gpt import git_commit, load_average  # noqa: E402

from shared.lengthgen import (  # noqa: E402
    RECIPE,
    SCHEMES,
    TEST_LENGTHS,
    TRAIN_LENGTHS,
    accuracy_by_length,
    check_scheme,
    held_out,
    length_test_sets,
    mean_over,
    train_scheme,
)
from shared.reversal import ARCHS  # noqa: E402


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", choices=sorted(SCHEMES), required=True)
    parser.add_argument("--arch", choices=ARCHS, default="decoder_only")
    parser.add_argument("--seconds", type=float, required=True, help="training budget in seconds of wall time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=10**9, help="also stop after this many steps")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--n-test", type=int, default=200, help="held-out lists per length")
    for name in ("d_model", "n_heads", "n_layers", "batch_size", "warmup"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"default {RECIPE[name]}")
    parser.add_argument("--lr", type=float, help=f"default {RECIPE['lr']}")
    args = parser.parse_args(argv)
    arguments = sys.argv[1:] if argv is None else list(argv)
    recipe = {**RECIPE, **{k: getattr(args, k) for k in RECIPE if getattr(args, k) is not None}}
    if args.seconds <= 0:
        parser.error(f"--seconds must be positive, got {args.seconds}")
    try:
        check_scheme(args.scheme, args.arch)
    except ValueError as err:
        parser.error(str(err))

    torch.set_num_threads(args.threads)
    load_start, (commit, dirty) = load_average(), git_commit()
    started = time.perf_counter()
    test_sets = length_test_sets(TEST_LENGTHS, n=args.n_test)
    budget = args.seconds - (time.perf_counter() - started)  # setup counts against the budget
    model, history = train_scheme(args.scheme, args.arch, seed=args.seed, max_steps=args.steps, max_seconds=budget,
                                  exclude=held_out(test_sets), recipe=recipe)
    train_wall = time.perf_counter() - started
    accuracy = accuracy_by_length(model, test_sets)
    result = {
        "scheme": args.scheme,
        "arch": args.arch,
        "seed": args.seed,
        "seconds": args.seconds,
        "steps": history.next_step,
        "train_wall_seconds": round(train_wall, 1),
        "final_loss": round(history.loss[-1], 5),
        "train_lengths": list(TRAIN_LENGTHS),
        "n_test": {str(n): len(s) for n, s in test_sets.items()},
        "mean_1_12": round(mean_over(accuracy, range(1, 13)), 4),
        "mean_13_16": round(mean_over(accuracy, range(13, 17)), 4),
        "mean_17_24": round(mean_over(accuracy, range(17, 25)), 4),
        "exact_match": {str(n): round(a, 4) for n, a in accuracy.items()},
        "parameters": model.num_parameters(),
        "threads": args.threads,
        **recipe,
        "command": " ".join(["python", "benchmarks/length_generalisation.py", *arguments]),
        "commit": commit,
        "commit_dirty": dirty,  # shared/ or benchmarks/ had changes not in that commit
        "load_average_start": load_start,
        "load_average_end": load_average(),
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
