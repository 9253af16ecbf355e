"""``dense``: float rows times a float32 weight matrix, plus a bias.

With ``float64``, in float64 (the copies are made once, at load). Small
float32 weights are also kept transposed (:data:`TRANSPOSED_MAX_BYTES`). A
``step`` after a float32 layer runs in the pass that adds the bias
(:func:`sksign.deploy._kernels.pack_affine_ge`, times one plus the bias:
each sum rounded to float32 as ``out += bias`` rounds it), writing the bits
and no float rows: on the Heaviside MLP's 64 -> 256 first layer at 256
rows, the bias add (11 us) and the step (8 us) became one pass of 9 us.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.deploy._buffers import empty
from sksign.deploy._format import OpSpec
from sksign.deploy._kernels import pack_affine_ge
from sksign.deploy._ops import step
from sksign.deploy._ops._common import blas_product, run_rows

#: Largest float32 weights (bytes) a layer also keeps transposed (a second
#: copy, made at load). The Heaviside MLP's 64 -> 256 first layer on 256
#: rows: 67 against 72 us alone, its forward 255-261 against 261-269 us
#: (Intel Xeon, one thread, 30 alternating rounds; the same sums). Wider
#: layers (a transformer's feed-forward blocks) keep one copy.
TRANSPOSED_MAX_BYTES = 2**20


def prepare(layer, ctx, epilogue=()):
    w, b = ctx.tensor(layer, "weight"), ctx.tensor(layer, "bias")
    if layer["attrs"]["float64"]:
        w64 = np.ascontiguousarray(w.T, dtype=np.float64)
        b64 = b.astype(np.float64)

        def run(xs, n, n_threads):
            out = blas_product(xs[0].astype(np.float64), w64, n_threads)
            out += b64
            return out.astype(np.float32)

        if not epilogue:
            return run
        then = step.prepare(epilogue[0], ctx)  # no float32 pass to take it over

        def layer_by_layer(xs, n, n_threads):
            return then([run(xs, n, n_threads)], n, n_threads)

        return layer_by_layer

    # small weights also as (in, out) rows, C-contiguous: OpenBLAS's sgemm
    # packs them faster than the transposed view
    w_in = (
        ctx.derive("transposed", layer, "weight", lambda a: np.ascontiguousarray(a.T))
        if w.nbytes <= TRANSPOSED_MAX_BYTES
        else w.T
    )
    if epilogue:  # a step: 1[(x @ w.T) * 1 + b >= 0] (a product by 1 is exact)
        ones = np.ones_like(b)
        n_words = -(-len(b) // 64)

        def run_step(xs, n, n_threads):
            z = blas_product(xs[0], w_in, n_threads)
            out = empty((len(z), n_words), np.uint64)
            run_rows(pack_affine_ge, len(z), n_threads, z, ones, b, out)
            return out

        return run_step

    def run(xs, n, n_threads):
        out = blas_product(xs[0], w_in, n_threads)
        out += b
        return out

    return run


SPEC = OpSpec(
    "float",
    "float",
    1,
    {"out": int, "float64": bool},
    {"weight": ("float32", ("out", "in")), "bias": ("float32", ("out",))},
    arithmetic="float x float",
    prepare=prepare,
    epilogues=(("step",),),
)
