"""Dequantization by hand: GGUF's Q4_1 and Q8_0 blocks of 32 weights -> float32 (equal to gguf.quants.dequantize).

Q4_1 (20 bytes per 32 weights, 5 bits each): a float16 scale d, a float16 minimum m, then 16 bytes of 4-bit codes
q in 0..15 (byte j holds weight j in its low nibble and weight j + 16 in its high one); w = d * q + m.
Q8_0 (34 bytes per 32 weights): a float16 scale d, then 32 signed bytes q; w = d * q.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

BLOCK = 32  # weights per block
Q4_1_BYTES, Q8_0_BYTES = 20, 34  # bytes per block


KINDS = ("F32", "F16", "Q4_1", "Q8_0")  # the tensor types the course reads


def _blocks(raw: Tensor, nbytes: int, name: str) -> Tensor:
    if not isinstance(raw, Tensor) or raw.dtype != torch.uint8 or raw.dim() == 0:
        raise ValueError(f"{name} must be a uint8 tensor of whole {nbytes}-byte blocks, got "
                         f"{getattr(raw, 'dtype', type(raw).__name__)} of shape {tuple(getattr(raw, 'shape', ()))}")
    if raw.size(-1) % nbytes:  # a block never straddles two rows
        raise ValueError(f"{name}'s last dimension must be whole {nbytes}-byte blocks, got {tuple(raw.shape)}")
    return raw.reshape(-1, nbytes)  # (n_blocks, nbytes)


def _half(two_bytes: Tensor) -> Tensor:
    """(n, 2) uint8, little-endian float16 -> (n, 1) float32."""
    return two_bytes.contiguous().view(torch.float16).float()


def dequantize_q4_1(raw: Tensor) -> Tensor:
    """uint8 (..., k * 20) Q4_1 bytes -> float32 (..., k * 32) weights: w = d * q + m per block."""
    b = _blocks(raw, Q4_1_BYTES, "raw")  # (n, 20)
    d, m, codes = _half(b[:, 0:2]), _half(b[:, 2:4]), b[:, 4:]  # (n, 1), (n, 1), (n, 16)
    q = torch.cat([codes & 0x0F, codes >> 4], dim=1).float()  # (n, 32): low nibbles are weights 0..15
    return (d * q + m).reshape(*raw.shape[:-1], -1)


def dequantize_q8_0(raw: Tensor) -> Tensor:
    """uint8 (..., k * 34) Q8_0 bytes -> float32 (..., k * 32) weights: w = d * q per block."""
    b = _blocks(raw, Q8_0_BYTES, "raw")  # (n, 34)
    d, q = _half(b[:, 0:2]), b[:, 2:].view(torch.int8).float()  # (n, 1), (n, 32)
    return (d * q).reshape(*raw.shape[:-1], -1)


def scales(tensor) -> Tensor:
    """A gguf.ReaderTensor's numbers that set its weights' range: F32/F16 its weights, Q4_1 each block's d and m,
    Q8_0 each block's d. Every weight is finite exactly when these are (codes are small integers)."""
    data, kind = np.asarray(tensor.data), tensor.tensor_type.name  # the file's memory map: nothing copied yet
    if kind in ("F32", "F16"):
        return torch.from_numpy(np.array(data))
    b = data.reshape(-1, Q4_1_BYTES if kind == "Q4_1" else Q8_0_BYTES)  # (n_blocks, bytes)
    return _half(torch.from_numpy(np.array(b[:, 0:4] if kind == "Q4_1" else b[:, 0:2])))  # (n_blocks, 2 or 1)


def dequantize(tensor) -> Tensor:
    """A gguf.ReaderTensor -> float32 Tensor in PyTorch's order (rows, columns): F32, F16, Q4_1 or Q8_0."""
    kind = tensor.tensor_type.name
    shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))  # GGUF lists the fastest dimension first
    data = torch.from_numpy(np.array(tensor.data))  # a copy of this one tensor's bytes (the file stays mapped)
    if kind in ("F32", "F16"):
        out = data.float()
    elif kind == "Q4_1":
        out = dequantize_q4_1(data)
    elif kind == "Q8_0":
        out = dequantize_q8_0(data)
    else:
        raise ValueError(f"tensor {tensor.name!r} is {kind}: the course reads F32, F16, Q4_1 and Q8_0 "
                         "(gguf.quants.dequantize reads the others)")
    return out.reshape(shape)
