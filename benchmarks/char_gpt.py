"""Train a character-level GPT on tiny Shakespeare from scratch within a time budget; print ONE JSON line.

    python benchmarks/char_gpt.py --seconds 150            # validation loss after 150 s of training
    python benchmarks/char_gpt.py --shape nanogpt --seconds 30   # throughput of nanoGPT's CPU shape
    torchrun --standalone --nproc_per_node=2 benchmarks/char_gpt.py --seconds 30   # data-parallel (notebook 11)
    python benchmarks/char_gpt.py --shape modern             # Llama-style block (notebook 10)
    python benchmarks/char_gpt.py --set norm=rmsnorm         # the default shape with one option changed
    python benchmarks/char_gpt.py --shape modern --optimizer muon   # Muon on the blocks' matrices, AdamW on the rest
    python benchmarks/char_gpt.py --shape modern --target-loss 1.886   # also: training seconds to reach val 1.886
    python benchmarks/char_gpt.py --tokenizer bpe --vocab-size 1024   # byte-level BPE tokens (notebook 13)

The learning-rate schedule (linear warm-up, then cosine) follows the clock, so the decay ends exactly
when the time budget runs out. val_loss is measured over the WHOLE validation split. ms_per_step is the
mean over the run; ms_per_step_median is the median of the times between the starts of successive steps
(like nanoGPT's per-iteration dt), which a few slow steps (start-up, logging, a busy machine) do not move.

--target-loss X evaluates the whole validation split every --eval-every steps (25 by default) until the loss
first reaches X, and reports the training seconds at that evaluation (target_seconds): the evaluations are
not on the training clock (train() times only its steps), and the schedule stays the one set for --seconds.
--tokenizer bpe trains byte-level BPE (shared.tokenization) on the training split's text only (the first 90 % of
the characters, the same split as the characters') and trains the same model on its tokens. A per-token loss is
not comparable across vocabularies, so every line also reports bits_per_byte: the validation loss summed over the
predicted tokens, in bits, divided by the bytes those tokens stand for. --sample-chars N adds N characters of
text sampled from the trained model (temperature 0.8).
The line also records the command, the optimizer and its learning rates, the load average before and after, and
the commit; with Muon, the dtype its Newton-Schulz ran in (bf16_native: whether the CPU or GPU has bfloat16 in
hardware). --clock cpu counts --seconds (and every time in the line) in the process's CPU seconds: with --threads 1
on a busy machine each run then gets the same work, only later.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.checkpoint import save_checkpoint  # noqa: E402
from shared.distributed import PRECISIONS, Precision, Ranks, distributed, shard_batches, wrap  # noqa: E402
from shared.generation.lm import generate  # noqa: E402
from shared.gpt import GPT, GPTConfig  # noqa: E402
from shared.history import History  # noqa: E402
from shared.kv_cache import kv_cache_bytes  # noqa: E402
from shared.muon import bf16_is_native  # noqa: E402
from shared.shakespeare import CharTokenizer, block_batches, load_tiny_shakespeare, split_loss, train_val_split  # noqa: E402
from shared.tokenization.train import train_tokenizer  # noqa: E402
from shared.training import lm_loss, make_adamw, make_muon, train, warmup_cosine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# model sizes and optimisation settings per shape; "nanogpt" is nanoGPT's CPU recipe, "tuned" (the default) keeps
# its model but uses lr 3e-3 with warm-up + cosine ending at the deadline; 12 x 64 batches gave the most tokens/s on
# a 2-core CPU (bigger batches were slower per token), and block 128 (batch 6) scored worse in the same time.
SHAPES = {
    "tuned": dict(n_layers=4, n_heads=4, d_model=128, block_size=64, batch_size=12, lr=3e-3, warmup=100),
    "nanogpt": dict(n_layers=4, n_heads=4, d_model=128, block_size=64, batch_size=12, lr=1e-3, warmup=100),
}
# "modern": the tuned shape with a Llama-style block (notebook 10): RMSNorm, RoPE, SwiGLU, grouped-query attention,
# fused QKV, no biases; d_ff is raised so that the parameter count stays within 1 % of the tuned shape's.
SHAPES["modern"] = dict(SHAPES["tuned"], norm="rmsnorm", position="rope", activation="swiglu", n_kv_heads=2,
                        fused_qkv=True, bias=False, d_ff=392)
MODEL_OPTIONS = ("norm", "position", "activation", "d_ff", "n_kv_heads", "fused_qkv", "bias")  # GPTConfig fields


def parse_value(text: str):
    """'true'/'false' -> bool, 'none' -> None, else int, float or the string itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class StepClock:
    """batch_fn(step) that notes when each step starts; the gaps between starts are whole-step times."""

    def __init__(self, batch_fn) -> None:
        self.batch_fn, self.starts = batch_fn, []

    def __call__(self, step: int):
        self.starts.append(time.perf_counter())
        return self.batch_fn(step)

    def median_ms(self) -> float:
        """Median milliseconds from one step's start to the next's (the last step has no next: left out)."""
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:])]
        return 1000 * statistics.median(gaps) if gaps else float("nan")


