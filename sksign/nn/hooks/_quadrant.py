"""Quadrant majority of conv pre-activations in one pass (numba, CPU).

``quadrant_majority(z)`` equals ``pool_signs(z > 0)[0]`` of
:mod:`sksign.nn.hooks` (the majority sign per channel and 2x2 quadrant, ties
to +1, the middle row or column of an odd size in both halves), but reads the
float map once and writes only the bits: no (N, C, H, W) bool map, no
reductions over short axes. For a small CNN's first conv layer that is about
8x less work than the torch ops (``benchmarks/bench_sign_codes.py``). It serves
CPU tensors of float32 or float64 in contiguous NCHW layout; everything else
(a GPU, half precision, channels-last) takes the torch path.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import torch
from numba import njit

__all__ = ["quadrant_majority", "supports_quadrant_majority"]

_DTYPES = (torch.float32, torch.float64)


@njit(cache=True, nogil=True, fastmath=False, boundscheck=False)
def _quadrant_majority(z, out):  # pragma: no cover - compiled by numba
    """Bits (N, 4C) of a (N, C, H, W) float map, channel-major, quadrants 0..3.

    Column counts of the top and bottom row halves are accumulated over whole
    rows (a loop that vectorises), then summed over the column halves.
    """
    n, c, h, w = z.shape
    top_rows, bottom_start = (h + 1) // 2, h // 2
    left_cols, right_start = (w + 1) // 2, w // 2
    n_pix = top_rows * left_cols  # every quadrant has ceil(H/2) * ceil(W/2)
    top = np.zeros(w, np.int32)
    bottom = np.zeros(w, np.int32)
    for i in range(n):
        for j in range(c):
            top[:] = 0
            bottom[:] = 0
            m = z[i, j]
            for r in range(top_rows):
                for k in range(w):
                    top[k] += m[r, k] > 0
            for r in range(bottom_start, h):
                for k in range(w):
                    bottom[k] += m[r, k] > 0
            q0 = q1 = q2 = q3 = 0
            for k in range(left_cols):
                q0 += top[k]
                q2 += bottom[k]
            for k in range(right_start, w):
                q1 += top[k]
                q3 += bottom[k]
            base = 4 * j
            out[i, base] = 2 * q0 >= n_pix
            out[i, base + 1] = 2 * q1 >= n_pix
            out[i, base + 2] = 2 * q2 >= n_pix
            out[i, base + 3] = 2 * q3 >= n_pix


def supports_quadrant_majority(z: torch.Tensor) -> bool:
    """Whether :func:`quadrant_majority` takes `z` (CPU, float32/64, NCHW)."""
    return (
        z.dim() == 4
        and z.device.type == "cpu"
        and z.dtype in _DTYPES
        and z.is_contiguous()
        and z.numel() > 0
    )


def quadrant_majority(z: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) pre-activations -> (N, 4C) bool quadrant majority of ``z > 0``.

    Parameters
    ----------
    z : torch.Tensor
        A CPU float32 or float64 tensor, contiguous (see
        :func:`supports_quadrant_majority`). NaN counts as not positive: check
        for it before.

    Returns
    -------
    bits : torch.Tensor of bool, shape (N, 4C)
    """
    n, c = z.shape[:2]
    out = np.empty((n, 4 * c), dtype=np.bool_)
    _quadrant_majority(z.detach().numpy(), out)
    return torch.from_numpy(out)
