"""``xnor_dense``: binary weights on bits (XNOR-popcount), ``alpha * dot + beta``.

The outputs are numpy's ``float32(dot * float64(alpha) + float64(beta))``.
Both sign x sign kernels compute them by float32 fused multiply-adds where
that gives the same floats for every dot (:func:`~sksign.kernels.fma_exact`,
checked once here); a layer whose scales fail the check passes them as
float64, which keeps the float64 map.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import xnor_kernel, xnor_weights
from sksign.deploy._ops._common import run_rows_cols
from sksign.kernels import fma_exact, packed_to_words


def prepare(layer, ctx):
    n_bits, n_out = ctx.width(layer), layer["attrs"]["out"]
    words = ctx.derive(  # the layout of the kernel chosen here
        "xnor_words",
        layer,
        "weight_bits",
        lambda raw: xnor_weights(np.ascontiguousarray(packed_to_words(raw, n_bits).T)),
    )
    alpha, beta = ctx.tensor(layer, "alpha"), ctx.tensor(layer, "beta")
    if not fma_exact(alpha, beta, n_bits):
        alpha, beta = alpha.astype(np.float64), beta.astype(np.float64)
    kernel = xnor_kernel()  # register blocks on AVX-512 VPOPCNTDQ

    def run(xs, n, n_threads):
        x = xs[0]
        out = empty((x.shape[0], n_out), np.float32)
        args = (x, words, n_bits, alpha, beta, out)
        run_rows_cols(kernel, x.shape[0], n_out, n_threads, *args)
        return out

    return run


SPEC = OpSpec(
    "bits",
    "float",
    1,
    {"out": int},
    {
        "weight_bits": ("uint8", ("out", "in_bytes")),
        "alpha": ("float32", ("out",)),
        "beta": ("float32", ("out",)),
    },
    work_divisor=16,  # a multiply-accumulate is a sixteenth of a word
    arithmetic="xnor-popcount",
    n_weights=lambda layer, n_in, n_out: n_in * n_out,  # one bit each
    prepare=prepare,
)
