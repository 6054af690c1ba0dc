"""Test helpers: weight copying into PyTorch's built-in modules (equivalence tests), and running exercise checkers."""

import contextlib
import http.server
import os
import signal
import subprocess
import sys
import threading

import torch
from torch import nn

from shared.attention import MultiHeadAttention


@torch.no_grad()
def copy_mha_to_torch(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """torch keeps W^Q, W^K, W^V stacked in one in_proj matrix (3 * d_model, d_model)."""
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.load_state_dict(ours.w_o.state_dict())


@torch.no_grad()
def copy_layer_to_torch(ours, theirs) -> None:
    """Copy an EncoderLayer/DecoderLayer into nn.TransformerEncoderLayer/TransformerDecoderLayer."""
    copy_mha_to_torch(ours.self_attn, theirs.self_attn)
    if hasattr(ours, "cross_attn"):
        copy_mha_to_torch(ours.cross_attn, theirs.multihead_attn)
        theirs.norm3.load_state_dict(ours.norm3.state_dict())
    theirs.linear1.load_state_dict(ours.ff.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.ff.linear2.state_dict())
    theirs.norm1.load_state_dict(ours.norm1.state_dict())
    theirs.norm2.load_state_dict(ours.norm2.state_dict())


def verdict(check, fn, capsys):
    """Run an exercise checker; return (result, printed feedback)."""
    result = check(fn)
    return result, capsys.readouterr().out


def accepts(check, fn, capsys):
    """The checker passes `fn` and says so."""
    result, out = verdict(check, fn, capsys)
    assert result is True, out
    assert out.startswith("✓"), out


def rejects(check, fn, capsys, *fragments):
    """The checker rejects `fn` with feedback that contains every fragment; returns the feedback."""
    result, out = verdict(check, fn, capsys)
    assert result is False, out
    assert out.startswith("✗"), out
    for fragment in fragments:
        assert fragment in out, f"expected {fragment!r} in the feedback:\n{out}"
    return out


def run_two_ranks(worker, out, cwd, timeout: float = 300) -> None:
    """Run `worker OUT` as 2 gloo ranks under torchrun; on failure or timeout, fail with its output. The ranks run
    in a session of their own, killed as a whole on timeout, so that a rank stuck in a collective does not outlive
    the test."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(worker), str(out)]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and both ranks
        stdout, stderr = proc.communicate()
        raise AssertionError(f"the 2 ranks did not finish within {timeout} s (a rank stuck in a collective?):\n"
                             + stdout[-3000:] + stderr[-3000:]) from None
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]


@contextlib.contextmanager
def local_server(handler):
    """An HTTP server on 127.0.0.1 (a free port) in a thread, with `handler`; yields its URL, without a final '/'."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
