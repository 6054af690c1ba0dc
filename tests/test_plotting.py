"""Plotting helpers: what each one draws (images, lines, axes, data) and which inputs it rejects."""

import matplotlib

matplotlib.use("Agg")  # no display needed; set here (not via MPLBACKEND) so notebook kernels are unaffected

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from shared.history import History  # noqa: E402
from shared.plotting import (  # noqa: E402
    plot_attention,
    plot_attention_grid,
    plot_kv_cache,
    plot_loss,
    plot_mask,
    plot_positional_encoding,
    shared_colorbar,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_plot_attention_draws_one_heatmap_of_the_weights():
    torch.manual_seed(0)
    weights = torch.rand(1, 1, 3, 5).softmax(-1)  # (B=1, H=1, T_q, T_k): size-1 dims are dropped
    ax = plot_attention(weights, x_labels=list("abcde"), y_labels=list("xyz"), title="t")
    assert len(ax.images) == 1
    assert ax.images[0].get_array().shape == (3, 5)
    assert torch.allclose(torch.as_tensor(ax.images[0].get_array().data), weights[0, 0])
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcde")
    assert [t.get_text() for t in ax.get_yticklabels()] == list("xyz")
    assert len(ax.figure.axes) == 2  # heatmap + colorbar


def test_plot_attention_into_given_axes_without_colorbar():
    fig, ax = plt.subplots()
    returned = plot_attention(torch.eye(4), ax=ax, colorbar=False)
    assert returned is ax and len(ax.images) == 1 and len(fig.axes) == 1


@pytest.mark.parametrize("shape", [(2, 3, 3), (5,), (2, 2, 3, 3)])
def test_plot_attention_rejects_non_2d_weights(shape):
    with pytest.raises(ValueError, match="weights"):
        plot_attention(torch.rand(shape))


def test_plot_attention_rejects_wrong_label_count():
    with pytest.raises(ValueError, match="x_labels"):
        plot_attention(torch.rand(3, 4), x_labels=list("abc"))
    with pytest.raises(ValueError, match="y_labels"):
        plot_attention(torch.rand(3, 4), y_labels=list("abcd"))


def test_plot_attention_grid_draws_one_heatmap_per_map_and_hides_spare_axes():
    weights = torch.rand(5, 4, 4).softmax(-1)  # (N, T_q, T_k)
    fig = plot_attention_grid(weights, x_labels=list("abcd"), y_labels=list("abcd"), ncols=2, suptitle="heads")
    axes = fig.axes[:6]  # 3 rows x 2 columns, then one shared colorbar
    assert len(fig.axes) == 7
    assert [len(ax.images) for ax in axes] == [1, 1, 1, 1, 1, 0]
    assert not axes[5].axison
    assert [ax.get_title() for ax in axes[:5]] == [f"head {i}" for i in range(5)]
    assert torch.allclose(torch.as_tensor(axes[3].images[0].get_array().data), weights[3])


def test_plot_attention_grid_uses_given_titles():
    fig = plot_attention_grid(torch.rand(2, 3, 3), titles=["first", "second"])
    assert [ax.get_title() for ax in fig.axes[:2]] == ["first", "second"]


def test_compared_heatmaps_share_one_0_to_1_scale_and_one_colorbar():
    # two maps whose maxima differ a lot: per-panel scales would make 0.3 and 1.0 look the same colour
    sharp, flat = torch.eye(3), torch.full((3, 3), 1 / 3)
    fig = plot_attention_grid(torch.stack([sharp, flat]), ncols=2)
    heatmaps, bars = fig.axes[:2], fig.axes[2:]
    assert [tuple(ax.images[0].get_clim()) for ax in heatmaps] == [(0.0, 1.0), (0.0, 1.0)]
    assert len(bars) == 1 and not bars[0].images  # exactly one colorbar, for both
    assert len(plot_attention_grid(torch.stack([sharp, flat]), colorbar=False).axes) == 2
    ax = plot_attention(flat, colorbar=False)
    assert tuple(ax.images[0].get_clim()) == (0.0, 1.0)
    assert tuple(plot_attention(flat, colorbar=False, vmax=None).images[0].get_clim()) == pytest.approx((0, 1 / 3))


def test_shared_colorbar_for_panels_drawn_one_by_one():
    fig, axes = plt.subplots(1, 2)
    plot_attention(torch.eye(3), ax=axes[0], colorbar=False)
    plot_attention(torch.full((3, 3), 0.2), ax=axes[1], colorbar=False)
    bar = shared_colorbar(axes, label="weight")
    assert len(fig.axes) == 3 and bar.ax.get_ylabel() == "weight"
    assert tuple(bar.mappable.get_clim()) == (0.0, 1.0)


def test_shared_colorbar_rejects_mixed_scales_and_empty_axes():
    fig, axes = plt.subplots(1, 2)
    plot_attention(torch.eye(3), ax=axes[0], colorbar=False)
    plot_attention(torch.eye(3) * 0.5, ax=axes[1], colorbar=False, vmax=None)
    with pytest.raises(ValueError, match="one colour scale"):
        shared_colorbar(axes)
    with pytest.raises(ValueError, match="axes"):
        shared_colorbar([plt.subplots()[1]])
    with pytest.raises(ValueError, match="vmax"):
        plot_attention(torch.eye(3), vmax=0.0)


@pytest.mark.parametrize("shape", [(3, 3), (1, 2, 3, 3)])
def test_plot_attention_grid_rejects_non_3d_weights(shape):
    with pytest.raises(ValueError, match="weights"):
        plot_attention_grid(torch.rand(shape))


def test_plot_attention_grid_rejects_bad_titles_and_ncols():
    with pytest.raises(ValueError, match="titles"):
        plot_attention_grid(torch.rand(3, 2, 2), titles=["only one"])
    with pytest.raises(ValueError, match="ncols"):
        plot_attention_grid(torch.rand(3, 2, 2), ncols=0)


def test_plot_mask_draws_the_bool_mask_as_zeros_and_ones():
    mask = torch.ones(4, 4, dtype=torch.bool).tril()[None, None]  # (1, 1, T_q, T_k)
    ax = plot_mask(mask, x_labels=list("abcd"), y_labels=list("abcd"))
    assert len(ax.images) == 1
    assert torch.equal(torch.as_tensor(ax.images[0].get_array().data), mask[0, 0].float())
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcd")


def test_plot_mask_rejects_a_batch_and_wrong_labels():
    with pytest.raises(ValueError, match="mask"):
        plot_mask(torch.ones(2, 1, 3, 3, dtype=torch.bool))  # batch of 2 cannot be one picture
    with pytest.raises(ValueError, match="x_labels"):
        plot_mask(torch.ones(3, 3, dtype=torch.bool), x_labels=list("ab"))


def test_plot_positional_encoding_draws_the_table_with_colorbar():
    table = torch.linspace(-1, 1, 40).reshape(10, 4)  # (max_len, d_model)
    ax = plot_positional_encoding(table)
    assert len(ax.images) == 1 and len(ax.figure.axes) == 2
    assert torch.allclose(torch.as_tensor(ax.images[0].get_array().data), table)


@pytest.mark.parametrize("shape", [(10,), (2, 10, 4)])
def test_plot_positional_encoding_rejects_non_2d_table(shape):
    with pytest.raises(ValueError, match="table"):
        plot_positional_encoding(torch.rand(shape))


def _history(with_val: bool) -> History:
    history = History(step=[10, 20, 30], loss=[2.0, 1.5, 1.2])
    if with_val:
        history.val_step, history.val_loss = [15, 30], [1.8, 1.4]
    return history


def test_plot_loss_draws_train_validation_and_baseline_lines():
    ax = plot_loss(_history(with_val=True), baseline=2.5, label="run")
    lines = ax.get_lines()
    assert len(lines) == 3
    assert list(lines[0].get_xdata()) == [10, 20, 30] and list(lines[0].get_ydata()) == [2.0, 1.5, 1.2]
    assert list(lines[1].get_xdata()) == [15, 30]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["run train", "run validation", "baseline"]


def test_plot_loss_without_validation_draws_one_line():
    ax = plot_loss(_history(with_val=False))
    assert len(ax.get_lines()) == 1


def test_plot_loss_rejects_empty_or_ragged_history():
    with pytest.raises(ValueError, match="history"):
        plot_loss(History())
    with pytest.raises(ValueError, match="history"):
        plot_loss(History(step=[1, 2], loss=[1.0]))
    with pytest.raises(ValueError, match="val_step"):
        plot_loss(History(step=[1], loss=[1.0], val_step=[1, 2], val_loss=[1.0]))


def test_plot_attention_colour_scale_is_set_on_the_image_norm():
    weights = torch.tensor([[0.2, 0.5], [0.3, 0.4]])  # no 0 and no 1: autoscaling would stretch these
    norm = plot_attention(weights, colorbar=False).images[0].norm
    assert (norm.vmin, norm.vmax) == (0.0, 1.0)
    norm = plot_attention(weights, colorbar=False, vmin=0.1, vmax=None).images[0].norm
    assert norm.vmin == pytest.approx(0.1) and norm.vmax == pytest.approx(0.5)  # up to this map's own maximum
    for bad in (None, float("nan"), "0"):
        with pytest.raises(ValueError, match="vmin"):
            plot_attention(weights, vmin=bad)
    with pytest.raises(ValueError, match="vmax"):
        plot_attention(weights, vmax=float("inf"))


@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 3), (2, 3, 0)])
def test_plot_attention_grid_rejects_zero_maps_or_empty_maps(shape):
    with pytest.raises(ValueError, match="N, T_q, T_k >= 1"):
        plot_attention_grid(torch.zeros(shape))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_plot_attention_rejects_an_empty_map(shape):
    with pytest.raises(ValueError, match="T_q, T_k >= 1"):
        plot_attention(torch.zeros(shape))


