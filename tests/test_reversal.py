import pytest
import torch
from torch import nn

from shared.masks import padding_mask
from shared.reversal import (
    BOS,
    EOS,
    IGNORE_INDEX,
    MAX_DIGITS,
    MIN_DIGITS,
    PAD,
    VOCAB_SIZE,
    LMBatch,
    ReversalBatches,
    Seq2SeqBatch,
    collate,
    decoder_only_loss,
    decoder_only_sample,
    encode_digits,
    loss_for,
    make_model,
    make_test_set,
    seq2seq_loss,
    seq2seq_sample,
)
from shared.training import train
from shared.transformer import Transformer, TransformerConfig

from .helpers import copy_layer_to_torch


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def test_seq2seq_sample_ids():
    src, tgt_in, tgt_out = seq2seq_sample([1, 2, 3])
    assert src == [4, 5, 6]
    assert tgt_in == [BOS, 6, 5, 4]
    assert tgt_out == [6, 5, 4, EOS]


def test_decoder_only_sample_masks_the_prompt():
    tokens, labels = decoder_only_sample([0, 9, 5])
    assert tokens == [BOS, 3, 12, 8, EOS, 8, 12, 3]  # BOS src EOS tgt (the final EOS is only a label)
    assert labels == [IGNORE_INDEX] * 4 + [8, 12, 3, EOS]
    assert len(tokens) == len(labels) == 2 * 3 + 2


def test_collate_pads_inputs_with_pad_and_labels_with_ignore():
    batch = collate([seq2seq_sample([1, 2, 3]), seq2seq_sample([4, 5, 6, 7, 8])])
    assert isinstance(batch, Seq2SeqBatch)
    assert batch.src.shape == (2, 5) and batch.tgt_in.shape == batch.tgt_out.shape == (2, 6)
    assert batch.src[0].tolist() == [4, 5, 6, PAD, PAD]
    assert batch.tgt_in[0].tolist() == [BOS, 6, 5, 4, PAD, PAD]
    assert batch.tgt_out[0].tolist() == [6, 5, 4, EOS, IGNORE_INDEX, IGNORE_INDEX]
    lm = collate([decoder_only_sample([1, 2, 3]), decoder_only_sample([1, 2, 3, 4])], "decoder_only")
    assert isinstance(lm, LMBatch) and lm.tokens.shape == lm.labels.shape == (2, 10)
    assert lm.tokens[0, -2:].tolist() == [PAD, PAD] and lm.labels[0, -2:].tolist() == [IGNORE_INDEX] * 2
    with pytest.raises(ValueError, match="arch"):
        collate([seq2seq_sample([1])], "rnn")


def test_batches_are_seeded_well_formed_and_skip_the_test_set():
    batches = ReversalBatches("encoder_decoder", 64, seed=3)
    b1, b2, other = batches(5), batches(5), batches(6)
    assert all(torch.equal(x, y) for x, y in zip(b1, b2)) and not torch.equal(b1.src, other.src)
    lengths = (b1.src != PAD).sum(1)
    assert lengths.min() >= MIN_DIGITS and lengths.max() <= MAX_DIGITS
    assert b1.src.max() < VOCAB_SIZE and (b1.src[b1.src != PAD] >= 3).all()
    for row, tgt in zip(b1.src, b1.tgt_out):
        digits = row[row != PAD].tolist()
        assert tgt[tgt != IGNORE_INDEX].tolist() == digits[::-1] + [EOS]
    # no overlap: every short source drawn during training is held out when it is in the test set
    test = make_test_set(1000, seed=1)
    assert len(set(test)) == 1000 and {len(s) for s in test} == set(range(MIN_DIGITS, MAX_DIGITS + 1))
    clean = ReversalBatches("decoder_only", 256, seed=0, exclude=test)
    drawn = [s for step in range(40) for s in clean.sources(step)]
    assert not set(drawn) & set(test)
    assert clean.redrawn > 0  # the exclusion was really exercised (10% of 3-digit sources are held out)
    naive = ReversalBatches("decoder_only", 256, seed=0)
    assert set(s for step in range(40) for s in naive.sources(step)) & set(test)  # without it, overlap


