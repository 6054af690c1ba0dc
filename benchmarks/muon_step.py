"""What a Muon step costs next to an AdamW step, at the char-GPT's modern shape; print ONE JSON line.

    python benchmarks/muon_step.py                 # 1 and 2 threads, medians of interleaved repeats
    python benchmarks/muon_step.py --threads 1 --repeats 50

The model is benchmarks/char_gpt.py's --shape modern. For each thread count it times, interleaved (AdamW, Muon,
AdamW, ...) so that a busy machine slows both alike, and reports medians in milliseconds:
- `train_step`: a whole training step (zero_grad, forward, backward, clipping, optimizer step) on a real batch
  (--batch-size: Newton-Schulz costs the same for any batch, so a bigger batch makes it a smaller share);
- `optimizer_step`: the optimizer step alone, on fixed real gradients (make_adamw against make_muon);
- where Muon's time goes: Newton-Schulz (shared.muon.newton_schulz, one matrix at a time as the optimizer runs
  it) per matrix shape, times the number of matrices of that shape, in bfloat16 (torch.optim.Muon's only dtype)
  and in float32, and batched over the matrices of one shape (a diagnostic: the optimizer takes them one by one).
- which dtype make_muon's Muon iterated in (`newton_schulz_dtype`: bfloat16 where `bf16_native`, else float32).

Without native bfloat16 (an AVX2-only CPU; to imitate one on a CPU that has it, run with
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2), bfloat16 matmuls are emulated and many times slower:
`--newton-schulz-dtype bfloat16` forces torch.optim.Muon's choice to show what it costs there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from char_gpt import MODEL_OPTIONS, SHAPES, git_commit, load_average  # noqa: E402

from shared.distributed import Precision  # noqa: E402
from shared.gpt import GPT, GPTConfig  # noqa: E402
from shared.muon import bf16_is_native, newton_schulz  # noqa: E402
from shared.shakespeare import CharTokenizer, block_batches, load_tiny_shakespeare  # noqa: E402
from shared.training import lm_loss, make_adamw, make_muon  # noqa: E402

DTYPES = {"auto": None, "bfloat16": torch.bfloat16, "float32": torch.float32}


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def interleaved_ms(fns: dict, repeats: int, warmup: int = 3) -> dict[str, float]:
    """Median milliseconds of each function, called in turn (a, b, a, b, ...) after `warmup` rounds."""
    times = {name: [] for name in fns}
    for i in range(warmup + repeats):
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            if i >= warmup:
                times[name].append(time.perf_counter() - started)
    return {name: round(1000 * statistics.median(t), 3) for name, t in times.items()}


def measure(threads: int, repeats: int, batch_size: int | None = None, ns_dtype: torch.dtype | None = None) -> dict:
    torch.set_num_threads(threads)
    shape = dict(SHAPES["modern"], **({} if batch_size is None else {"batch_size": batch_size}))
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer.from_text(text)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=shape["block_size"], n_layers=shape["n_layers"],
                       n_heads=shape["n_heads"], d_model=shape["d_model"], dropout=0.0,
                       **{k: shape[k] for k in MODEL_OPTIONS if k in shape})
    batches = block_batches(tokenizer.encode(text), config.block_size, shape["batch_size"], seed=0)
    amp = Precision("fp32")
    runs = {}
    for name, make in (("adamw", make_adamw), ("muon", make_muon)):
        torch.manual_seed(0)
        model = GPT(config)
        options = dict(newton_schulz_dtype=ns_dtype) if name == "muon" else {}
        runs[name] = (model, make(model, lr=shape["lr"], **options))

    def train_step(name):
        model, optimizer = runs[name]
        x, y = batches(0)

        def step():
            optimizer.zero_grad(set_to_none=True)
            lm_loss(model(x), y)[0].backward()
            amp.step(optimizer, 1.0)
        return step

    train = interleaved_ms({name: train_step(name) for name in runs}, repeats)
    # the optimizer step alone, on the gradients the last training step left (fixed from here on)
    optim = interleaved_ms({name: runs[name][1].step for name in runs}, 4 * repeats)

    matrices = runs["muon"][1].muon.param_groups[0]["params"]
    ns_used = runs["muon"][1].muon.dtype_for(matrices[0].device)
    shapes = Counter(tuple(p.shape) for p in matrices)
    per_shape = []
    for (rows, cols), count in shapes.items():
        g = torch.randn(rows, cols)
        stack = torch.randn(count, rows, cols)
        ns = interleaved_ms({"bf16": lambda g=g: newton_schulz(g, dtype=torch.bfloat16),
                             "fp32": lambda g=g: newton_schulz(g, dtype=torch.float32),
                             "batched": lambda stack=stack: newton_schulz(stack, dtype=ns_used)}, 4 * repeats)
        per_shape.append(dict(shape=[rows, cols], count=count, ns_bf16_ms=round(ns["bf16"], 4),
                              ns_fp32_ms=round(ns["fp32"], 4), batched_ns_total_ms=round(ns["batched"], 3)))
    ns_key = "ns_bf16_ms" if ns_used == torch.bfloat16 else "ns_fp32_ms"
    ns_total = sum(s[ns_key] * s["count"] for s in per_shape)
    # Newton-Schulz's FLOPs: per iteration on an m x n matrix (m <= n, after the transpose) X Xᵀ: 2m²n,
    # the Gram matrix squared: 2m³, and that times X: 2m²n; against ~6 x parameters x tokens for forward + backward
    ns_flops = sum(5 * (4 * min(p.shape) ** 2 * max(p.shape) + 2 * min(p.shape) ** 3) for p in matrices)
    weights = sum(p.numel() for n, p in runs["muon"][0].named_parameters() if n.startswith("blocks."))
    tokens = shape["batch_size"] * config.block_size
    return dict(
        threads=threads,
        batch_size=shape["batch_size"],
        newton_schulz_gflop=round(ns_flops / 1e9, 3),
        forward_backward_gflop_estimate=round(6 * weights * tokens / 1e9, 3),  # block weights only, no attention
        train_step_ms=train,
        train_step_ratio=round(train["muon"] / train["adamw"], 3),
        optimizer_step_ms=optim,
        optimizer_step_ratio=round(optim["muon"] / optim["adamw"], 3),
        muon_matrices=len(matrices),
        newton_schulz_dtype=str(ns_used).removeprefix("torch."),  # what make_muon's Muon iterated in
        newton_schulz=per_shape,
        newton_schulz_total_ms=round(ns_total, 3),  # in that dtype
        newton_schulz_bf16_total_ms=round(sum(s["ns_bf16_ms"] * s["count"] for s in per_shape), 3),
        newton_schulz_fp32_total_ms=round(sum(s["ns_fp32_ms"] * s["count"] for s in per_shape), 3),
        newton_schulz_batched_total_ms=round(sum(s["batched_ns_total_ms"] for s in per_shape), 3),
        extra_ms_per_step=round(train["muon"] - train["adamw"], 3),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch thread counts to try")
    parser.add_argument("--repeats", type=int, default=40, help="interleaved training steps per optimizer")
    parser.add_argument("--batch-size", type=int, default=None, help="sequences per step (default: the shape's 12)")
    parser.add_argument("--newton-schulz-dtype", choices=list(DTYPES), default="auto",
                        help="Muon's iteration dtype (auto: bfloat16 where native, else float32; bfloat16: "
                             "torch.optim.Muon's)")
    args = parser.parse_args()
    loadavg_start, (commit, dirty) = load_average(), git_commit()
    started = time.perf_counter()
    results = [measure(t, args.repeats, args.batch_size, DTYPES[args.newton_schulz_dtype]) for t in args.threads]
    print(json.dumps(dict(benchmark="muon_step", shape="modern", repeats=args.repeats, results=results,
                          bf16_native=bf16_is_native("cpu"), cpu_capability=torch.backends.cpu.get_cpu_capability(),
                          onednn_max_cpu_isa=os.environ.get("ONEDNN_MAX_CPU_ISA"),
                          wall_seconds=round(time.perf_counter() - started, 1), load_average_start=loadavg_start,
                          load_average_end=load_average(),
                          command=" ".join(["python", "benchmarks/muon_step.py", *sys.argv[1:]]),
                          commit=commit, commit_dirty=dirty, torch=torch.__version__)))


if __name__ == "__main__":
    main()
