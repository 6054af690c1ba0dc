"""shared.muon: the course's Muon takes torch.optim.Muon's steps, with Newton-Schulz in bf16 only where it is native.

- where bfloat16 is native, the same updates as torch.optim.Muon (which always iterates in bfloat16);
- in float32, the same updates as torch.optim.Muon's algorithm with its iteration run in float32;
- the dtype follows the hardware probe (monkeypatched here, so both branches run on any CPU);
- newton_schulz is notebook 10's by-hand iteration, for batches and tall matrices too.
"""

import re

import pytest
import torch
import torch.optim._muon as torch_muon

import shared.muon as muon
from shared.gpt import GPT, GPTConfig
from shared.muon import Muon, bf16_is_native, newton_schulz, newton_schulz_dtype
from shared.training import make_muon

SHAPES = [(16, 48), (48, 16), (32, 32)]  # wide, tall (iterated transposed), square


def relative(a, b):
    return ((a - b).norm() / b.norm()).item()


def updates(make_optimizer, steps=3):
    """Each step's update (before - after) of three seeded matrices, given fresh seeded gradients each step."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*shape) * 0.1) for shape in SHAPES]
    optimizer, moves = make_optimizer(params), []
    for step in range(steps):
        generator = torch.Generator().manual_seed(step)
        for p in params:
            p.grad = torch.randn(p.shape, generator=generator)
        before = [p.detach().clone() for p in params]
        optimizer.step()
        moves += [b - p.detach() for b, p in zip(before, params)]
    return moves


def by_hand(G, steps=5):
    """Notebook 10's `orthogonalise` (one wide matrix), as the notebook writes it."""
    a, b, c = muon.MUON_COEFFICIENTS
    X = G / G.norm()
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X


def torch_iteration_in_float32(grad, ns_coefficients, ns_steps, eps):
    """torch.optim.Muon's own _zeropower_via_newtonschulz, line for line, with float32 for bfloat16."""
    a, b, c = ns_coefficients
    ortho = grad.float()
    if grad.size(0) > grad.size(1):
        ortho = ortho.T
    ortho = ortho / ortho.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = ortho @ ortho.T
        ortho = torch.addmm(ortho, torch.addmm(gram, gram, gram, beta=b, alpha=c), ortho, beta=a)
    return ortho.T if grad.size(0) > grad.size(1) else ortho


def test_newton_schulz_is_the_notebooks_iteration_for_any_shape():
    torch.manual_seed(0)
    wide = torch.randn(6, 10, dtype=torch.float64)
    assert torch.allclose(newton_schulz(wide), by_hand(wide), atol=1e-12)
    tall = torch.randn(10, 6, dtype=torch.float64)  # worked on transposed
    assert torch.allclose(newton_schulz(tall), by_hand(tall.T).T, atol=1e-12)
    batch = torch.randn(2, 3, 5, 4, dtype=torch.float64) * torch.tensor([0.01, 1.0, 100.0])[:, None, None]
    each = torch.stack([torch.stack([by_hand(m.T).T for m in row]) for row in batch])  # each matrix its own norm
    assert newton_schulz(batch).shape == (2, 3, 5, 4) and torch.allclose(newton_schulz(batch), each, atol=1e-12)
    assert newton_schulz(torch.zeros(3, 4)).eq(0).all()  # divided by eps, not by 0
    assert newton_schulz(wide, dtype=torch.bfloat16).dtype == torch.bfloat16


@pytest.mark.parametrize("options", [
    dict(lr=0.02, weight_decay=0.1, momentum=0.95, adjust_lr_fn="match_rms_adamw"),
    dict(lr=0.05, weight_decay=0.0, momentum=0.9, nesterov=False, adjust_lr_fn="original"),
])
def test_in_bfloat16_it_takes_torch_muons_steps(options, monkeypatch):
    monkeypatch.setattr(muon, "bf16_is_native", lambda device: True)  # a CPU or GPU with native bfloat16
    ours, theirs = updates(lambda ps: Muon(ps, **options)), updates(lambda ps: torch.optim.Muon(ps, **options))
    in_fp32 = updates(lambda ps: Muon(ps, newton_schulz_dtype=torch.float32, **options))
    for o, t, f in zip(ours, theirs, in_fp32):
        # both iterate in bfloat16 with one rounding per fused product (identical on the CPUs tried); float32 differs
        # from them by bfloat16's rounding (~1.5 %), so 0.2 % tells "the same computation" from "merely close"
        assert relative(o, t) < 2e-3 < relative(f, t)


