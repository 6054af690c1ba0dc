"""Argument checks shared by the package: each raises a ValueError that names the argument and what it expects."""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import Tensor, nn


def describe(x) -> str:
    """How an argument looks in an error message: a tensor's shape and dtype, else its type's name."""
    return f"shape {tuple(x.shape)} dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__


def check_int(name: str, value, minimum: int = 1, meaning: str = "") -> int:
    """Return `value` if it is an int (not a bool) >= `minimum`; else raise ValueError naming `name`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        expected = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {expected}{meaning}, got {value!r}")
    return value


def check_positive_int(name: str, value) -> int:
    """Return `value` if it is an int >= 1 (not a bool); else raise ValueError naming `name`."""
    return check_int(name, value, 1)


def check_optional_positive_int(name: str, value) -> int | None:
    """Return `value` if it is None or a positive int; else raise ValueError naming `name`."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be None or a positive int, got {value!r}")  # check_int's test, with None
    return value


def is_integer_tensor(x) -> bool:
    """True if `x` is a tensor of integers: not floating-point, complex or bool."""
    return isinstance(x, Tensor) and not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)


def check_tokens(name: str, tokens, vocab_size: int | None = None) -> Tensor:
    """Return `tokens` if it is a (B, T) integer tensor of ids with T, B >= 1; else raise ValueError naming `name`.

    With `vocab_size`, every id must also lie in 0..vocab_size-1 (else nn.Embedding raises a bare IndexError). That
    check costs a min/max reduction that waits for the device: the models run it at their entry points only.
    """
    if not is_integer_tensor(tokens) or tokens.dim() != 2 or tokens.size(1) < 1 or tokens.size(0) < 1:
        raise ValueError(f"{name} must be a (B, T) integer tensor of token ids with T >= 1 and B >= 1, "
                         f"got {describe(tokens)}")
    if vocab_size is not None:
        low, high = torch.aminmax(tokens)
        if bool((low < 0) | (high >= vocab_size)):  # one wait for the device, not two
            raise ValueError(f"{name} must hold ids in 0..{vocab_size - 1} (vocab_size={vocab_size}), "
                             f"got ids from {low.item()} to {high.item()}")
    return tokens


def check_sequence(name: str, x, d_model: int) -> Tensor:
    """Return `x` if it is a floating-point (B, T, d_model) tensor with B, T >= 1; else raise naming `name`."""
    if check_float_tensor(name, x).dim() != 3 or x.size(0) < 1 or x.size(1) < 1 or x.size(-1) != d_model:
        raise ValueError(f"{name} must have shape (B >= 1, T >= 1, d_model={d_model}), got {tuple(x.shape)}")
    return x


def check_batch_size(name: str, x: Tensor, batch: int, of: str = "the input", hint: str = "") -> Tensor:
    """Return `x` if its first dim is `batch`, the batch size `of` something else; else raise naming `name`."""
    if x.size(0) != batch:
        raise ValueError(f"{name} has batch size {x.size(0)}, but {of} has batch size {batch}{hint}")
    return x


def check_table_positions(x, offset, positions, max_len: int) -> None:
    """Check the input of a positional table of `max_len` rows: x (B, T, d_model), and either `positions`,
    (T,) or (B, T) integer ids in 0..max_len-1, or (positions None) an int offset >= 0 with offset + T <= max_len.
    """
    if not isinstance(x, Tensor) or x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, d_model), got {describe(x)}")
    T = x.size(1)
    if positions is None:
        if check_int("offset", offset, minimum=0) + T > max_len:
            raise ValueError(f"sequence of length {T} at offset {offset} is longer than the positional table "
                             f"(max_len={max_len})")
        return
    check_position_ids("positions", positions, T, x.size(0), of="x")
    if positions.numel() and (positions.min() < 0 or positions.max() >= max_len):
        raise ValueError(f"positions must lie in 0..{max_len - 1} (the positional table, max_len={max_len}), "
                         f"got {positions.min().item()}..{positions.max().item()}")