class TargetWatch:
    """eval_fn for train(): the whole-split validation loss, timed, until it first reaches `target` (None: never).

    One evaluation of the whole split costs about as much as 50 training steps, so with a target it is skipped
    (NaN) while the training loss logged at this step (`history`) is above target + `margin`, and after
    the target is reached. The validation loss of this model is not below its training loss, so a skipped
    evaluation could not have reached the target.
    """

    def __init__(self, val_tokens, block_size: int, target: float | None, history: History, margin: float) -> None:
        self.val_tokens, self.block_size, self.target = val_tokens, block_size, target
        self.history, self.margin = history, margin
        self.reached, self.seconds, self.count, self.skipped = False, 0.0, 0, 0

    def __call__(self, model) -> float:
        far = self.target is not None and self.history.loss and self.history.loss[-1] > self.target + self.margin
        if self.reached or far:
            self.skipped += not self.reached
            return math.nan
        started = time.perf_counter()
        loss = split_loss(model, self.val_tokens, self.block_size, batch_size=64)
        self.seconds, self.count = self.seconds + time.perf_counter() - started, self.count + 1
        self.reached = self.target is not None and loss <= self.target
        return loss


def tokenized_splits(text: str, kind: str, vocab_size: int):
    """(tokenizer, train ids (N,), val ids (M,), val bytes predicted): the first 90 % of the characters train
    (and, for "bpe", train the tokenizer), the rest validate; the first validation token is not predicted."""
    n_train = int(0.9 * len(text))
    if kind == "char":
        tokenizer = CharTokenizer.from_text(text)
        train_ids, val_ids = train_val_split(tokenizer.encode(text))  # the same cut: one token per character
        first = tokenizer.decode(val_ids[:1]).encode("utf-8")
    else:
        tokenizer = train_tokenizer(text[:n_train], vocab_size)
        train_ids, val_ids = (torch.tensor(tokenizer.encode(t), dtype=torch.long) for t in (text[:n_train],
                                                                                             text[n_train:]))
        first = tokenizer.decode_bytes(val_ids[:1].tolist())
    return tokenizer, train_ids, val_ids, len(text[n_train:].encode("utf-8")) - len(first)


def sample_text(model, tokenizer, n_chars: int, seed: int) -> str:
    """`n_chars` characters sampled (temperature 0.8) after a newline."""
    ids = torch.as_tensor(tokenizer.encode("\n"), dtype=torch.long)  # CharTokenizer gives a tensor, BPE a list
    prompt = ids[None].to(next(model.parameters()).device)  # (1, T)
    out = generate(model, prompt, n_chars, temperature=0.8, generator=torch.Generator().manual_seed(seed))
    return tokenizer.decode(out[0, 1:].tolist())[:n_chars]


def command_line(argv: list[str]) -> str:
    """The command that reproduces this run, quoted so that a shell reads it back as the same arguments."""
    return shlex.join(["python", "benchmarks/char_gpt.py", *argv])


