"""shared.pretrained: dequantization equal to gguf's, the q/k permutation, GGUF -> GPT with every name and shape
checked (small GGUF files written here), and the model options a trained Llama needs (rope_base, norm_eps)."""

import gguf
import numpy as np
import pytest
import torch

from shared.gpt import GPT, GPTConfig
from shared.positions import apply_rope, rope_frequencies
from shared.pretrained import (
    config_from_gguf,
    dequantize,
    dequantize_q4_1,
    dequantize_q8_0,
    load_gpt,
    metadata,
    permute_qk,
    read_gguf,
    unpermute_qk,
)
from tests.pretrained_helpers import TINY, half_split_rope, tiny_tensors, write_gguf

Q = gguf.GGMLQuantizationType


@pytest.mark.parametrize("kind, ours", [(Q.Q4_1, dequantize_q4_1), (Q.Q8_0, dequantize_q8_0)])
def test_dequantize_by_hand_equals_gguf(kind, ours):
    w = np.random.default_rng(0).normal(0, 1, (5, 96)).astype(np.float32)
    raw = gguf.quants.quantize(w, kind)  # (5, bytes per row)
    expected = torch.from_numpy(gguf.quants.dequantize(raw, kind))
    got = ours(torch.from_numpy(raw))
    assert got.shape == (5, 96) and torch.equal(got, expected)
    blocks = torch.from_numpy(w).reshape(-1, 32)
    step = ((blocks.amax(1) - blocks.amin(1)) / 15 if kind == Q.Q4_1 else blocks.abs().amax(1) / 127)  # (n,)
    error = (got.reshape(-1, 32) - blocks).abs().amax(1)  # rounding to the nearest level: half a step at most
    assert (error <= 0.5 * step * 1.01).all()  # (1 %: the scale itself is rounded to float16)


def test_q4_1_layout_scale_minimum_and_nibbles():
    d, m = np.float16(0.5), np.float16(-2.0)
    codes = np.arange(32) % 16  # weight j has code j % 16
    packed = (codes[:16] | (codes[16:] << 4)).astype(np.uint8)  # low nibble weight j, high nibble weight j + 16
    block = np.concatenate([np.array([d]).view(np.uint8), np.array([m]).view(np.uint8), packed])
    got = dequantize_q4_1(torch.from_numpy(block))
    assert torch.equal(got, torch.tensor(0.5 * codes - 2.0, dtype=torch.float32))


def test_dequantize_refuses_bad_bytes():
    with pytest.raises(ValueError, match="raw.s last dimension must be whole 20-byte blocks"):
        dequantize_q4_1(torch.zeros(21, dtype=torch.uint8))
    with pytest.raises(ValueError, match="34-byte"):
        dequantize_q8_0(torch.zeros(34, dtype=torch.float32))


def test_permutation_round_trip_and_k_heads():
    w = torch.randn(2 * 8, 5)
    assert torch.equal(unpermute_qk(permute_qk(w, 2), 2), w) and not torch.equal(permute_qk(w, 2), w)
    assert torch.equal(permute_qk(w, 2)[:8, 0], w[[0, 4, 1, 5, 2, 6, 3, 7], 0])  # rows i and i + d_k/2 side by side
    with pytest.raises(ValueError, match="n_kv_heads"):
        unpermute_qk(torch.randn(3 * 8, 5), 9)  # k has 3 heads: its head count is not the query's


