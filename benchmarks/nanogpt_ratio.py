"""Training speed against nanoGPT at its CPU shape, in interleaved rounds; print ONE JSON line.

    python benchmarks/nanogpt_ratio.py --nanogpt PATH/TO/nanoGPT [--rounds 3] [--seconds 40] [--threads 2]

PATH is a checkout of https://github.com/karpathy/nanoGPT whose data/shakespeare_char/prepare.py has been run.
Each round runs `benchmarks/char_gpt.py --shape nanogpt` (4 layers, 4 heads, 128 wide, block 64, batch 12)
and then nanoGPT's train.py with the same shape on the CPU, one after the other, so that both meet the machine
in the same state. Per run the median step time is used (ours: `ms_per_step_median`; nanoGPT: the median of
its per-iteration `time ...ms` lines after iteration 0), and the result is the median over rounds of
nanoGPT's step time divided by ours: above 1.0 means this course's loop trains faster.
What differs: nanoGPT's model has no biases (ours keeps them, as GPT-2 does); everything else is the shape above.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ours(seconds: float, threads: int) -> float:
    """Median ms per training step of the course's loop at nanoGPT's shape."""
    out = subprocess.run([sys.executable, str(HERE / "char_gpt.py"), "--shape", "nanogpt", "--seconds", str(seconds),
                          "--threads", str(threads)], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ms_per_step_median"]


def nanogpt(path: Path, iters: int, threads: int) -> float:
    """Median ms per iteration that nanoGPT's train.py logs at the same shape (iteration 0 left out)."""
    args = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
            "--log_interval=1", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128",
            f"--max_iters={iters}", f"--lr_decay_iters={iters}", "--dropout=0.0", "--always_save_checkpoint=False",
            "--eval_interval=100000"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "train.py", *args], cwd=path, capture_output=True, text=True, check=True,
                         env=env).stdout
    times = [float(ms) for it, ms in re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", out) if int(it) > 0]
    if not times:
        raise RuntimeError(f"no iteration times found in nanoGPT's output:\n{out[-2000:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanogpt", type=Path, required=True, help="a nanoGPT checkout with shakespeare_char data")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=40.0, help="our training budget per round")
    parser.add_argument("--iters", type=int, default=250, help="nanoGPT iterations per round")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.iters < 2 or args.threads < 1:
        parser.error("need rounds >= 1, seconds > 0, iters >= 2, threads >= 1")
    rounds = []
    for _ in range(args.rounds):
        ours_ms, theirs_ms = ours(args.seconds, args.threads), nanogpt(args.nanogpt, args.iters, args.threads)
        rounds.append({"ours_ms": ours_ms, "nanogpt_ms": theirs_ms, "speed_ratio": round(theirs_ms / ours_ms, 3)})
    print(json.dumps({"benchmark": "nanogpt_ratio", "rounds": rounds, "threads": args.threads,
                      "speed_ratio_median": statistics.median(r["speed_ratio"] for r in rounds),
                      "load_average": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