def test_transformer_shapes_and_attention_maps():
    model = make_model("encoder_decoder", d_model=32, n_heads=4, n_layers=2).eval()
    batch = ReversalBatches("encoder_decoder", 4, seed=0)(0)
    B, T_src, T_tgt = batch.src.size(0), batch.src.size(1), batch.tgt_in.size(1)
    assert model.encode(batch.src).shape == (B, T_src, 32)
    logits = model(batch.src, batch.tgt_in, need_weights=True)
    assert logits.shape == (B, T_tgt, VOCAB_SIZE)
    assert model.attention_maps("encoder").shape == (2, B, 4, T_src, T_src)
    assert model.attention_maps("self").shape == (2, B, 4, T_tgt, T_tgt)
    cross = model.attention_maps("cross")
    assert cross.shape == (2, B, 4, T_tgt, T_src)
    assert (cross.masked_select(~(batch.src != PAD)[None, :, None, None, :]) == 0).all()  # no weight on padding
    with pytest.raises(ValueError, match="kind"):
        model.attention_maps("decoder")
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(13, 13, d_model=30, n_heads=4)


def test_decode_is_causal():
    model = make_model("encoder_decoder", d_model=32, n_heads=4, n_layers=2).eval()
    src = torch.tensor([[4, 5, 6, 7]])
    memory = model.encode(src)
    tgt = torch.tensor([[BOS, 7, 6, 5, 4]])
    changed = tgt.clone()
    changed[0, 3:] = torch.tensor([9, 9])
    a, b = model.decode(tgt, memory), model.decode(changed, memory)
    assert torch.allclose(a[:, :3], b[:, :3], atol=1e-6)  # changing the future never changes the past
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_source_padding_does_not_change_the_output():
    model = make_model("encoder_decoder", d_model=32, n_heads=4, n_layers=2).eval()
    tgt = torch.tensor([[BOS, 6, 5]])
    short = model(torch.tensor([[4, 5, 6]]), tgt)
    padded = model(torch.tensor([[4, 5, 6, PAD, PAD]]), tgt)
    assert torch.allclose(short, padded, atol=1e-5)


def test_layer_stack_matches_torch_transformer():
    config = TransformerConfig(13, 13, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64,
                               dropout=0.0, max_len=16)
    ours = Transformer(config).eval()
    theirs = nn.Transformer(32, 4, 2, 2, 64, dropout=0.0, batch_first=True).eval()
    theirs.encoder.norm = theirs.decoder.norm = nn.Identity()  # torch adds a final norm; the Post-LN paper has none
    for a, b in zip(ours.encoder, theirs.encoder.layers):
        copy_layer_to_torch(a, b)
    for a, b in zip(ours.decoder, theirs.decoder.layers):
        copy_layer_to_torch(a, b)
    src = torch.tensor([[4, 5, 6, 7], [8, 9, PAD, PAD]])
    tgt = torch.tensor([[BOS, 7, 6, 5, 4], [BOS, 9, 8, PAD, PAD]])
    x_src = ours.positional(ours.src_embed(src))
    x_tgt = ours.positional(ours.tgt_embed(tgt))
    future = nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.bool)  # torch: True = blocked
    hidden = theirs(x_src, x_tgt, tgt_mask=future, src_key_padding_mask=src == PAD,
                    tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD)
    got, expected = ours(src, tgt), ours.generator(hidden)
    keep = tgt != PAD
    assert (got[keep] - expected[keep]).abs().max() < 1e-4


