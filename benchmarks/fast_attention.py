"""Peak memory and time of attention's forward + backward: plain vs tiled vs PyTorch's SDPA; print ONE JSON line.

    python benchmarks/fast_attention.py                  # T = 512 ... 8192, one head, d_k = 64, causal
    python benchmarks/fast_attention.py --max-t 2048 --repeats 3

Variants, all on the same (1, 1, T, 64) float32 q, k, v with requires_grad, causal, output summed then backward
(the same three functions as notebook 15's section 5):
- plain: `shared.attention.scaled_dot_product_attention` with `causal_mask` (notebooks 01 and 03), keeping only its
  output (the returned weights are dropped at once, as a model does);
- tiled: `shared.fast_attention.tiled_attention` (notebook 15) with blocks of --block (128) queries and keys;
- sdpa: `torch.nn.functional.scaled_dot_product_attention(is_causal=True)`, PyTorch's fused CPU kernel.

Memory: `shared.debug.peak_cpu_memory`, torch.profiler's allocation events summed in time order: the most bytes
held at once during the call, above what was allocated before it (the inputs, created beforehand, are not
counted; the gradients dq, dk, dv are, alike for all three). It sees every allocation of torch's CPU allocator,
and nothing else (not the interpreter, not pages malloc keeps): the check `calibration` allocates two known
tensors and must read exactly their size. As a second, independent reading, `rss_check` runs plain and tiled at
the largest T, each in a fresh process, and reports the growth of its peak resident memory (Linux's VmHWM, reset
just before the call) over the resident memory before it: that sees every page the process touched, torch's or
not. Times: one torch thread, the variants called in turn (plain, tiled, sdpa,
plain, ...); medians in milliseconds. That spreads a busy machine's load over the variants, but does not make it
slow each alike. Block sizes are timed the same way, interleaved,
at --sweep-t; so are the tiled forward + backward with and without the causal mask, and plain, at --sweep-t
(`skip_ms_at_sweep_t`): tiled without a mask does all T^2 scores, as plain does.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from char_gpt import git_commit, load_average  # noqa: E402

from shared.attention import scaled_dot_product_attention  # noqa: E402
from shared.debug import peak_cpu_memory  # noqa: E402
from shared.fast_attention import tiled_attention  # noqa: E402
from shared.masks import causal_mask  # noqa: E402

D_K = 64


def inputs(T: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """q, k, v (1, 1, T, 64) float32 leaves with requires_grad."""
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, 1, T, D_K, generator=g).requires_grad_() for _ in range(3))


def variants(block: int) -> dict:
    """name -> function(q, k, v) that runs forward + backward of causal attention."""
    def plain(q, k, v):
        scaled_dot_product_attention(q, k, v, causal_mask(q.size(-2), q.device))[0].sum().backward()

    def tiled(q, k, v):
        tiled_attention(q, k, v, causal=True, block_q=block, block_k=block).sum().backward()

    def sdpa(q, k, v):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    return dict(plain=plain, tiled=tiled, sdpa=sdpa)


def interleaved_ms(fns: dict, args: tuple, repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median milliseconds of each function on args, called in turn (a, b, c, a, ...) after `warmup` rounds."""
    times = {name: [] for name in fns}
    for i in range(warmup + repeats):
        for name, fn in fns.items():
            for x in args:
                x.grad = None
            started = time.perf_counter()
            fn(*args)
            if i >= warmup:
                times[name].append(time.perf_counter() - started)
    return {name: round(1000 * statistics.median(t), 2) for name, t in times.items()}


def calibration() -> dict:
    """The profiler's reading of two tensors of known size held at once (must be exact)."""
    def two():
        a = torch.empty(1000, 1000)  # 4,000,000 bytes
        b = torch.empty(500, 1000)  # 2,000,000 bytes
        return a, b
    report = peak_cpu_memory(two)
    return dict(expected=6_000_000, measured=report.peak, exact=report.peak == 6_000_000)