def test_permuted_rows_make_adjacent_pairs_rotate_as_half_split():
    """permute_qk turns transformers' half-split rotation into the course's adjacent-pairs one, exactly in maths."""
    torch.manual_seed(0)
    n_heads, d_k, d_model, T = 2, 8, 6, 5
    w, x, pos = torch.randn(n_heads * d_k, d_model), torch.randn(T, d_model), torch.arange(T)
    published = (x @ w.T).view(T, n_heads, d_k).transpose(0, 1)  # (H, T, d_k)
    ours = (x @ permute_qk(w, n_heads).T).view(T, n_heads, d_k).transpose(0, 1)
    rotated = apply_rope(ours, pos, rope_frequencies(d_k, 500.0))
    reference = half_split_rope(published, pos, 500.0)
    torch.testing.assert_close(rotated @ rotated.transpose(-1, -2), reference @ reference.transpose(-1, -2))
    wrong = apply_rope(published, pos, rope_frequencies(d_k, 500.0))  # half-split rows, adjacent pairs: the trap
    assert not torch.allclose(wrong @ wrong.transpose(-1, -2), reference @ reference.transpose(-1, -2), atol=1e-3)


def test_config_from_metadata(tmp_path):
    reader = read_gguf(write_gguf(tmp_path / "tiny.gguf", tiny_tensors()))
    c = config_from_gguf(reader)
    assert (c.vocab_size, c.d_model, c.n_heads, c.n_kv_heads, c.d_ff, c.n_layers, c.block_size) == (
        TINY["vocab"], TINY["d_model"], TINY["n_heads"], TINY["n_kv_heads"], TINY["d_ff"], TINY["n_layers"],
        TINY["context"])
    assert (c.norm, c.activation, c.position, c.bias, c.rope_base) == ("rmsnorm", "swiglu", "rope", False, 5000.0)
    assert c.norm_eps == pytest.approx(1e-6) and config_from_gguf(reader, block_size=8).block_size == 8
    assert metadata(reader)["llama.block_count"] == TINY["n_layers"]


def test_load_copies_every_tensor(tmp_path):
    tensors = tiny_tensors()
    path = write_gguf(tmp_path / "tiny.gguf", tensors)
    model = load_gpt(path)
    assert not model.training and model.lm_head.weight is model.tok_emb.weight
    params = dict(model.named_parameters())
    reader = read_gguf(path)
    for t in reader.tensors:
        expected = torch.tensor(gguf.quants.dequantize(t.data, t.tensor_type)).reshape(params[name_of(t.name)].shape)
        assert torch.equal(params[name_of(t.name)], expected), t.name
        assert torch.equal(dequantize(t), expected)
    assert model.blocks[0].norm1.eps == pytest.approx(1e-6) and model.blocks[0].attn.rope.base == 5000.0
    assert model(torch.tensor([[1, 2, 3]])).shape == (1, 3, TINY["vocab"])


def name_of(gguf_name: str) -> str:
    from shared.pretrained import gguf_to_gpt_names

    return gguf_to_gpt_names(TINY["n_layers"])[gguf_name]


@pytest.mark.parametrize("change, message", [
    (lambda t: t.pop("blk.1.ffn_up.weight"), "no tensor 'blk.1.ffn_up.weight'"),
    (lambda t: t.update({"blk.0.extra.weight": np.ones(4, np.float32)}), "tensor 'blk.0.extra.weight'"),
    (lambda t: t.update({"output.weight": np.ones((64, 64), np.float32)}), "ties its output head"),
    (lambda t: t.update({"blk.0.attn_k.weight": np.ones((64, 64), np.float32)}),
     r"'blk.0.attn_k.weight' has shape \(64, 64\), but blocks.0.attn.w_k.weight needs \(32, 64\)"),
])
def test_refuses_missing_extra_or_misshapen_tensor(tmp_path, change, message):
    tensors = tiny_tensors()
    change(tensors)
    with pytest.raises(ValueError, match=message):
        load_gpt(write_gguf(tmp_path / "bad.gguf", tensors))


def test_refuses_other_architecture_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="general.architecture is 'gpt2'"):
        load_gpt(write_gguf(tmp_path / "gpt2.gguf", tiny_tensors(), arch="gpt2"))
    with pytest.raises(FileNotFoundError, match="fetch_registry_file"):
        read_gguf(tmp_path / "absent.gguf")


