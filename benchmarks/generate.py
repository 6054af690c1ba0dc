"""KV cache vs no cache: time greedy generation of 500 new tokens both ways; print ONE JSON line.

    python benchmarks/generate.py                      # notebook 08's GPU-size GPT (6 layers, 6 heads, 384 wide)
    python benchmarks/generate.py --checkpoint PATH    # a trained GPT saved with shared.checkpoint

Without a cache every new token re-runs the model over up to block_size tokens; with a cache only the
newest token is computed. Greedy tokens are identical while the context fits in block_size; after that
the cached path refills its cache from the last block_size // 2 tokens (see shared.generation.lm.generate)
while the uncached path always crops to the last block_size, so they may differ from then on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.checkpoint import config_from_checkpoint, load_checkpoint, restore_model  # noqa: E402
from shared.generation.lm import generate  # noqa: E402
from shared.gpt import GPT, GPTConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new-tokens", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per mode; the median is reported")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--checkpoint", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.checkpoint is not None:
        state = load_checkpoint(args.checkpoint)
        config = config_from_checkpoint(state, GPTConfig)
        model = restore_model(state, GPT(config), config)
    else:
        config = GPTConfig(vocab_size=65, block_size=256, n_layers=6, n_heads=6, d_model=384)
        model = GPT(config)
    model.eval()
    prompt = torch.zeros(args.batch, 1, dtype=torch.long)  # one start token per row

    times: dict[bool, list[float]] = {True: [], False: []}
    outputs = {}
    generate(model, prompt, 8, temperature=0.0, use_cache=True)  # warm-up
    for _ in range(args.repeats):
        for use_cache in (True, False):  # interleaved, so both modes see the same machine load
            started = time.perf_counter()
            outputs[use_cache] = generate(model, prompt, args.new_tokens, temperature=0.0, use_cache=use_cache)
            times[use_cache].append(time.perf_counter() - started)

    cached, uncached = statistics.median(times[True]), statistics.median(times[False])
    within = min(args.new_tokens, config.block_size - prompt.size(1))  # new tokens generated before any refill
    new_c, new_u = outputs[True][:, prompt.size(1):], outputs[False][:, prompt.size(1):]
    result = {
        "benchmark": "generate",
        "new_tokens": args.new_tokens,
        "batch": args.batch,
        "seconds_no_cache": round(uncached, 3),
        "seconds_cache": round(cached, 3),
        "tokens_per_s_no_cache": round(args.batch * args.new_tokens / uncached, 1),
        "tokens_per_s_cache": round(args.batch * args.new_tokens / cached, 1),
        "speedup": round(uncached / cached, 2),
        "identical_within_block": bool((new_c[:, :within] == new_u[:, :within]).all()),
        "tokens_compared_within_block": within,
        "identical_all": bool((new_c == new_u).all()),
        "match_fraction_all": round(float((new_c == new_u).float().mean()), 4),
        "repeats": args.repeats,
        "parameters": model.num_parameters(),
        "config": asdict(config),
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
