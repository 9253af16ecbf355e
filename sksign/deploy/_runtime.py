"""The packed net at run time: a layer graph prepared once, then run.

:class:`PackedNet` checks the header and the graph against the op specs
(:mod:`sksign.deploy._format`), then asks each layer's op unit
(:mod:`sksign.deploy._ops`) to prepare it, once, at load: the forward pass
is a loop over these prepared callables, with no dispatch on op names.
Numpy and numba only: no torch.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import copy

import numpy as np
from threadpoolctl import ThreadpoolController

from sksign._threads import run_in_threads
from sksign.deploy._buffers import Buffers, aligned
from sksign.deploy._format import (
    FORMAT,
    VERSION,
    check_header,
    schema_error,
    validate_graph,
)
from sksign.deploy._fusion import chain_layer, chains, internal_values
from sksign.deploy._maps import unpack_pixels
from sksign.deploy._ops import OPS
from sksign.deploy._ops._common import Context, split, unpack_rows

__all__ = ["FORMAT", "OPS", "VERSION", "PackedNet", "blas_on_one_thread"]

#: Layers with fewer multiply-accumulates (:meth:`PackedNet._work` x rows)
#: than this run on one thread: handing work to a second thread costs about
#: 0.085 ms on a 2-core VM (waking the worker), more than the image nets'
#: convolutions at batch 1 (2-10 M multiply-adds) or a 4096 x 4096 step layer
#: on one row gain from it (measured on an AMD EPYC, Zen 3). On a 2-core
#: Intel Xeon VM a layer of 2**24 (the 256 x 256 step layer of a Heaviside
#: MLP at batch 256, about 130 us on one thread) took 134-183 us on two
#: against 132-140 on one; with 2**25 the MLP's forward on two threads went
#: from 0.37 to 0.31 ms, and image nets at batches 4 to 16 on two threads
#: gained up to 30% (Bi-Real ResNet-18 at batch 8, 2.3x torch -> 2.8-3.0x).
PARALLEL_MIN_WORK = 2**25
#: Multiply-accumulates an element of an element-wise op (on maps or rows),
#: a pooling op or a neuron op counts for: one
#: pass over a float map runs at about 1/64 of the multiply-adds a second of
#: the convolution kernels (so a batch of 64 maps of 16K values splits).
ELEMENT_WORK = 64
#: A call whose largest value takes fewer bytes than this allocates as numpy
#: does: glibc serves such arrays from its heap, still in cache, and the
#: pool's bookkeeping (2-3 microseconds a layer) would cost the call more than
#: it saves. Measured on an AMD EPYC (Zen 4), image nets of ``bench_packed.py``
#: at batches 1 to 64, plain arrays against the pool: 3-4% faster for the
#: WRN-10-2 at batch 1 (largest value 128 KiB), within 5% either way from
#: 256 KiB to 2 MiB, 18-70% slower from 4 MiB on, where glibc hands the
#: freed memory back and each call faults in fresh pages (see
#: :mod:`sksign.deploy._buffers`). On a 2-core Intel Xeon the pool cost the
#: Heaviside MLP 64-256-256-10 at batch 256 (largest value 256 KiB) 30 of
#: its 330 us (hold and drop 10 us, the rest in its ops): 1 MiB since, image
#: nets at batches 4 to 16 within noise.
POOL_MIN_BYTES = 2**20
#: Samples of an image net run together (its feature maps take memory in
#: proportion to the batch). A larger batch runs in equal chunks of at most
#: this many samples, set by the batch alone, so a row's outputs do not
#: depend on the thread count; with several threads the chunks run side by
#: side, one forward each (one hand-off a call, where splitting each layer
#: hands off some 30 times and waits for the slower half each time).
#: Measured on a 2-core Intel Xeon (AVX-512), batch 64, best of 8: on one
#: thread chunks of 32 ran as fast as one of 64 or faster (Bi-Real ResNet-18
#: 31.4-31.6 against 33.6-34.2 ms, step ResNet-18 38.1-39.4 against
#: 38.1-39.0, WRN-10-2 44.2-45.3 against 46.2-46.5, SEW-ResNet-18 171-176
#: against 171-176); on two, side by side against each layer split, 17.4-17.7
#: against 24.7, 19.7-20.7 against 24.8-25.8, 22.6-22.9 against 27.0-27.1 and
#: 88.8-90.2 against 105-106 ms.
MAP_CHUNK = 32


_BLAS_LIBRARIES = []


class blas_on_one_thread:  # lower case, as contextlib's context managers
    """Run the block with every BLAS library on one thread of its own.

    A forward splits its float products over its own threads
    (:func:`~sksign.deploy._ops._common.blas_product`). What
    ``ThreadpoolController.limit`` does, for the BLAS libraries alone and
    touching only those on another count: 3-7 microseconds a call where
    ``limit`` takes 20, which a small packed net's forward does not take.
    The user's counts come back after the block, also when it raises.
    """

    __slots__ = ("_changed",)

    def __enter__(self):
        if not _BLAS_LIBRARIES:  # found once per process (it takes milliseconds)
            found = ThreadpoolController().lib_controllers
            _BLAS_LIBRARIES.append([lib for lib in found if lib.user_api == "blas"])
        self._changed = []
        for lib in _BLAS_LIBRARIES[0]:
            n = lib.get_num_threads()
            if n != 1:
                self._changed.append((lib, n))
                lib.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        for lib, n in reversed(self._changed):
            lib.set_num_threads(n)
        return False


class PackedNet:
    """A packed layer graph and its arrays, ready to run on numpy and numba.

    Made by :func:`sksign.deploy.pack` and read back by
    :func:`sksign.deploy.load`; a :class:`~sksign.deploy.PackedClassifier` or
    :class:`~sksign.deploy.PackedRegressor` wraps it. The graph is a dict that
    serialises to JSON (the file's header), the arrays a dict of numpy
    arrays (the file's tensors). Both are validated on construction.

    Parameters
    ----------
    graph : dict
        The header: ``format``, ``version``, ``estimator`` ("classifier" or
        "regressor"), ``n_features_in``, ``layers`` (list of layer dicts with
        ``name``, ``op``, ``inputs``, ``output``, ``attrs``, ``tensors``),
        ``output`` and the estimator's metadata (``classes``, ...).
    tensors : dict of str to ndarray
        The arrays the layers name.

    Attributes
    ----------
    n_outputs_ : int
        Width of the net's output (classes, or regression targets).

    Examples
    --------
    >>> import numpy as np
    >>> from sksign.deploy import PackedNet
    >>> graph = {"format": "sksign-packed", "version": 1,
    ...          "estimator": "regressor", "n_features_in": 2, "output": "h",
    ...          "layers": [{"name": "fc", "op": "dense", "inputs": ["input"],
    ...                      "output": "h", "attrs": {"out": 1, "float64": False},
    ...                      "tensors": {"weight": "w", "bias": "b"}}]}
    >>> net = PackedNet(graph, {"w": np.ones((1, 2), np.float32),
    ...                         "b": np.zeros(1, np.float32)})
    >>> net.forward(np.array([[1.0, 2.0]], np.float32))
    array([[3.]], dtype=float32)
    """

    def __init__(self, graph, tensors):
        check_header(graph)
        # C order, on cache lines (vector loads of weight rows, see ALIGN)
        tensors = {k: aligned(v) for k, v in tensors.items()}
        for key, arr in tensors.items():
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                raise schema_error(f"tensor {key!r} holds NaN or infinity.")
        values, shapes = validate_graph(graph, tensors, OPS)
        self.n_outputs_ = values[graph["output"]][1]
        self.graph = copy.deepcopy(graph)
        self.tensors = tensors
        # the buffers of a call, kept for the next (never pickled: a fresh
        # pool on load)
        self._buffers = Buffers()
        self._prepare(values, shapes)

    def _prepare(self, values, shapes):
        """Each layer's run, prepared by its op's unit (dispatched once, here)."""
        self._widths = {name: v[1] for name, v in values.items()}
        self._per_sample = {name: v[2] for name, v in values.items()}
        # bytes of the largest value a sample makes (float32 or bits)
        self._sample_bytes = max(
            width * rows * (4 if kind == "float" else 1 / 8)
            for kind, width, rows in values.values()
        )
        # (C, H, W) of the channels-last bit maps, to unpack them for inspection
        self._shapes = {
            name: shape
            for name, shape in shapes.items()
            if values[name][0] == "pixel_bits"
        }
        context = self._context = Context(self.tensors, self._widths)
        # each layer alone (to run one, or to keep its output) ...
        self._steps = [self._step([layer], context) for layer in self.layers]
        self._by_output = {step[0]["output"]: step for step in self._steps}
        # ... and the chains of layers that run in one pass (_fusion)
        fused = chains(self.layers, OPS, self.graph["output"])
        self._fused_steps = [
            self._step(chain, context)
            if len(chain) > 1
            else self._by_output[chain[0]["output"]]
            for chain in fused
        ]
        self._internal = internal_values(fused)
        output = self.graph["output"]
        self._steps_dead = _dead_after(self._steps, output)
        self._fused_dead = _dead_after(self._fused_steps, output)
        self._has_maps = any(OPS[lay["op"]].layout == "nhwc" for lay in self.layers)

    def _step(self, chain, context):
        """``(layer, run, macs, work divisor)`` of a chain of layers."""
        first = chain[0]
        spec = OPS[first["op"]]
        macs = self._work(first, spec)
        if len(chain) == 1:
            return first, spec.prepare(first, context), macs, spec.work_divisor
        run = spec.prepare(first, context, chain[1:])
        return chain_layer(chain), run, macs, spec.work_divisor

    def _work(self, layer, spec):
        """Multiply-accumulates of `layer` per input row (what decides its threads).

        A convolution (either layout): its outputs x the patch (``k * k *
        C``); a layer with a weight matrix (a 2-D tensor): inputs x outputs;
        any other (element-wise, pooling, neurons) the larger of input and
        output width times :data:`ELEMENT_WORK`.
        """
        n_in = self._widths[layer["inputs"][0]]
        n_out = self._widths[layer["output"]]
        attrs = layer["attrs"]
        if "kernel" in attrs and "channels" in attrs:
            return n_out * attrs["kernel"] ** 2 * attrs["shape"][0]
        if any(len(shape) == 2 for _, shape in spec.tensors.values()):
            return n_in * n_out
        return max(n_in, n_out) * ELEMENT_WORK

    def __repr__(self):
        # what the net is, never an address: estimator reprs (and test ids
        # made from them) show it
        graph = self.graph
        arch = graph.get("architecture")
        return (
            f"PackedNet({graph['estimator']}"
            + (f", {arch}" if isinstance(arch, str) else "")
            + f", {graph['n_features_in']} features -> {self.n_outputs_} outputs"
            + f", {len(graph['layers'])} layers)"
        )

    def __getstate__(self):
        return {"graph": self.graph, "tensors": self.tensors}

    def __setstate__(self, state):
        self.__init__(state["graph"], state["tensors"])

    @property
    def layers(self):
        """The layer dicts of the graph, in forward order."""
        return self.graph["layers"]

    def width(self, value):
        """Number of units of the value called `value`."""
        return self._widths[value]

    def rows_per_sample(self, value):
        """Rows of the value called `value` per sample (time steps of spikes)."""
        return self._per_sample[value]

    def forward(self, X, n_threads=1, *, keep=(), fused=True):
        """Run the net on validated float32 rows.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features_in), dtype float32
            Input rows (C-contiguous).
        n_threads : int, default=1
            Threads the kernels run on (BLAS included: the BLAS library's
            own threads are held at one during the call, and the float
            products split over these; see
            :func:`~sksign.deploy._ops._common.blas_product`). An image
            net's batch of more than :data:`MAP_CHUNK` samples runs its
            chunks side by side on these threads instead.
        keep : collection of str, default=()
            Names of intermediate values to return as well.
        fused : bool, default=True
            Run the chains of layers that share a pass as one (see
            :mod:`sksign.deploy._fusion`; the same outputs, bit for bit);
            False runs every layer on its own, as does keeping a value that
            a chain does not write.

        Returns
        -------
        out : ndarray of shape (n_samples, n_outputs_), dtype float32
            The output value of the graph; with `keep`, a dict of the kept
            values and ``"output"``.
        """
        with blas_on_one_thread():
            return self._forward(X, n_threads, keep, fused)

    def _forward(self, X, n_threads, keep, fused):
        n = X.shape[0]
        if self._has_maps and n > MAP_CHUNK:
            # feature maps: bounded memory, a chunk of samples at a time
            parts = self._forward_chunks(X, n_threads, keep, fused)
            if not keep:
                return np.concatenate(parts)
            return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        env = {"input": X}
        # a kept value inside a chain: run the layers one by one
        if fused and not self._internal.intersection(keep):
            steps, deaths = self._fused_steps, self._fused_dead
        else:
            steps, deaths = self._steps, self._steps_dead
        if n * self._sample_bytes < POOL_MIN_BYTES:
            for step in steps:
                env[step[0]["output"]] = self._run_step(step, env, n, n_threads)
        else:
            # the ops' arrays come from the net's pool and go back to it once
            # read for the last time (the output and kept values stay with the
            # caller)
            with self._buffers.call() as call:
                for step, dead in zip(steps, deaths):
                    layer = step[0]
                    env[layer["output"]] = out = self._run_step(step, env, n, n_threads)
                    call.hold(layer["output"], out, layer["inputs"])
                    for name in dead:
                        if name not in keep:
                            call.drop(name)
        out = env[self.graph["output"]]
        if keep:
            kept = {k: env[k] for k in keep}
            kept["output"] = out
            return kept
        return out

    def _forward_chunks(self, X, n_threads, keep, fused):
        """The outputs of each chunk of :data:`MAP_CHUNK` samples (the chunks
        set by the batch alone): as many chunks at once as there are threads,
        each on ``n_threads // chunks`` threads of its own (at least one)."""
        chunks = split(len(X), -(-len(X) // MAP_CHUNK))
        together = min(n_threads, len(chunks))
        each = max(1, n_threads // together)
        tasks = [(X[a:b], each, keep, fused) for a, b in chunks]
        return run_in_threads(self._forward, tasks, together)

    @staticmethod
    def _run_step(step, env, n, n_threads):
        layer, run, macs, divisor = step
        xs = [env[s] for s in layer["inputs"]]
        if n_threads > 1 and xs[0].shape[0] * macs // divisor < PARALLEL_MIN_WORK:
            n_threads = 1  # handing a small layer to threads costs more than it saves
        return run(xs, n, n_threads)

    def _run(self, layer, env, n, n_threads):
        """The output of `layer` (one of :attr:`layers`) on the values `env`."""
        with blas_on_one_thread():
            return self._run_step(self._by_output[layer["output"]], env, n, n_threads)

    def unpack(self, value, words):
        """0/1 uint8 array of the packed value `value` (for inspection).

        Maps of channel bits come back channels first, flattened as torch's
        ``Flatten`` flattens ``(C, H, W)`` maps.
        """
        if value in self._shapes:  # pixel_bits
            c, h, w = self._shapes[value]
            flat = unpack_pixels(words, c, lambda k, r, *a: k(*a, 0, r))
            return np.ascontiguousarray(
                flat.reshape(-1, h, w, c).transpose(0, 3, 1, 2).reshape(len(flat), -1)
            )
        return unpack_rows(words, self._widths[value])

    @property
    def _xnor_words(self):
        """The XNOR layers' weight words as ``xnor_kernel()`` reads them
        (``xnor_weights``), by tensor name."""
        return {
            key: arr
            for (kind, key), arr in self._context.derived.items()
            if kind == "xnor_words"
        }


def _dead_after(steps, output):
    """For each step, the values no later step reads (the net's output and
    input aside): what a call hands back to its pool after that step."""
    last = {}
    for i, step in enumerate(steps):
        for name in step[0]["inputs"]:
            last[name] = i
        last.setdefault(step[0]["output"], i)
    dead = [[] for _ in steps]
    for name, i in last.items():
        if name not in (output, "input"):
            dead[i].append(name)
    return dead