def test_nothing_copied_before_every_shape_checked(tmp_path):
    tensors = tiny_tensors()
    tensors["blk.1.ffn_down.weight"] = np.ones((64, 32), np.float32)  # the last block's, wrong
    model = GPT(config_from_gguf(read_gguf(write_gguf(tmp_path / "ok.gguf", tiny_tensors()))))
    before = model.tok_emb.weight.clone()
    from shared.pretrained import load_gguf_weights

    with pytest.raises(ValueError, match="blk.1.ffn_down.weight"):
        load_gguf_weights(model, read_gguf(write_gguf(tmp_path / "bad.gguf", tensors)))
    assert torch.equal(model.tok_emb.weight, before)


def test_model_options_reach_the_layers():
    model = GPT(GPTConfig(50, n_layers=1, d_model=32, n_heads=4, position="rope", norm="rmsnorm", rope_base=1e5,
                          norm_eps=1e-6))
    assert model.blocks[0].attn.rope.base == 1e5 and model.norm.eps == 1e-6 and model.blocks[0].norm2.eps == 1e-6
    torch.testing.assert_close(model.blocks[0].attn.rope.inv_freq, rope_frequencies(8, 1e5))
    assert GPT(GPTConfig(50, n_layers=1, d_model=32)).norm.eps == 1e-5  # the default is LayerNorm's own
    for bad in (dict(rope_base=1.0), dict(rope_base=True), dict(norm_eps=0.0), dict(norm_eps=float("nan"))):
        with pytest.raises(ValueError, match=f"GPTConfig.{next(iter(bad))}"):
            GPTConfig(50, **bad)


class CharTokenizer:
    """A stand-in with the interface reply() needs: one id per character, END as id `end`."""

    def __init__(self, end: int):
        self.end = end

    def encode(self, text):
        return [self.end] if text == "<|im_end|>" else [1 + ord(c) % 40 for c in text]

    def decode(self, ids):
        return "".join(chr(ord("a") + i) for i in ids)


def test_reply_cuts_at_the_end_of_turn():
    from shared.pretrained import reply

    model = GPT(GPTConfig(50, n_layers=1, d_model=16, n_heads=2, position="rope", norm="rmsnorm", bias=False))
    torch.nn.init.zeros_(model.tok_emb.weight)  # every logit 0: greedy always picks id 0
    messages = [{"role": "user", "content": "hi"}]
    assert reply(model, CharTokenizer(end=0), messages, 5, temperature=0.0) == ""  # id 0 is the end of turn
    assert reply(model, CharTokenizer(end=7), messages, 5, temperature=0.0) == "aaaaa"  # never ends: all 5 tokens