RSS_SCRIPT = """
import sys, torch
sys.path[:0] = [{root!r}, {here!r}]
from fast_attention import inputs, variants
torch.set_num_threads(1)
x = inputs({T})
fn = variants({block})[{name!r}]
fn(*inputs(256))  # a first small call loads the kernels' code and workspaces, which are not what we measure
def status(key):
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key + ":"))
open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current resident size
before = status("VmRSS")
fn(*x)
print(status("VmHWM") - before)
"""


def rss_check(T: int, block: int) -> dict | None:
    """Peak resident memory growth (bytes) of plain and tiled at T, each in a fresh process; None off Linux."""
    if not Path("/proc/self/clear_refs").exists():
        return None
    here = Path(__file__).resolve().parent
    found = {}
    for name in ("plain", "tiled"):
        code = RSS_SCRIPT.format(root=str(here.parent), here=str(here), T=T, block=block, name=name)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
        found[name] = int(done.stdout.split()[-1])
    return found


def slope(xs: list[int], ys: list[int]) -> float:
    """Least-squares slope of log(y) against log(x): 1 for linear growth, 2 for quadratic."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-t", type=int, default=8192, help="largest T (powers of two from 512)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per T (after one warm-up round)")
    parser.add_argument("--sweep-t", type=int, default=2048, help="T at which block sizes are compared")
    parser.add_argument("--blocks", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    parser.add_argument("--block", type=int, default=128, help="tiled's block size for the memory and time runs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    started, load_start = time.perf_counter(), load_average()

    sweep_args = inputs(args.sweep_t)
    block_ms = interleaved_ms({str(b): variants(b)["tiled"] for b in args.blocks}, sweep_args, args.repeats)
    best = int(min(block_ms, key=block_ms.get))
    fns = variants(args.block)
    skip_ms = interleaved_ms({"tiled causal": fns["tiled"], "tiled no mask": lambda q, k, v: tiled_attention(
        q, k, v, block_q=args.block, block_k=args.block).sum().backward(), "plain": fns["plain"]},
        sweep_args, args.repeats)

    sizes = [512 * 2 ** i for i in range(int(math.log2(args.max_t // 512)) + 1)]
    peak = {name: [] for name in fns}
    times = {name: [] for name in fns}
    for T in sizes:
        x = inputs(T)
        for name, fn in fns.items():  # memory: one call each (allocations do not vary between calls)
            for t in x:
                t.grad = None
            peak[name].append(peak_cpu_memory(lambda fn=fn, x=x: fn(*x)).peak)
        for name, ms in interleaved_ms(fns, x, args.repeats if T <= 4096 else max(1, args.repeats - 1)).items():
            times[name].append(ms)
    ratio = peak["plain"][-1] / peak["tiled"][-1]
    commit, dirty = git_commit()
    print(json.dumps(dict(
        benchmark="fast_attention", d_k=D_K, heads=1, dtype="float32", causal=True, threads=1, T=sizes,
        memory_method="torch.profiler allocation events (shared.debug.peak_cpu_memory), bytes above the start",
        calibration=calibration(), peak_bytes=peak, rss_check=rss_check(sizes[-1], args.block),
        log_log_slope={name: round(slope(sizes, ys), 3) for name, ys in peak.items()},
        plain_over_tiled_peak_at_max_t=round(ratio, 1), goal_20x_met=ratio >= 20,
        time_ms=times, block=args.block, plain_variant="output only", block_sizes=args.blocks,
        block_ms_at_sweep_t=block_ms, sweep_t=args.sweep_t, best_block=best, skip_ms_at_sweep_t=skip_ms,
        repeats=args.repeats,
        wall_seconds=round(time.perf_counter() - started, 1), load_average_start=load_start,
        load_average_end=load_average(), command=" ".join(["python", "benchmarks/fast_attention.py", *sys.argv[1:]]),
        commit=commit, commit_dirty=dirty, torch=torch.__version__)))


if __name__ == "__main__":
    main()