def test_losses_ignore_padding_and_prompt():
    model = make_model("encoder_decoder", d_model=32, n_heads=4, n_layers=1)
    batch = ReversalBatches("encoder_decoder", 8, seed=0)(0)
    loss, n = seq2seq_loss(model, batch)
    assert n == int((batch.tgt_out != IGNORE_INDEX).sum()) and torch.isfinite(loss)
    gpt = make_model("decoder_only", d_model=32, n_heads=4, n_layers=1)
    lm = ReversalBatches("decoder_only", 8, seed=0)(0)
    loss, n = decoder_only_loss(gpt, lm)
    lengths = (lm.labels != IGNORE_INDEX).sum(1)
    assert n == int(lengths.sum()) and torch.isfinite(loss)
    n_src = ((lm.tokens >= 3).sum(1)) // 2  # digits appear twice in BOS src EOS tgt
    assert torch.equal(lengths, n_src + 1)  # only the reversed digits and the final EOS are scored
    assert padding_mask(lm.tokens, PAD).shape == (8, 1, 1, lm.tokens.size(1))


def test_test_set_size_is_limited_by_the_lists_that_exist():
    largest = make_test_set(10_000, seed=0)  # every one of the 1,000 three-digit lists, and more of the rest
    assert len(set(largest)) == 10_000 and sum(len(s) == 3 for s in largest) == 1000
    with pytest.raises(ValueError, match=r"n must be at most 10,000"):
        make_test_set(10_001)  # used to loop forever looking for a 1,001st distinct 3-digit list
    with pytest.raises(ValueError, match="n must be a positive int"):
        make_test_set(0)


def test_make_model_gives_both_architectures_the_requested_ffn_width():
    """d_ff reaches the GPT too (it used to be dropped, so a "same sizes" comparison was not)."""
    gpt = make_model("decoder_only", d_model=32, n_heads=4, n_layers=1, d_ff=48)
    encdec = make_model("encoder_decoder", d_model=32, n_heads=4, n_layers=1, d_ff=48)
    assert gpt.config.ffn_width == 48 and encdec.config.d_ff == 48
    assert gpt.blocks[0].ff.linear1.out_features == 48 and encdec.encoder[0].ff.linear1.out_features == 48
    assert make_model("decoder_only", d_model=32, n_heads=4, n_layers=1).config.ffn_width == 4 * 32


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
def test_train_splits_reversal_batches_into_micro_batches(arch):
    logged = {}
    for micro in (1, 2):
        torch.manual_seed(0)
        model = make_model(arch, d_model=16, n_heads=2, n_layers=1)
        history = train(model, torch.optim.SGD(model.parameters(), lr=0.0), ReversalBatches(arch, 8),
                        loss_for(arch), max_steps=2, log_every=1, micro_batches=micro, progress=False)
        logged[micro] = history
    # lr 0: every step sees the same weights, so the token-weighted loss over the halves is the whole batch's
    assert logged[2].loss == pytest.approx(logged[1].loss, rel=1e-5) and logged[2].tokens == logged[1].tokens


def test_batches_refuse_an_exclusion_set_that_leaves_no_source():
    """Every 1-digit list excluded: a clear error instead of redrawing forever."""
    every_list = [(d,) for d in range(10)]
    with pytest.raises(ValueError, match="exclude holds"):
        ReversalBatches("encoder_decoder", 4, exclude=every_list, min_len=1, max_len=1)(0)


@pytest.mark.parametrize("digits,bad", [([-1], -1), ([3, 10], 10), ([1.0], 1.0), ([True], True)])
def test_encode_digits_refuses_what_is_not_a_digit(digits, bad):
    """-1 would become a special token (2) and 10 an id past the vocabulary (13), both silently."""
    with pytest.raises((ValueError, TypeError), match=rf"digits must hold ints 0-9, got {bad!r}"):
        encode_digits(digits)
    assert encode_digits([0, 9]) == [3, 12]


@pytest.mark.parametrize("make", [lambda: map(int, "123"), lambda: (d for d in (1, 2, 3)), lambda: iter([1, 2, 3])],
                         ids=["map", "generator", "iterator"])
def test_encode_digits_reads_an_iterator_once(make):
    """The check reads the digits once; an iterator handed back afterwards would be empty (it returned [])."""
    assert encode_digits(make()) == [4, 5, 6]
    with pytest.raises(ValueError, match="got 10"):
        encode_digits(d for d in (1, 10))