def test_chatml_prompt_and_its_bad_input():
    from shared.pretrained import chatml_prompt
    from shared.pretrained.chat import DEFAULT_SYSTEM

    text = chatml_prompt([{"role": "user", "content": "Hi"}])
    assert text == (f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n")
    assert chatml_prompt([{"role": "system", "content": "S"}], add_generation_prompt=False) == (
        "<|im_start|>system\nS<|im_end|>\n")
    for bad in ([], "Hi", [{"role": "robot", "content": "x"}], [{"role": "user", "content": 3}]):
        with pytest.raises(ValueError, match="messages"):
            chatml_prompt(bad)


def test_chatml_prompt_equals_the_files_own_template():
    """SmolLM2's chat template (Jinja, in the GGUF metadata) renders the same text; needs the fetched model file."""
    from shared.files import REGISTRY_FILES, data_dir
    from shared.pretrained import chatml_prompt

    path = data_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if "SmolLM2-135M-Instruct.Q4_1.gguf" not in REGISTRY_FILES or not path.is_file():
        pytest.skip("SmolLM2's GGUF file is not in data/ (shared.files.fetch_registry_file fetches it)")
    import jinja2

    template = jinja2.Template(metadata(read_gguf(path))["tokenizer.chat_template"])
    for messages in ([{"role": "user", "content": "Hi"}], [{"role": "system", "content": "Be brief."},
                                                             {"role": "user", "content": "Hi"},
                                                             {"role": "assistant", "content": "Hello!"},
                                                             {"role": "user", "content": "Why?"}]):
        assert chatml_prompt(messages) == template.render(messages=messages, add_generation_prompt=True)


def test_equal_to_transformers_on_a_tiny_gguf(tmp_path, monkeypatch):
    """A tiny Llama written as llama.cpp's converter writes one (q and k rows permuted): our GPT computes the logits
    that transformers computes from the same file; Hugging Face's half-split rows in our model do not."""
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tensors = tiny_tensors(seed=3)
    for i in range(TINY["n_layers"]):
        for name, heads in (("attn_q", TINY["n_heads"]), ("attn_k", TINY["n_kv_heads"])):
            published = torch.from_numpy(tensors[f"blk.{i}.{name}.weight"])
            tensors[f"blk.{i}.{name}.weight"] = permute_qk(published, heads).numpy()
    path = write_gguf(tmp_path / "tiny.gguf", tensors)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=path.name, dtype=torch.float32)
    ours = load_gpt(path)
    ids = torch.tensor([[1, 5, 9, 3, 7, 2, 60, 11, 0, 42]])
    with torch.no_grad():
        reference, got = theirs.eval()(ids).logits, ours(ids)
        torch.testing.assert_close(got, reference, atol=1e-4, rtol=1e-4)
        for block in ours.blocks:  # the trap: Hugging Face's (half-split) rows in our adjacent-pair RoPE
            block.attn.w_q.weight.copy_(unpermute_qk(block.attn.w_q.weight, TINY["n_heads"]))
            block.attn.w_k.weight.copy_(unpermute_qk(block.attn.w_k.weight, TINY["n_kv_heads"]))
        assert (ours(ids) - reference).abs().max() > 1e-2


def test_dequantize_checks_the_last_dimension_not_only_the_byte_count():
    with pytest.raises(ValueError, match=r"raw's last dimension must be whole 20-byte blocks, got \(2, 30\)"):
        dequantize_q4_1(torch.zeros(2, 30, dtype=torch.uint8))  # 60 bytes = 3 blocks, but they would straddle rows
    with pytest.raises(ValueError, match=r"raw's last dimension must be whole 34-byte blocks, got \(17, 2\)"):
        dequantize_q8_0(torch.zeros(17, 2, dtype=torch.uint8))


@pytest.mark.parametrize("kind", [Q.Q4_0, Q.Q5_0, Q.BF16])
def test_refuses_an_unreadable_tensor_type_before_copying(tmp_path, kind):
    from shared.pretrained import load_gguf_weights

    tensors = tiny_tensors()
    path = write_gguf(tmp_path / "bad.gguf", tensors, kinds={"blk.1.ffn_up.weight": kind})
    model = GPT(config_from_gguf(read_gguf(path)))
    before = model.tok_emb.weight.clone()
    with pytest.raises(ValueError, match=f"tensor 'blk.1.ffn_up.weight' is {kind.name}: the course reads F32, F16, "
                                         "Q4_1 and Q8_0"):
        load_gguf_weights(model, read_gguf(path))
    assert torch.equal(model.tok_emb.weight, before)  # refused before anything was copied


@pytest.mark.parametrize("name, offset", [("blk.0.attn_v.weight", 0), ("blk.0.attn_v.weight", 2),
                                          ("token_embd.weight", 0), ("blk.1.ffn_norm.weight", None)])