def git_commit() -> tuple[str, bool | None]:
    """(git rev-parse HEAD, whether shared/ or benchmarks/ differ from it); ("unknown", None) outside a checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--", "shared", "benchmarks"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown", None
    return commit, bool(changed)


def load_average() -> list[float] | None:
    """os.getloadavg(): processes running or waiting over the last 1, 5 and 15 minutes (None where unsupported)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def main(ranks: Ranks | None = None) -> None:
    """Under torchrun each rank trains on its shard of every global batch; rank 0 evaluates and prints."""
    ranks = ranks or Ranks()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=150.0, help="training time budget (wall seconds)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tuned")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, default=None, help="write a checkpoint of the trained model here")
    parser.add_argument("--precision", choices=("auto", *PRECISIONS), default="fp32", help="autocast dtype")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help=f"override a shape setting or a model option ({', '.join(MODEL_OPTIONS)})")
    parser.add_argument("--optimizer", choices=("adamw", "muon"), default="adamw",
                        help="muon: Muon (shared.muon, torch.optim.Muon's algorithm) on the blocks' 2-D weights, AdamW "
                             "(at the shape's lr) on the rest")
    parser.add_argument("--muon-lr", type=float, default=None, help="Muon's peak lr (default: the shape's lr)")
    parser.add_argument("--adjust-lr-fn", choices=("match_rms_adamw", "original"), default="match_rms_adamw",
                        help="how Muon scales its lr per matrix shape")
    parser.add_argument("--muon-momentum", type=float, default=0.95, help="Muon's Nesterov momentum")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="what --seconds and every time in the line count: wall seconds, or this process's CPU "
                             "seconds (time.process_time; needs --threads 1): on a busy machine the CPU clock "
                             "gives each run the same work whatever the load, and only the wall time grows")
    parser.add_argument("--target-loss", type=float, default=None,
                        help="report the training seconds until the whole-split validation loss first reaches this")
    parser.add_argument("--eval-every", type=int, default=None,
                        help="evaluate the whole validation split every N steps, off the clock "
                             "(default: 25 with --target-loss, else never)")
    parser.add_argument("--tokenizer", choices=("char", "bpe"), default="char",
                        help="char: one token per character; bpe: byte-level BPE trained on the training split")
    parser.add_argument("--vocab-size", type=int, default=1024, help="the BPE vocabulary (with --tokenizer bpe)")
    parser.add_argument("--sample-chars", type=int, default=0, help="add this many characters of sampled text")
    parser.add_argument("--screen-margin", type=float, default=0.25,
                        help="with --target-loss, evaluate only once the logged training loss is within this of "
                             "the target (inf: always)")
    args = parser.parse_args()
    if args.seconds <= 0:
        parser.error(f"--seconds must be > 0, got {args.seconds}")
    eval_every = args.eval_every if args.eval_every is not None else (25 if args.target_loss is not None else 0)
    if eval_every < 0 or (args.target_loss is not None and eval_every == 0):
        parser.error(f"--eval-every must be >= 0 (and > 0 with --target-loss), got {args.eval_every}")
    if args.optimizer == "adamw" and args.muon_lr is not None:
        parser.error("--muon-lr needs --optimizer muon")
    loadavg_start, (commit, dirty) = load_average(), git_commit()

    shape = dict(SHAPES[args.shape])
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in shape and key not in MODEL_OPTIONS:
            parser.error(f"--set: unknown key {key!r}; known: {sorted(set(shape) | set(MODEL_OPTIONS))}")
        shape[key] = parse_value(value)
        if key in ("lr",) and isinstance(shape[key], int):
            shape[key] = float(shape[key])
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "cpu":
        if args.threads != 1:
            parser.error(f"--clock cpu needs --threads 1 (one thread's CPU seconds), got --threads {args.threads}")
        time.perf_counter = time.process_time  # train(), StepClock and this script all read it: now CPU seconds
    torch.manual_seed(args.seed)

    text = load_tiny_shakespeare()
    tokenizer, train_tokens, val_tokens, val_bytes = tokenized_splits(text, args.tokenizer, args.vocab_size)
    options = {k: shape[k] for k in MODEL_OPTIONS if k in shape}
    try:
        config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=shape["block_size"],
                           n_layers=shape["n_layers"], n_heads=shape["n_heads"], d_model=shape["d_model"],
                           dropout=0.0, **options)
    except (TypeError, ValueError) as err:
        parser.error(f"--set: {err}")
    model = GPT(config).to(ranks.device)
    if args.optimizer == "muon":
        muon_lr = shape["lr"] if args.muon_lr is None else args.muon_lr
        optimizer = make_muon(model, lr=muon_lr, adamw_lr=shape["lr"], weight_decay=0.1, betas=(0.9, 0.99),
                              momentum=args.muon_momentum, adjust_lr_fn=args.adjust_lr_fn)
        ns_dtype = optimizer.muon.dtype_for(ranks.device)  # bfloat16 where native, else float32
        optim = dict(optimizer="muon", muon_lr=muon_lr, adamw_lr=shape["lr"], adjust_lr_fn=args.adjust_lr_fn,
                     muon_momentum=args.muon_momentum, newton_schulz_dtype=str(ns_dtype).removeprefix("torch."))
    else:
        optimizer = make_adamw(model, lr=shape["lr"], weight_decay=0.1, betas=(0.9, 0.99))
        optim = dict(optimizer="adamw", adamw_lr=shape["lr"])
    batch_fn = block_batches(train_tokens, config.block_size, shape["batch_size"], seed=args.seed, device=ranks.device)
    batch_fn = shard_batches(batch_fn, ranks)  # batch_size is the global batch: each rank keeps its slice
    clock = StepClock(batch_fn)  # the same batches, noting when each step starts
    amp = Precision(args.precision, ranks.device)

    def loss_fn(model, batch):
        x, y = batch
        return lm_loss(model(x), y)

    history = History()  # logged at each evaluation: it holds the training seconds and loss of that step
    watch = TargetWatch(val_tokens, config.block_size, args.target_loss, history, args.screen_margin)
    started = time.perf_counter()
    history = train(wrap(model, ranks), optimizer, clock, loss_fn, max_steps=10**9, max_seconds=args.seconds,
                    schedule=warmup_cosine(shape["warmup"], min_ratio=0.1), log_every=eval_every or 50,
                    progress=False, precision=amp, eval_fn=watch if eval_every else None, eval_every=eval_every,
                    history=history)
    wall = time.perf_counter() - started
    if not ranks.is_main:  # the replicas are identical: rank 0 alone evaluates, saves and reports
        return
    eval_started = time.perf_counter()
    val_loss = split_loss(model, val_tokens, config.block_size, batch_size=64)
    eval_seconds = time.perf_counter() - eval_started
    model.eval()
    caches = model.new_caches()
    with torch.no_grad():  # KV-cache bytes for one sequence of block_size tokens, measured from the tensors
        model(val_tokens[None, : config.block_size].to(ranks.device), caches=caches)
    kv_bytes_per_token = kv_cache_bytes(caches) / config.block_size
    if args.save is not None:
        extra = {"chars": tokenizer.chars} if args.tokenizer == "char" else {"bpe_vocab": tokenizer.vocab}
        save_checkpoint(args.save, model, config, extra={**extra, "val_loss": val_loss})

    train_seconds = history.seconds[-1]
    seconds_at = dict(zip(history.step, history.seconds))
    curve = [[step, round(seconds_at[step], 2), round(loss, 4)]
             for step, loss in zip(history.val_step, history.val_loss) if not math.isnan(loss)]
    hit = next((point for point in curve if args.target_loss is not None and point[2] <= args.target_loss), None)
    result = {
        "benchmark": "char_gpt",
        "shape": args.shape,
        "optimizer": args.optimizer,
        "world_size": ranks.world_size,
        "precision": amp.name,
        "seconds": round(train_seconds, 2),
        "wall_seconds": round(wall, 2),
        "steps": history.step[-1],
        "tokens_seen": history.tokens[-1],
        "tokens_per_s": round(history.tokens[-1] / train_seconds, 1),
        "ms_per_step": round(1000 * train_seconds / history.step[-1], 2),
        "ms_per_step_median": round(clock.median_ms(), 2),
        "train_loss_last": round(history.loss[-1], 4),
        "val_loss": round(val_loss, 4),
        "val_tokens": len(val_tokens) - 1,
        "tokenizer": args.tokenizer,
        "vocab_size": tokenizer.vocab_size,
        "val_bytes": val_bytes,  # the bytes that the val_tokens predicted stand for
        "bits_per_byte": round(val_loss * (len(val_tokens) - 1) / (math.log(2) * val_bytes), 4),
        "train_tokens": len(train_tokens),
        "eval_seconds": round(eval_seconds, 2),
        "parameters": model.num_parameters(),
        "kv_cache_bytes_per_token": kv_bytes_per_token,
        "config": asdict(config),
        "optim": {**{k: shape[k] for k in ("batch_size", "lr", "warmup")}, **optim},
        "threads": torch.get_num_threads(),
        "clock": args.clock,
        "bf16_native": bf16_is_native(ranks.device),  # Muon's Newton-Schulz dtype is in "optim"
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "command": command_line(sys.argv[1:]),
        "load_average_start": loadavg_start,
        "load_average_end": load_average(),
        "commit": commit,
        "commit_dirty": dirty,  # shared/ or benchmarks/ had changes not in that commit
        "seed": args.seed,
    }
    if args.sample_chars:
        result["sample"] = sample_text(model, tokenizer, args.sample_chars, args.seed)
    if eval_every:
        result.update(target_loss=args.target_loss, eval_every=eval_every,
                      target_step=hit[0] if hit else None, target_seconds=hit[1] if hit else None,
                      target_val_loss=hit[2] if hit else None, evaluations=watch.count,
                      screen_margin=args.screen_margin, evaluations_skipped=watch.skipped,
                      eval_seconds_during_training=round(watch.seconds, 2), val_curve=curve)
    print(json.dumps(result))


if __name__ == "__main__":
    with distributed() as ranks:  # one plain process, or one of torchrun's (gloo on CPU, nccl on CUDA)
        main(ranks)