def test_in_float32_it_takes_torch_muons_steps_with_a_float32_iteration(monkeypatch):
    options = dict(lr=0.02, weight_decay=0.1, momentum=0.95, adjust_lr_fn="match_rms_adamw")
    ours = updates(lambda ps: Muon(ps, newton_schulz_dtype=torch.float32, **options))
    monkeypatch.setattr(torch_muon, "_zeropower_via_newtonschulz", torch_iteration_in_float32)
    reference = updates(lambda ps: torch.optim.Muon(ps, **options))  # torch's momentum, lr scaling and decay
    for o, r in zip(ours, reference):
        assert relative(o, r) < 1e-5  # float32 rounding only (the two differ in how they batch the products)


def test_the_dtype_follows_the_hardware_probe(monkeypatch):
    seen = []
    real = muon.newton_schulz
    monkeypatch.setattr(muon, "newton_schulz", lambda *args: seen.append(args[-1]) or real(*args))
    for native, dtype in ((True, torch.bfloat16), (False, torch.float32)):
        monkeypatch.setattr(muon, "_cpu_has_native_bf16", lambda native=native: native)
        assert bf16_is_native("cpu") is native and newton_schulz_dtype("cpu") == dtype
        seen.clear()
        updates(lambda ps: Muon(ps), steps=1)
        assert seen == [dtype] * len(SHAPES)
        model = GPT(GPTConfig(vocab_size=10, block_size=8, n_layers=1, n_heads=2, d_model=16))
        assert f"Newton-Schulz in {str(dtype)[6:]}" in repr(make_muon(model, lr=1e-3))
    seen.clear()
    updates(lambda ps: Muon(ps, newton_schulz_dtype=torch.bfloat16), steps=1)  # an explicit dtype wins
    assert seen == [torch.bfloat16] * len(SHAPES)


def test_gpus_from_capability_8_0_and_other_devices(monkeypatch):
    for capability, native in (((7, 5), False), ((8, 0), True), ((9, 0), True)):  # a T4 is 7.5
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=capability: c)
        assert bf16_is_native("cuda") is native
        assert newton_schulz_dtype(torch.device("cuda", 0)) == (torch.bfloat16 if native else torch.float32)
    assert bf16_is_native("mps") is False  # untested there: float32


def test_the_state_dict_is_torch_muons_both_ways():
    options = dict(lr=0.02, weight_decay=0.1, momentum=0.95, adjust_lr_fn="match_rms_adamw")
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(8, 12))]
    params[0].grad = torch.randn(8, 12)
    theirs = torch.optim.Muon(params, **options)
    theirs.step()
    ours = Muon([torch.nn.Parameter(params[0].detach().clone())], **options)
    ours.load_state_dict(theirs.state_dict())  # a checkpoint saved by torch.optim.Muon (the course's before)
    assert ours.state_dict()["param_groups"] == theirs.state_dict()["param_groups"]
    assert torch.equal(ours.state_dict()["state"][0]["momentum_buffer"],
                       theirs.state_dict()["state"][0]["momentum_buffer"])
    back = torch.optim.Muon([torch.nn.Parameter(torch.zeros(8, 12))], **options)
    back.load_state_dict(ours.state_dict())
    assert back.state_dict()["param_groups"] == theirs.state_dict()["param_groups"]


def test_bad_newton_schulz_dtype():
    with pytest.raises(ValueError, match="newton_schulz_dtype must be None"):
        Muon([torch.nn.Parameter(torch.zeros(2, 3))], newton_schulz_dtype=torch.float16)
    with pytest.raises(ValueError, match="adjust_lr_fn"):
        muon.adjusted_lr(0.1, "match_rms", torch.Size([2, 3]))


def test_the_cpu_probe_confirms_onednn_with_a_measured_matmul(monkeypatch):
    # oneDNN says True for any AVX-512 CPU, also one without the BF16 extension (Skylake-SP to Ice Lake), where a
    # bfloat16 matmul is emulated, ~5x slower than float32; AVX2-only CPUs it calls False (no measurement needed)
    def never_measured():
        raise AssertionError("measured although oneDNN said no")

    monkeypatch.setattr(muon, "_onednn_says_bf16", lambda: False)
    monkeypatch.setattr(muon, "bf16_matmul_slowdown", never_measured)
    assert bf16_is_native("cpu") is False
    monkeypatch.setattr(muon, "_onednn_says_bf16", lambda: True)
    for slowdown, native in ((0.2, True), (1.2, True), (4.8, False), (64.0, False)):  # bf16 time / fp32 time
        monkeypatch.setattr(muon, "bf16_matmul_slowdown", lambda s=slowdown: s)
        assert bf16_is_native("cpu") is native and newton_schulz_dtype("cpu") == (
            torch.bfloat16 if native else torch.float32)