def test_plot_kv_cache_draws_each_step_with_and_without_the_cache():
    from matplotlib.colors import to_hex

    from shared.plotting import KV_CACHED, KV_NEW, KV_RECOMPUTED

    fig = plot_kv_cache(prompt_len=3, steps=2, n_heads=4, d_k=8, block_size=16)
    cached, uncached = fig.axes
    assert len(fig.axes) == 2 and len(fig.legends) == 1
    squares = 3 + 4 + 5  # the prompt's 3 positions, then one more per step
    assert len(cached.patches) == len(uncached.patches) == squares

    def colours(ax):
        return [to_hex(p.get_facecolor()) for p in ax.patches]

    # with the cache only the newest position is computed; without it every old one is computed again
    assert colours(cached).count(KV_NEW) == colours(uncached).count(KV_NEW) == 3 + 2
    assert colours(cached).count(KV_CACHED) == 3 + 4 and KV_RECOMPUTED not in colours(cached)
    assert colours(uncached).count(KV_RECOMPUTED) == 3 + 4 and KV_CACHED not in colours(uncached)
    labels = [t.get_text() for t in cached.texts]
    assert labels == ["cache K, V (1, 4, 3, 8)", "cache K, V (1, 4, 4, 8)", "cache K, V (1, 4, 5, 8)"]
    assert [t.get_text() for t in uncached.texts][-1] == "Q, K, V (1, 4, 5, 8)"
    assert [t.get_text() for t in cached.get_yticklabels()] == ["prompt", "step 1", "step 2"]
    assert cached.get_xlabel() and cached.get_ylabel() and "(1, 4, 1, t)" in cached.get_title()
    assert "(1, 4, t, t)" in uncached.get_title()
    assert len(fig.legends[0].get_texts()) == 3


@pytest.mark.parametrize("name, kwargs", [
    ("prompt_len", dict(prompt_len=0)), ("steps", dict(steps=-1)), ("n_heads", dict(n_heads=2.0)),
    ("d_k", dict(d_k=True)), ("batch", dict(batch=0)), ("block_size", dict(block_size=0)),
    ("block_size", dict(block_size=7)),  # 4 + 4 positions do not fit
])
def test_plot_kv_cache_rejects_bad_arguments_by_name(name, kwargs):
    arguments = dict(prompt_len=4, steps=4, n_heads=2, d_k=8) | kwargs
    with pytest.raises(ValueError, match=name):
        plot_kv_cache(**arguments)