def check_bool(name: str, value) -> bool:
    """Return `value` if it is True or False; else raise ValueError naming `name`."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return value


def check_choice(name: str, value, allowed: tuple) -> object:
    """Return `value` if it is one of `allowed`; else raise ValueError naming `name` and the choices."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def check_float_tensor(name: str, x, min_dim: int = 1) -> Tensor:
    """Return `x` if it is a floating-point tensor of at least `min_dim` dims; else raise naming `name`."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dims, got shape {tuple(x.shape)}")
    return x


def check_position_ids(name: str, positions, length: int | None = None, batch: int | None = None,
                       of: str = "x") -> Tensor:
    """Return `positions` if it is an integer (not bool or complex) tensor of shape (T,) or (B, T); else raise
    TypeError naming `name`. Given `length`, T must equal it (else ValueError); given `batch`, so must a (B, T)
    tensor's B, the batch size `of` the input the ids belong to.
    """
    if not is_integer_tensor(positions) or positions.dim() not in (1, 2):
        raise TypeError(f"{name} must be an integer tensor of shape (T,) or (B, T), got {describe(positions)}")
    if length is not None and positions.size(-1) != length:
        raise ValueError(f"{name} must have T={length} entries per row, got shape {tuple(positions.shape)}")
    if batch is not None and positions.dim() == 2:
        check_batch_size(name, positions, batch, of=of)
    return positions


def check_broadcasts(name: str, x: Tensor, shape: tuple[int, ...], target: str) -> Tensor:
    """Return `x` if its shape broadcasts to `shape` without enlarging it; else raise ValueError naming `name`.

    target: what `shape` is, for the message, e.g. "the attention scores (B, H, T_q, T_k)".
    """
    try:
        if torch.broadcast_shapes(x.shape, shape) == torch.Size(shape):
            return x
        problem = "would enlarge"
    except RuntimeError:
        problem = "cannot broadcast to"
    raise ValueError(f"{name} of shape {tuple(x.shape)} {problem} {target} = {tuple(shape)}")


def check_positive_ints(owner: object, names: tuple[str, ...]) -> None:
    """Check that each attribute in `names` of `owner` (e.g. a config dataclass) is a positive int."""
    for name in names:
        check_positive_int(f"{type(owner).__name__}.{name}", getattr(owner, name))


def check_divisible(d_model: int, n_heads: int, prefix: str = "") -> None:
    """d_model must split evenly into n_heads heads of d_k = d_model // n_heads."""
    if d_model % n_heads:
        raise ValueError(f"{prefix}d_model ({d_model}) must be divisible by {prefix}n_heads ({n_heads})")


def check_dropout(name: str, value) -> float:
    """Return `value` if it is a probability in [0, 1); else raise ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return value


def check_finite(name: str, value, minimum: float = -math.inf, meaning: str = "") -> float:
    """Return `value` if it is a finite real number >= `minimum`; else raise ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        at_least = "" if minimum == -math.inf else f" >= {minimum}"
        raise ValueError(f"{name} must be a finite number{at_least}{meaning}, got {value!r}")
    return value