def test_the_measured_slowdown_is_a_real_ratio_taken_once():
    muon.bf16_matmul_slowdown.cache_clear()
    first = muon.bf16_matmul_slowdown()
    assert 0 < first < float("inf") and muon.bf16_matmul_slowdown() == first  # cached: one measurement a process
    assert muon.bf16_matmul_slowdown.cache_info().misses == 1


def test_a_matrix_added_later_must_still_be_2d():
    for shape in ((2, 4, 6), (6,)):  # torch.optim.Muon checks at construction, not in add_param_group
        optimizer = Muon([torch.nn.Parameter(torch.randn(4, 6))])
        bad = torch.nn.Parameter(torch.randn(shape))
        bad.grad = torch.randn(shape)
        optimizer.add_param_group({"params": [bad]})
        with pytest.raises(ValueError, match=re.escape(f"Muon steps 2-D parameters only, got shape {shape}")):
            optimizer.step()


def test_newton_schulz_names_bad_arguments_and_takes_empty_matrices():
    with pytest.raises(ValueError, match=r"G must have at least 2 dims.*\(5,\)"):
        newton_schulz(torch.randn(5))
    with pytest.raises(TypeError, match="G must be a torch.Tensor"):
        newton_schulz([[1.0, 2.0]])
    with pytest.raises(ValueError, match="steps must be an int >= 0 and below 100"):
        newton_schulz(torch.randn(3, 4), steps=100)  # torch.optim.Muon refuses 100 too
    with pytest.raises(ValueError, match="steps must be an int >= 0"):
        newton_schulz(torch.randn(3, 4), steps=-1)
    with pytest.raises(ValueError, match=r"coefficients must be three numbers \(a, b, c\)"):
        newton_schulz(torch.randn(3, 4), coefficients=(3.4445, -4.7750))
    with pytest.raises(ValueError, match="eps must be a finite number >= 0"):
        newton_schulz(torch.randn(3, 4), eps=-1.0)
    for shape in ((0, 4), (3, 0), (2, 0, 4), (0, 3, 5)):
        out = newton_schulz(torch.randn(shape))
        assert out.shape == shape


@pytest.mark.parametrize("shape", [(7, 130), (130, 7), (33, 65), (65, 33), (1, 9), (9, 1), (24, 24)])
def test_in_bfloat16_each_matrix_is_bit_identical_to_torchs_iteration(shape):
    coefficients, steps, eps = muon.MUON_COEFFICIENTS, muon.NEWTON_SCHULZ_STEPS, muon.EPS
    for seed in range(20):
        G = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
        theirs = torch_muon._zeropower_via_newtonschulz(G, coefficients, steps, eps)
        assert torch.equal(newton_schulz(G, dtype=torch.bfloat16), theirs), f"seed {seed}"


def test_eps_is_the_smallest_norm_divided_by():
    torch.manual_seed(0)
    tiny = torch.randn(6, 10, dtype=torch.float64) * 1e-10  # norm ~8e-10, below eps = 1e-7
    a, b, c = muon.MUON_COEFFICIENTS
    expected = tiny / muon.EPS  # divided by eps, not by its own norm: every singular value far below 1
    for _ in range(muon.NEWTON_SCHULZ_STEPS):
        A = expected @ expected.T
        expected = a * expected + (b * A + c * A @ A) @ expected
    assert torch.allclose(newton_schulz(tiny), expected, atol=1e-12)
    assert not torch.allclose(newton_schulz(tiny), by_hand(tiny), atol=1e-3)  # not divided by its own norm


def test_the_dtype_is_chosen_once_per_device_per_step(monkeypatch):
    calls = []
    monkeypatch.setattr(muon, "newton_schulz_dtype", lambda device: calls.append(device) or torch.float32)
    updates(lambda ps: Muon(ps), steps=2)  # three matrices on one device, two steps
    assert len(calls) == 2
