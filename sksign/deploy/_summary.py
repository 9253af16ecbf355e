"""What a packed model deploys: bits and bytes per layer, and its measured speed."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
import time

import numpy as np

from sksign.deploy._estimators import _PackedBase
from sksign.deploy._kernels import (
    block_sums,
    sign_products,
    step_products,
    table_sums,
)
from sksign.deploy._runtime import OPS, PackedNet
from sksign.kernels import effective_n_threads, popcount_instructions

__all__ = ["packed_summary"]

_COLUMNS = (
    "layer",
    "op",
    "in",
    "out",
    "arithmetic",
    "weight_bytes_float32",
    "weight_bytes_packed",
    "act_bytes_float32",
    "act_bytes_packed",
)


#: Seconds of untimed runs before a function's timed ones. Torch's OpenMP
#: workers spin on the other cores for 20-40 ms after torch's last call (the
#: reference's, or the caller's own torch code), and a packed net timed among
#: them on two threads took 0.52 ms instead of 0.35 (an MLP 64-256-256-10 at
#: batch 256 on a 2-core AMD EPYC).
SETTLE_SECONDS = 0.05


def _best_times(funcs, n_repeats):
    """Best wall time of each function over `n_repeats` runs, after warm-up
    runs (at least one, for at least :data:`SETTLE_SECONDS`).

    Each function's runs go back to back, so each sees its own data in the
    caches, as a serving loop would: interleaved with the other function,
    the torch forward of a small MLP at batch 1 measured 1.6x slower (its
    weights evicted by the packed run).
    """
    best = []
    for func in funcs:
        start = time.perf_counter()
        func()  # warm-up (numba compilation, caches)
        while time.perf_counter() - start < SETTLE_SECONDS:
            func()
        t = math.inf
        for _ in range(n_repeats):
            start = time.perf_counter()
            func()
            t = min(t, time.perf_counter() - start)
        best.append(t)
    return best


def _plural(n, word):
    return f"{n} {word}{'s' if n != 1 else ''}"


def _verdict(ratio):
    """``"2.47x faster"``, ``"1.85x slower"`` (never ``"0.54x faster"``)."""
    if f"{ratio:.2f}" == "1.00" or f"{1 / ratio:.2f}" == "1.00":
        return "as fast"
    if ratio > 1:
        return f"{ratio:.2f}x faster"
    return f"{1 / ratio:.2f}x slower"


def _rows(net):
    rows = []
    for layer in net.layers:
        op = layer["op"]
        spec = OPS[op]
        width_in = net.width(layer["inputs"][0])
        width_out = net.width(layer["output"])
        per_sample = net.rows_per_sample(layer["output"])
        out_kind = "float" if spec.writes == "float" else "bits"
        arrays = [net.tensors[name] for name in layer.get("tensors", {}).values()]
        packed = sum(int(a.nbytes) for a in arrays)
        # float32 equivalent: every weight (a bit or a float) as 4 bytes, and
        # every per-unit vector (bias, threshold, scale) as 4 bytes per unit
        if spec.n_weights is not None:
            n_weights = spec.n_weights(layer, width_in, width_out)
        else:  # their 2-D weight arrays
            n_weights = sum(a.size for a in arrays if a.ndim == 2)
        n_vectors = sum(a.size for a in arrays if a.ndim == 1)
        units = width_out * per_sample
        rows.append(
            {
                "layer": layer["name"],
                "op": op,
                "in": width_in,
                "out": width_out,
                "arithmetic": spec.arithmetic,
                "weight_bytes_float32": 4 * (n_weights + n_vectors),
                "weight_bytes_packed": packed,
                "act_bytes_float32": 4 * units,
                "act_bytes_packed": math.ceil(units / 8)
                if out_kind == "bits"
                else 4 * units,
            }
        )
    return rows


def _format(rows, total, footer):
    def cell(v):
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    body = [[cell(r.get(c, "")) for c in _COLUMNS] for r in [*rows, total]]
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(_COLUMNS)]
    rule = "  ".join("-" * w for w in widths)
    lines = ["  ".join(c.ljust(w) for c, w in zip(_COLUMNS, widths)), rule]
    for i, b in enumerate(body):
        if i == len(body) - 1:
            lines.append(rule)
        lines.append(
            "  ".join(
                v.ljust(w) if j in (0, 1, 4) else v.rjust(w)
                for j, (v, w) in enumerate(zip(b, widths))
            )
        )
    lines.extend(footer)
    return "\n".join(line.rstrip() for line in lines)


def packed_summary(packed, X=None, *, reference=None, n_repeats=5):
    """Per-layer bits and bytes of a packed model, and its measured speed.

    Parameters
    ----------
    packed : PackedClassifier, PackedRegressor or PackedNet
        The packed model.
    X : array-like of shape (n_samples, n_features), default=None
        Samples to time the packed model on (``predict`` of a packed
        estimator, ``forward`` of a :class:`PackedNet`); None skips the
        timing.
    reference : torch.nn.Module, fitted sksign net or estimator, default=None
        The model to compare with. A torch module, or a fitted sksign net
        (``HTAFNetClassifier``, ``HTAFNetRegressor``, ``ICBMClassifier``: its
        ``module_``), is timed as torch runs it, not through skorch's
        ``predict``: the module's own forward in eval mode with its step
        activations forced to the exact step (what the packed net computes),
        under :func:`torch.inference_mode`, on a tensor made from `X` once, on
        as many torch threads as the packed run has. Another estimator is
        timed through its ``predict(X)``.
    n_repeats : int, default=5
        Timings are the best of this many runs, each model's runs back to
        back (warm caches) after untimed ones for at least 50 ms (one at
        least), which let torch's idle OpenMP workers stop spinning.

    Returns
    -------
    rows : list of dict
        One dict per layer with the keys ``layer``, ``op``, ``in``, ``out``,
        ``arithmetic``, ``weight_bytes_float32`` (4 bytes per weight and per
        bias, threshold or scale entry), ``weight_bytes_packed`` (the bytes
        the packed layer holds), ``act_bytes_float32`` and
        ``act_bytes_packed`` (per sample; packed activations are bits), then
        a ``total`` row that also holds ``popcount`` (the instructions the
        bit kernels run on this machine, see
        :func:`~sksign.kernels.popcount_instructions`), ``sign_products``
        (how the sign x sign dense layers count: ``"XOR + vpopcntq on register
        blocks of 4 rows x 32 outputs"`` on AVX-512 VPOPCNTDQ, else carry-save
        adders and a popcount per eight words), ``map_sums`` (how the
        convolutions of real weights on bit maps add their table rows:
        vectors of 16 floats on AVX-512, else of 8), ``step_products``
        (how layers of real weights on bits followed by a step multiply 8 rows
        or more here: by look-up tables of 14-bit weights with ``vpermb`` and
        ``vpdpbusd`` from 32 rows where the CPU has AVX-512 VBMI and VNNI,
        with ``vpshufb`` where it has AVX2 but no AVX-512 BW,
        ``"int16 x bits by vpmaddwd (AVX2), exact int32"`` (``AVX-512 BW``
        where it has that, without VBMI: 512-bit products) or
        ``"float32 BLAS of the unpacked bits"``), ``block_sums`` (how a residual
        block's float sum that goes to a BatchNorm and step alone runs: from
        look-up sums to the step's bits where the CPU has those look-ups,
        else float32 table sums with the add, affine map and step in one
        pass), ``seconds_packed`` and, with a
        `reference`, ``reference`` (what was timed, for instance ``"the torch
        module's forward (float32, 1 thread)"``), ``seconds_reference`` and
        ``speedup`` (``seconds_reference / seconds_packed``: below 1 when the
        packed model is slower).
    table : str
        The rows as a fixed-width table with the totals and the timing, whose
        last line names both sides of the comparison and says "faster" or
        "slower".

    See Also
    --------
    sksign.nn.binary_summary : The same bytes read from the torch net.

    Notes
    -----
    Binary-weight nets (``architecture="bnn"``, Bi-Real) gain most on bits;
    real-weight step nets (the Heaviside MLP, the step ResNet) gain less,
    and can be slower than torch's float32 forward where the CPU has no
    AVX2 (their products of many rows then go through a float32 BLAS
    product). See :ref:`deploy` for measured figures.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.deploy import pack, packed_summary
    >>> X, y = load_digits(return_X_y=True)
    >>> net = HTAFNetClassifier((64, 64), architecture="bnn", max_epochs=1,
    ...                         random_state=0).fit(X / 16, y)
    >>> rows, table = packed_summary(pack(net), X / 16, reference=net)
    >>> [r["op"] for r in rows[:4]]
    ['dense', 'batch_norm', 'step', 'xnor_dense']
    >>> rows[3]["weight_bytes_packed"] < rows[3]["weight_bytes_float32"] / 10
    True
    >>> rows[-1]["reference"]
    "the torch module's forward (float32, 1 thread)"
    >>> print(table.splitlines()[-1][:64])
    packed predict vs the torch module's forward (float32, 1 thread)
    """
    if isinstance(packed, _PackedBase):
        net, estimator = packed.net_, packed
    elif isinstance(packed, PackedNet):
        net, estimator = packed, None
    else:
        raise TypeError(
            "packed_summary takes a PackedClassifier, PackedRegressor or "
            f"PackedNet; got {type(packed).__name__}."
        )
    rows = _rows(net)
    total = {"layer": "total", "op": "", "arithmetic": ""}
    for key in _COLUMNS[5:]:
        total[key] = sum(r[key] for r in rows)
    total["act_bytes_float32"] = sum(
        r["act_bytes_float32"] for r in rows if r["op"] != "time_mean"
    )
    f32, pk = total["weight_bytes_float32"], total["weight_bytes_packed"]
    total["popcount"] = popcount_instructions()
    total["sign_products"] = sign_products()
    total["map_sums"] = table_sums()
    total["step_products"] = step_products()
    total["block_sums"] = block_sums()
    footer = [
        f"weights: {pk} bytes packed vs {f32} bytes float32 "
        f"({f32 / max(pk, 1):.1f}x smaller); activations per sample.",
        f"popcount kernels compiled for: {total['popcount']}.",
        f"sign x sign dense layers: {total['sign_products']}.",
        f"real weights on bit maps: {total['map_sums']}.",
        "real weights on bits before a step, 8 rows or more: "
        f"{total['step_products']}.",
        f"a block's sum before a step: {total['block_sums']}.",
    ]
    if X is not None:
        footer.append(_timing(net, estimator, X, reference, n_repeats, total))
    return [*rows, total], _format(rows, total, footer)


def _timing(net, estimator, X, reference, n_repeats, total):
    """Time the packed model (and the reference) on X; fill `total`, return a line."""
    if estimator is None:
        X32 = np.asarray(X, dtype=np.float32)
        X32 = np.ascontiguousarray(X32.reshape(len(X32), -1))
        n_threads, what_packed = 1, "packed forward"

        def run_packed():
            return net.forward(X32, n_threads)

    else:
        X32 = estimator._rows(X)
        n_threads, what_packed = effective_n_threads(estimator.n_jobs), "packed predict"

        def run_packed():
            return estimator.predict(X)

    if reference is None:
        (t_packed,) = _best_times([run_packed], n_repeats)
        total["seconds_packed"] = t_packed
        return (
            f"{what_packed} ({_plural(n_threads, 'thread')}) on "
            f"{_plural(len(X32), 'sample')}: {t_packed * 1e3:.3f} ms, "
            f"best of {n_repeats}."
        )
    if hasattr(reference, "module_") or not hasattr(reference, "predict"):
        # a torch net: its module's own forward (torch is imported here only)
        from sksign.deploy._convert import _torch_forward

        with _torch_forward(reference, X32, n_threads) as (run_reference, what):
            t_packed, t_ref = _best_times([run_packed, run_reference], n_repeats)
    else:
        what = f"{type(reference).__name__}.predict"
        t_packed, t_ref = _best_times(
            [run_packed, lambda: reference.predict(X)], n_repeats
        )
    ratio = t_ref / t_packed
    total.update(
        seconds_packed=t_packed, reference=what, seconds_reference=t_ref, speedup=ratio
    )
    return (
        f"{what_packed} vs {what} on {_plural(len(X32), 'sample')}: "
        f"{t_packed * 1e3:.3f} vs {t_ref * 1e3:.3f} ms, best of {n_repeats}: "
        f"packed {_verdict(ratio)}."
    )