def check_betas(name: str, betas) -> tuple[float, float]:
    """Return `betas` if it is a pair of numbers in [0, 1) (Adam's moment decay rates); else raise naming `name`."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2 or not all(
            isinstance(b, (int, float)) and not isinstance(b, bool) and 0.0 <= b < 1.0 for b in betas):
        raise ValueError(f"{name} must be a pair (beta1, beta2) of numbers in [0, 1), e.g. (0.9, 0.95), got {betas!r}")
    return tuple(betas)


def check_loss_fn_result(result) -> tuple[Tensor, Tensor | int]:
    """Return what a loss_fn returned if it is (mean loss: a 0-d float tensor, token count: an int or 0-d tensor)."""
    expected = "loss_fn must return (mean loss: a 0-d float tensor, token count: an int or 0-d tensor) as lm_loss does"
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = f"a {type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else (
            f"a Tensor of {describe(result)}" if isinstance(result, Tensor) else f"a {type(result).__name__}")
        raise TypeError(f"{expected}; got {got}")
    loss, count = result
    if not isinstance(loss, Tensor) or not loss.is_floating_point() or loss.dim() != 0:
        raise TypeError(f"{expected}; got a loss of {describe(loss)}")
    if isinstance(count, bool) or not (isinstance(count, int) or isinstance(count, Tensor) and count.dim() == 0
                                       and not count.is_complex() and count.dtype != torch.bool):
        raise TypeError(f"{expected}; got a token count of {describe(count)}")
    if isinstance(count, int) and count < 0:  # a tensor's sign is not read here: that would wait for the device
        raise ValueError(f"{expected}; got a negative token count {count}")
    return loss, count


def check_finite_step(loss: Tensor | None, grad_norm: Tensor, step: int, finite: Tensor | None = None) -> None:
    """Raise FloatingPointError naming training step `step` unless its 0-d `loss` (None: not checked) and gradient
    norm are finite. `finite` is [loss finite, norm finite] as every rank of a process group sees it (all-reduced
    with MIN), so that all ranks stop together; None: computed here, for this process alone.

    Called before the optimizer step, so a raise leaves the weights as they were. Reading the flags waits for the
    device once per step, as fp16's GradScaler does for its own inf check.
    """
    if finite is None:
        finite = finite_flags(loss, grad_norm)
    if bool(finite.all()):
        return
    kept = (f"training stopped before the optimizer step, so the weights are as they were before step {step}. "
            "shared.debug.nonfinite finds the first layer that makes NaN or inf")
    if not finite[0]:
        value = loss.item() if loss is not None and not torch.isfinite(loss) else "not finite on another rank"
        raise FloatingPointError(f"the loss at step {step} is {value}: {kept}; a lower learning rate may help")
    value = grad_norm.item() if not torch.isfinite(grad_norm) else "not finite on another rank"
    raise FloatingPointError(f"the gradient norm at step {step} is {value} although the loss is finite: "
                             f"{kept}. A loss whose gradient is not finite (sqrt or log at 0, a division by 0) is "
                             "the usual cause")


def finite_flags(loss: Tensor | None, grad_norm: Tensor) -> Tensor:
    """(2,) float tensor on grad_norm's device: 1.0 where `loss` (None counts as finite) and `grad_norm` are finite."""
    loss_ok = torch.ones((), device=grad_norm.device) if loss is None else torch.isfinite(loss.detach()).reshape(())
    return torch.stack([loss_ok.float().to(grad_norm.device), torch.isfinite(grad_norm.detach()).reshape(()).float()])


def check_model_config(model: nn.Module, config) -> None:
    """`config` must be the config `model` was built with (its `config` attribute, where it has one).

    A checkpoint is rebuilt as type(model)(config): with another config the saved weights would not fit.
    """
    built = getattr(model, "config", None)
    if built is None:
        return  # a model that does not record its config: the caller's word is taken
    if type(built) is not type(config):
        raise ValueError(f"config is a {type(config).__name__}, but the model was built with a {type(built).__name__}")
    if built != config:
        given, own = vars(config), vars(built)
        diff = {k: (own[k], given.get(k)) for k in own if given.get(k) != own[k]}
        raise ValueError(f"config is not the one the model was built with (model.config); (model's, given) differ "
                         f"at {diff}: a checkpoint saved with it could not be rebuilt")
    with torch.device("meta"):  # no memory, no random draws: only the shapes the config gives
        rebuilt = {k: tuple(v.shape) for k, v in type(model)(config).state_dict().items()}
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if rebuilt != shapes:  # e.g. model.config changed after the model was built
        diff = {k: (shapes.get(k), rebuilt.get(k)) for k in sorted(shapes.keys() | rebuilt.keys())
                if shapes.get(k) != rebuilt.get(k)}
        raise ValueError(f"config builds weights of other shapes than the model's ((model's, config's): {diff}): "
                         "was model.config changed after the model was built? A checkpoint saved with it could not "
                         "be rebuilt")