def test_refuses_non_finite_weights_naming_the_tensor(tmp_path, name, offset):
    """A NaN scale (Q4_1's d at byte 0, its m at byte 2; Q8_0's d) or a NaN float32 weight is refused up front."""
    from shared.pretrained import load_gguf_weights

    path = write_gguf(tmp_path / "ok.gguf", tiny_tensors())
    data = bytearray(path.read_bytes())
    t = next(t for t in read_gguf(path).tensors if t.name == name)
    start = int(t.data_offset) + (offset if offset is not None else 4 * 3)  # a block's scale, or float32 weight 3
    data[start : start + (2 if offset is not None else 4)] = (np.array([np.nan], np.float16 if offset is not None
                                                                       else np.float32).tobytes())
    (tmp_path / "nan.gguf").write_bytes(bytes(data))
    model = GPT(config_from_gguf(read_gguf(path)))
    before = model.tok_emb.weight.clone()
    with pytest.raises(ValueError, match=f"tensor {name!r} holds non-finite"):
        load_gguf_weights(model, read_gguf(tmp_path / "nan.gguf"))
    assert torch.equal(model.tok_emb.weight, before)


def test_refuses_a_wrongly_shaped_norm_vector(tmp_path):
    tensors = tiny_tensors()
    tensors["blk.0.ffn_norm.weight"] = np.ones(32, np.float32)
    with pytest.raises(ValueError, match=r"'blk.0.ffn_norm.weight' has shape \(32,\), but blocks.0.norm2.weight"):
        load_gpt(write_gguf(tmp_path / "bad.gguf", tensors))


def test_loads_float16_tensors(tmp_path):
    tensors = tiny_tensors()
    path = write_gguf(tmp_path / "f16.gguf", tensors, kinds={"blk.0.attn_q.weight": Q.F16, "output_norm.weight":
                                                             Q.F16})
    assert {t.name: t.tensor_type for t in read_gguf(path).tensors}["blk.0.attn_q.weight"] == Q.F16
    model = load_gpt(path)
    for name, ours in (("blk.0.attn_q.weight", model.blocks[0].attn.w_q.weight), ("output_norm.weight",
                                                                                    model.norm.weight)):
        assert torch.equal(ours, torch.from_numpy(tensors[name].astype(np.float16).astype(np.float32)))


def test_unreadable_files_get_a_message_naming_them(tmp_path):
    data = write_gguf(tmp_path / "ok.gguf", tiny_tensors()).read_bytes()
    for name, content in (("truncated.gguf", data[:-3000]), ("short.gguf", data[:100]), ("text.gguf", b"hello")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=f"{name}.* is not a readable GGUF file"):
            read_gguf(tmp_path / name)


def test_config_without_vocab_size_or_tokens_names_what_is_missing(tmp_path):
    path = write_gguf(tmp_path / "novocab.gguf", tiny_tensors(), vocab_size=False)
    with pytest.raises(ValueError, match="llama.vocab_size.*tokenizer.ggml.tokens"):
        config_from_gguf(read_gguf(path))


def test_chatml_prompt_checks_system_and_add_generation_prompt():
    from shared.pretrained import chatml_prompt

    messages = [{"role": "user", "content": "Hi"}]
    for bad in (None, 3):
        with pytest.raises(TypeError, match="system must be a str"):
            chatml_prompt(messages, system=bad)
    with pytest.raises(TypeError, match="add_generation_prompt must be a bool"):
        chatml_prompt(messages, add_generation_prompt="no")


def test_empty_gpt_computes_what_a_built_gpt_computes_once_filled():
    """load_gpt builds on the meta device (no random initialisation); filled, it is the GPT of the same config."""
    from shared.pretrained.loading import empty_gpt

    config = GPTConfig(50, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, position="rope", norm="rmsnorm",
                       activation="swiglu", bias=False, rope_base=1e4)
    built, empty = GPT(config), empty_gpt(config)
    assert empty.lm_head.weight is empty.tok_emb.weight
    torch.testing.assert_close(empty.blocks[1].attn.rope.inv_freq, built.blocks[1].attn.rope.inv_freq)
    empty.load_state_dict(built.state_dict())
    ids = torch.tensor([[1, 2, 3, 4]])
    assert torch.equal(empty.eval()(ids), built.eval()(ids))
    with pytest.raises(ValueError, match="can only rebuild RoPE"):
        empty_gpt(GPTConfig(50, n_layers=1, d_model=32, n_heads=4, position="alibi"))