def check_map_location(name: str, device) -> torch.device:
    """Return torch.device(device) if it names a device this machine has; else raise ValueError naming `name`."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"{name} must be a device such as 'cpu', 'cuda' or 'cuda:1', got {device!r}") from None
    if parsed.type not in ("cpu", "cuda", "mps", "meta"):  # torch would fail later, in a way that reads as damage
        raise ValueError(f"{name} must be a 'cpu', 'cuda', 'mps' or 'meta' device, got {device!r}")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={device!r}, but this machine has no CUDA GPU (torch.cuda.is_available() is False): "
                         "use 'cpu'")
    if parsed.type == "cuda" and (parsed.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"{name}={device!r}, but this machine has {torch.cuda.device_count()} CUDA device(s)")
    mps = getattr(torch.backends, "mps", None)
    if parsed.type == "mps" and not (mps is not None and mps.is_available()):
        raise ValueError(f"{name}={device!r}, but Apple's MPS is not available on this machine: use 'cpu'")
    return parsed


def check_env_int(name: str, environ, minimum: int = 0, below: int | None = None, meaning: str = "") -> int:
    """Return environment variable `name` as an int >= `minimum` (and < `below`); else raise ValueError naming it."""
    value = environ.get(name)
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < minimum or (below is not None and number >= below):
        bounds = f"an int >= {minimum}" + ("" if below is None else f" and < {below}")
        raise ValueError(f"environment variable {name} must be {bounds}{meaning}, got {value!r}")
    return number


def _is_positive_number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def check_positive_number(name: str, value, meaning: str = "") -> float:
    """Return `value` if it is a finite number > 0 (not a bool); else raise ValueError naming `name`."""
    if not _is_positive_number(value):
        raise ValueError(f"{name} must be a finite number > 0{meaning}, got {value!r}")
    return value


def check_optional_positive_number(name: str, value, meaning: str = "") -> float | None:
    """Return `value` if it is None or a finite number > 0 (not a bool); else raise ValueError naming `name`."""
    if value is not None and not _is_positive_number(value):
        raise ValueError(f"{name} must be None or a finite number > 0{meaning}, got {value!r}")
    return value


# what torch.load(weights_only=True) rebuilds; a subclass (NamedTuple, IntEnum, numpy.float64) is pickled by class
_PLAIN_VALUES = (type(None), bool, int, float, complex, str, bytes, bytearray, torch.dtype, torch.device,
                 Tensor, nn.Parameter)
_PLAIN_SEQUENCES = (list, tuple, set, torch.Size)


def check_weights_only(name: str, value) -> None:
    """Raise TypeError naming the entry of `value` (e.g. "extra['p']") that torch.load(weights_only=True) refuses.

    Accepted: tensors, None, bool, int, float, complex, str, bytes, torch.dtype/device/Size, and dicts, lists,
    tuples and sets of these.
    """
    kind = type(value)
    if kind in _PLAIN_VALUES:
        return
    if kind in _PLAIN_SEQUENCES:
        for i, item in enumerate(value):
            check_weights_only(f"{name}[{i}]" if kind is not set else f"an element of {name}", item)
        return
    if kind in (dict, OrderedDict):
        for key, item in value.items():
            check_weights_only(f"a key of {name}", key)
            check_weights_only(f"{name}[{key!r}]", item)
        return
    raise TypeError(f"{name} is a {kind.__module__}.{kind.__qualname__}, which torch.load(weights_only=True) "
                    f"refuses: a checkpoint holds only tensors and plain Python values (None, bool, int, float, str, "
                    f"bytes, and lists, tuples, sets and dicts of them). Convert it first, e.g. str(path) or float(x)")


# ---- the model layer's checks (issue 24): each model file calls one of these in one line at its entry point


def check_bools(**flags) -> None:
    """Check that each keyword argument is True or False, e.g. check_bools(causal=causal, need_weights=...)."""
    for name, value in flags.items():
        check_bool(name, value)


def check_instance(name: str, value, cls: type, optional: bool = False):
    """Return `value` if it is an instance of `cls` (or, with `optional`, None); else raise TypeError naming `name`."""
    if not (isinstance(value, cls) or (optional and value is None)):
        raise TypeError(f"{name} must be {'None or ' if optional else ''}a {cls.__name__}, got {describe(value)}")
    return value


def check_items(name: str, items, cls: type, length: int, per: str, optional: bool = False) -> None:
    """Check that `items` is a list or tuple of `length` instances of `cls`, one `per` thing (e.g. "block"), or, with
    `optional`, None."""
    if optional and items is None:
        return
    if not isinstance(items, (list, tuple)) or len(items) != length:
        got = len(items) if isinstance(items, (list, tuple)) else describe(items)
        raise ValueError(f"{name} must hold one {cls.__name__} per {per} ({length}), got {got}")
    for i, item in enumerate(items):
        check_instance(f"{name}[{i}]", item, cls)


def check_nonempty(name: str, items: list, what: str) -> list:
    """Return the list `items` if it holds something; else raise ValueError: "{name} must hold at least {what}"."""
    if not items:
        raise ValueError(f"{name} must hold at least {what}, got none")
    return items


def check_vector(name: str, x, shape: str = "(n,)") -> Tensor:
    """Return `x` if it is a one-dim floating-point tensor; else raise naming `name` and its `shape`, e.g. "(H,)"."""
    if check_float_tensor(name, x).dim() != 1:
        raise ValueError(f"{name} must have shape {shape}, got shape {tuple(x.shape)}")
    return x


def check_features(name: str, x, size: int, what: str = "d_model") -> Tensor:
    """Return `x` if it is a floating-point tensor of shape (..., size); else raise naming `name`."""
    if check_float_tensor(name, x).size(-1) != size:
        raise ValueError(f"{name} must have shape (..., {what}={size}), got {describe(x)}")
    return x


def check_table_input(x, offset, positions, max_len: int, d_model: int) -> None:
    """Check the input of a positional table (max_len, d_model): x a floating-point (B, T, d_model) tensor (else
    the table broadcasts against it, or an integer x rounds the positions away), then see check_table_positions.
    """
    check_sequence("x", x, d_model)
    check_table_positions(x, offset, positions, max_len)


def check_ids(name: str, ids, vocab_size: int) -> Tensor:
    """Return `ids` if it is an integer tensor (any shape) of ids in 0..vocab_size-1; else raise naming `name`.

    As check_tokens with a vocab_size, it costs a min/max reduction that waits for the device.
    """
    if not is_integer_tensor(ids):
        raise TypeError(f"{name} must hold integer ids, got {describe(ids)}")
    if ids.numel():
        low, high = torch.aminmax(ids)
        if bool((low < 0) | (high >= vocab_size)):
            raise ValueError(f"{name} must hold ids in 0..{vocab_size - 1} (vocab_size={vocab_size}), "
                             f"got ids from {low.item()} to {high.item()}")
    return ids


def check_dtype(name: str, x: Tensor, dtype: torch.dtype, of: str, hint: str = "") -> Tensor:
    """Return `x` if its dtype is `dtype`, the dtype `of` something else; else raise TypeError naming `name`."""
    if x.dtype != dtype:
        raise TypeError(f"{name} has dtype {x.dtype}, but {of} has dtype {dtype}{hint}")
    return x


def check_cache_step(k: Tensor, v: Tensor, cached: Tensor | None) -> None:
    """A KV cache's new keys `k` and values `v` (B, H_kv, T_new, d_k) must agree with each other, and with the
    `cached` keys (None: an empty cache) in batch size and dtype: torch.cat would promote an fp16 step to an fp32
    cache (or the other way round) silently.
    """
    if not isinstance(k, Tensor) or not isinstance(v, Tensor) or k.dim() != 4 or k.shape[:3] != v.shape[:3] \
            or k.dtype != v.dtype:
        raise ValueError(f"k and v must be (B, H_kv, T_new, d) tensors of one dtype with the same B, H_kv and T_new, "
                         f"got k {describe(k)} and v {describe(v)}")
    if cached is not None:
        check_batch_size("the input", k, cached.size(0), of="the KV cache", hint=": start a new cache for it")
        check_dtype("k", k, cached.dtype, of="the KV cache", hint=": start a new cache, or run every step in one dtype")


def check_mask(mask, scores_shape: tuple[int, ...] | None = None, name: str = "mask") -> None:
    """Raise a clear error unless `mask` is a bool tensor (True = may attend) that broadcasts to `scores_shape`.

    Broadcasting aligns shapes from the right, so a 2-D mask is read as (T_q, T_k): a (B, T_k) padding mask with
    B == T_q passes as a (T_q, T_k) one, the classic mistake, which no check can tell from a real (T_q, T_k) mask.
    Pass padding as (B, 1, 1, T_k), as `shared.masks.padding_mask` builds it.
    """
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must have dtype torch.bool (True = may attend), got {mask.dtype}")
    if mask.dim() > 4:
        raise ValueError(f"{name} must have at most 4 dims (B, H, T_q, T_k), got shape {tuple(mask.shape)}")
    if scores_shape is not None:
        try:
            check_broadcasts(name, mask, scores_shape, "the attention scores (B, H, T_q, T_k)")
        except ValueError as error:
            if mask.dim() != 2:
                raise
            hint = "a (B, T_k) padding mask as (B, 1, 1, T_k), e.g. mask[:, None, None, :] (padding_mask builds it)"
            raise ValueError(f"{error}; a 2-D mask is read as (T_q, T_k): pass {hint}") from None


def check_attention_inputs(q, k, v, mask=None, dropout_p: float = 0.0, bias=None) -> None:
    """Check scaled_dot_product_attention's arguments: q (..., T_q, d_k), k (..., T_k, d_k) and v (..., T_k, d_v),
    floating-point with d_k >= 1 and one dtype (outside autocast, which casts them itself); dropout_p in [0, 1);
    a bool mask and a float bias that broadcast to the scores (..., T_q, T_k), the bias finite or -inf (hidden).
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(name, x, min_dim=2)  # (..., T, d)
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q and k must share their last dim d_k, got {q.size(-1)} and {k.size(-1)}")
    check_int("d_k", q.size(-1), meaning=" (the last dim of q and k: the scores divide by sqrt(d_k))")
    if k.size(-2) != v.size(-2):
        raise ValueError(f"k and v must have the same length T_k, got {k.size(-2)} and {v.size(-2)}")
    check_dropout("dropout_p", dropout_p)
    autocast = torch.is_autocast_enabled(q.device.type)  # autocast casts q, k, v and the scores itself
    for name, x in (("k", k), ("v", v), ("bias", bias)):
        if x is not None and not autocast:
            check_dtype(name, check_float_tensor(name, x), q.dtype, of="q")
    if mask is None and bias is None:
        return
    try:  # the scores' shape: the batch dims of q and k broadcast, then (T_q, T_k)
        scores_shape = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.size(-2), k.size(-2))
    except RuntimeError:
        raise ValueError(f"the batch dims of q {tuple(q.shape)} and k {tuple(k.shape)} must broadcast") from None
    if mask is not None:
        check_mask(mask, scores_shape)
    if bias is not None:
        check_broadcasts("bias", check_float_tensor("bias", bias), scores_shape, "the attention scores (..., T_q, T_k)")
        if not bool((bias < math.inf).all()):  # +inf or NaN: softmax would return NaN
            raise ValueError("bias must hold finite values or -inf (a key that may not be attended), got +inf or NaN")
