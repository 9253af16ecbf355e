"""Exact sign-code k-NN over reference codes sharded on a Dask cluster.

A sign-kNN estimator fitted on a Dask array keeps its packed codes where the
array's row chunks are: one shard per chunk, persisted on the workers, with
the row offset of each shard. A query runs the popcount kernel of
:mod:`sksign.kernels` on every shard (asking for ``min(k, shard_rows)``
neighbours), turns local rows into global ones (offset + local row) and
merges the per-shard lists in a tree, ordered by ``(distance, global row)``:
the order of the single-machine search, ties to the lower row. The vote or
mean is then made by the estimator's own code on the merged neighbours.

The estimator is passed in and read through the private methods it shares
with its NumPy path (encoding, checks, the vote); nothing here imports it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils import gen_batches

from sksign.distributed._arrays import (
    assemble,
    check_dask_rows,
    is_dask_array,
    map_method,
    require_dask,
    ship_once,
)
from sksign.kernels import auto_batch_size, words_hamming_distances, words_kneighbors

__all__ = [
    "ShardedCodes",
    "check_fit_rows",
    "fit_shards",
    "sharded_kneighbors",
    "sharded_predict",
    "sharded_radius_neighbors",
]

#: Number of partial neighbour lists merged by one task of the tree.
SPLIT_EVERY = 8

# Distances per radius batch inside a shard task (~48 MiB, as on one machine).
_RADIUS_BATCH = 1 << 22


class ShardedCodes:
    """Packed reference codes on the workers: one persisted shard per row chunk.

    Parameters
    ----------
    words : dask.array.Array of shape (n_samples, n_words), dtype uint64
        The codes as words, persisted.
    y : dask.array.Array of shape (n_samples, ...)
        The targets, persisted, chunked as the non-empty chunks of `words`.
    """

    def __init__(self, words, y):
        self.words = words
        self.y = y
        self.offsets = np.concatenate([[0], np.cumsum(words.chunks[0])]).astype(
            np.int64
        )

    @property
    def shape(self):
        return self.words.shape

    @property
    def n_shards(self):
        return len(self.words.chunks[0])

    def parts(self):
        """``(words, y, offset, n_rows)`` of every non-empty shard, in order."""
        words = self.words.to_delayed(optimize_graph=False).ravel()
        ys = iter(self.y.to_delayed(optimize_graph=False).ravel())
        return [
            (w, next(ys), int(self.offsets[s]), int(n))
            for s, (w, n) in enumerate(zip(words, self.words.chunks[0]))
            if n > 0
        ]

    def __repr__(self):
        return (
            f"ShardedCodes(n_samples={self.shape[0]}, n_words={self.shape[1]}, "
            f"n_shards={self.n_shards})"
        )


# ----------------------------------------------------------------------- fit
def _encode_block(block, encoder, n_bits):
    """uint64 words of a block of codes, by the estimator's own encoding."""
    if block.shape[0] == 0:
        return np.empty((0, (n_bits + 63) // 64), dtype=np.uint64)
    return encoder._encode_all(block, n_bits)


def _encoded(X, est, n_bits):
    """Lazy words of a checked Dask array of codes, one block per row chunk."""
    n_words = (n_bits + 63) // 64
    # Only the parameters the encoding reads: a small object whatever `est`
    # holds, and the same graph keys for every call with these codes.
    encoder = type(est)(packed=est.packed, batch_size=est.batch_size)
    return X.map_blocks(
        _encode_block,
        encoder,
        n_bits,
        dtype=np.uint64,
        chunks=(X.chunks[0], (n_words,)),
        meta=np.empty((0, n_words), dtype=np.uint64),
    )


def _wait_for(*arrays):
    """Block until persisted arrays are in memory; raise the first task error."""
    try:
        from distributed import futures_of, wait
    except ImportError:  # the local schedulers persist synchronously
        return
    futures = [f for a in arrays for f in futures_of(a)]
    if not futures:
        return
    wait(futures)
    for future in futures:
        if future.status == "error":
            future.result()


def check_fit_rows(est, X):
    """`X` checked for a sharded fit, before anything is scheduled."""
    if est.algorithm == "faiss" or est.approximate:
        raise ValueError(
            "A fit on a Dask array keeps the codes sharded on the workers and "
            "searches them with the popcount kernel; algorithm='faiss' and "
            "approximate=True need all codes in one process (fit on "
            "X.compute() for those)."
        )
    return check_dask_rows(X, packed=est.packed, owner=type(est).__name__)


def fit_shards(est, X, y, n_bits):
    """Encode a Dask array of codes on its workers and persist the shards.

    `X` must have passed :func:`check_fit_rows`; `y` is a NumPy array of the
    targets as the estimator stores them (one row per code). Waits until the
    shards are in memory, so that an error in the data (NaN, say) is raised
    here.
    """
    dask = require_dask()
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            "Found input variables with inconsistent numbers of samples: "
            f"[{X.shape[0]}, {y.shape[0]}]"
        )
    words = _encoded(X, est, n_bits).persist()
    _wait_for(words)
    with warnings.catch_warnings():
        # The targets travel in the graph on purpose (see _targets_beside).
        warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
        ys = _targets_beside(dask, y, words).persist()
    _wait_for(ys)
    return ShardedCodes(words, ys)


def _beside(targets, words):
    """`targets`, computed where `words` is (the task goes to its data)."""
    return targets


def _targets_beside(dask, y, words):
    """`y` in the chunks of the persisted `words` (empty ones left out), each
    chunk on the worker of its shard.

    The targets travel in the graph (so that Dask can recompute a chunk lost
    with its worker); each chunk depends on its shard, which puts it on the
    worker that holds the shard.
    """
    da = dask.array
    trailing = y.shape[1:]
    y_blocks = da.from_array(y, chunks=(words.chunks[0], *trailing))
    y_blocks = y_blocks.to_delayed(optimize_graph=False).ravel()
    w_blocks = words.to_delayed(optimize_graph=False).ravel()
    beside = dask.delayed(_beside, pure=True)
    meta = np.empty((0, *trailing), dtype=y.dtype)
    return da.concatenate(
        [
            da.from_delayed(
                beside(t, w), shape=(n, *trailing), dtype=y.dtype, meta=meta
            )
            for t, w, n in zip(y_blocks, w_blocks, words.chunks[0])
            if n > 0
        ],
        axis=0,
    )


# ---------------------------------------------------------------- the search
def _shard_topk(queries, words, y, k, offset, n_jobs):
    """Top ``min(k, shard rows)`` of one shard: counts, global rows, targets."""
    k = min(k, words.shape[0])
    if queries.shape[0] == 0:
        counts = rows = np.empty((0, k), dtype=np.int64)
    else:
        counts, rows = words_kneighbors(queries, words, k, n_jobs=n_jobs)
    return counts, rows + offset, None if y is None else y[rows]


def _merge_topk(k, *parts):
    """The first `k` of partial lists by ``(count, global row)``."""
    counts = np.concatenate([p[0] for p in parts], axis=1)
    rows = np.concatenate([p[1] for p in parts], axis=1)
    order = np.lexsort((rows, counts), axis=1)[:, :k]
    merged_y = None
    if parts[0][2] is not None:
        y = np.concatenate([p[2] for p in parts], axis=1)
        merged_y = np.take_along_axis(
            y, order.reshape(order.shape + (1,) * (y.ndim - 2)), axis=1
        )
    return (
        np.take_along_axis(counts, order, axis=1),
        np.take_along_axis(rows, order, axis=1),
        merged_y,
    )


def _tree(parts, merge, *args):
    """Merge Delayed partial results in a tree, adjacent ones together.

    ``merge(*args, *group)`` merges a group; the parts are passed one by one,
    not in a list, so that each keeps the futures of its persisted shard
    (Dask drops them from a list of Delayed objects).
    """
    while len(parts) > 1:
        parts = [
            merge(*args, *parts[j : j + SPLIT_EVERY])
            if len(parts[j : j + SPLIT_EVERY]) > 1
            else parts[j]
            for j in range(0, len(parts), SPLIT_EVERY)
        ]
    return parts[0]


class _Queries:
    """Row blocks of query words: Delayed blocks, their sizes and first rows.

    `first` holds the global training row of each block's first query when
    the queries are the training codes themselves (else None), and `lazy`
    whether the result should stay a Dask array.
    """

    def __init__(self, blocks, sizes, first, lazy):
        self.blocks, self.sizes, self.first, self.lazy = blocks, sizes, first, lazy


def _queries(est, X, n_neighbors=None):
    """The queries of a sharded search, checked before anything is scheduled."""
    if X is None:
        shards = est._fit_shards
        parts = shards.parts()
        return _Queries(
            [w for w, _, _, _ in parts],
            [n for _, _, _, n in parts],
            [off for _, _, off, _ in parts],
            lazy=True,
        )
    if is_dask_array(X):  # checked by the caller (_check_dask_queries)
        if n_neighbors is not None:
            est._check_n_neighbors(n_neighbors, X.shape[0], False)
        words = _encoded(X, est, est.n_bits_)
        blocks = words.to_delayed().ravel()
        return _Queries(list(blocks), list(X.chunks[0]), None, lazy=True)
    X = est._validate_X(X, reset=False)
    if n_neighbors is not None:
        est._check_n_neighbors(n_neighbors, X.shape[0], False)
    words = est._encode_all(X, est.n_bits_)
    step = auto_batch_size(est.batch_size, 8 * words.shape[1])
    slices = list(gen_batches(words.shape[0], step))
    return _Queries(
        [ship_once(words[s]) for s in slices],
        [s.stop - s.start for s in slices],
        None,
        lazy=False,
    )


def _light(est):
    """A copy of `est` without its codes or targets, to ship to the workers."""
    light = object.__new__(type(est))
    light.__dict__.update(est.__dict__)
    light._fit_words = None
    light._fit_shards = None
    light._faiss_index = None
    light._y = est._y[:0]
    return light


def _neighbours(est, queries, k, with_y):
    """Delayed merged ``(counts, rows, y)`` per query block."""
    dask = require_dask()
    topk = dask.delayed(_shard_topk, pure=True)
    merge = dask.delayed(_merge_topk, pure=True)
    shards = est._fit_shards.parts()
    out = []
    for q in queries.blocks:
        parts = [
            topk(q, w, y if with_y else None, k, off, est.n_jobs)
            for w, y, off, _ in shards
        ]
        out.append(_tree(parts, merge, k))
    return out


def _results(queries, finished, outputs):
    """Lazy Dask arrays, or NumPy arrays computed now, from per-block results."""
    dask = require_dask()
    if queries.lazy:
        if len(outputs) == 1:
            dtype, trailing = outputs[0]
            return assemble(finished, queries.sizes, dtype, trailing)
        return tuple(
            assemble([f[j] for f in finished], queries.sizes, dtype, trailing)
            for j, (dtype, trailing) in enumerate(outputs)
        )
    computed = dask.compute(*finished)
    if len(outputs) == 1:
        return np.concatenate(computed, axis=0)
    return tuple(
        np.concatenate([c[j] for c in computed], axis=0) for j in range(len(outputs))
    )


def _finish_kneighbors(light, merged, first, n_neighbors, return_distance):
    counts, rows, _ = merged
    if first is not None:
        counts, rows = light._drop_self(counts, rows, first, n_neighbors)
    if return_distance:
        return counts / light.n_bits_, rows
    return rows


def _check_dask_queries(est, X):
    """A Dask array of queries checked against the fitted codes (nothing runs)."""
    return check_dask_rows(
        X,
        n_features=est.n_features_in_,
        packed=est.packed,
        owner=type(est).__name__,
    )


def sharded_kneighbors(est, X, n_neighbors, return_distance):
    """`kneighbors` where the codes or the queries are Dask arrays.

    A Dask array of queries (or ``X=None`` on sharded codes) gives lazy Dask
    arrays; NumPy queries on sharded codes give NumPy arrays.
    """
    dask = require_dask()
    if getattr(est, "_fit_shards", None) is None:
        # codes in one process: the estimator maps over the query blocks
        X = _check_dask_queries(est, X)
        k = est._check_n_neighbors(n_neighbors, X.shape[0], False)
        outputs = [(np.int64, (k,))]
        if return_distance:
            outputs.insert(0, (np.float64, (k,)))
        return map_method(
            est,
            "kneighbors",
            X,
            outputs,
            {"n_neighbors": k, "return_distance": return_distance},
        )
    query_is_train = X is None
    n_queries = est.n_samples_fit_ if query_is_train else X.shape[0]
    if not query_is_train and is_dask_array(X):
        X = _check_dask_queries(est, X)
    k = est._check_n_neighbors(n_neighbors, n_queries, query_is_train)
    queries = _queries(est, X)
    merged = _neighbours(est, queries, k + query_is_train, with_y=False)
    finish = dask.delayed(
        _finish_kneighbors, pure=True, nout=2 if return_distance else None
    )
    light = ship_once(_light(est))
    firsts = queries.first or [None] * len(merged)
    finished = [
        finish(light, m, first, k, return_distance) for m, first in zip(merged, firsts)
    ]
    outputs = [(np.int64, (k,))]
    if return_distance:
        outputs.insert(0, (np.float64, (k,)))
    return _results(queries, finished, outputs)


def _finish_predict(light, merged, method, ravel):
    counts, _, y = merged
    out = getattr(light, method)(counts, y)
    return out.ravel() if ravel else out


def sharded_predict(est, X, method, dtype, trailing, *, public, ravel=False):
    """A prediction where the codes or the queries are Dask arrays.

    On sharded codes, ``getattr(est, method)(counts, y_neighbours)`` (the
    estimator's own vote or mean) runs on the merged neighbours of every
    block of queries; on codes in one process, the public method `public`
    runs on every block of the Dask queries.
    """
    dask = require_dask()
    if getattr(est, "_fit_shards", None) is None:
        X = _check_dask_queries(est, X)
        est._check_n_neighbors(None, X.shape[0], False)
        return map_method(est, public, X, [(dtype, trailing)])
    if is_dask_array(X):
        X = _check_dask_queries(est, X)
    queries = _queries(est, X, n_neighbors=est.n_neighbors)
    merged = _neighbours(est, queries, est.n_neighbors, with_y=True)
    finish = dask.delayed(_finish_predict, pure=True)
    light = ship_once(_light(est))
    finished = [finish(light, m, method, ravel) for m in merged]
    return _results(queries, finished, [(dtype, trailing)])


# ---------------------------------------------------------------- radius
def _shard_radius(queries, words, radius, n_bits, offset, n_jobs):
    """Rows of one shard within `radius` of each query, in row order."""
    n_q, n_s = queries.shape[0], words.shape[0]
    all_dist = np.empty(n_q, dtype=object)
    all_rows = np.empty(n_q, dtype=object)
    step = max(1, _RADIUS_BATCH // n_s)
    for batch in gen_batches(n_q, step) if n_q else ():
        counts = np.empty((batch.stop - batch.start, n_s), dtype=np.int32)
        words_hamming_distances(queries[batch], words, out=counts, n_jobs=n_jobs)
        dist = counts / n_bits
        for r, q in enumerate(range(batch.start, batch.stop)):
            (rows,) = np.nonzero(dist[r] <= radius)
            all_dist[q], all_rows[q] = dist[r, rows], rows + offset
    return all_dist, all_rows


def _merge_radius(*parts):
    """Per query, the rows of adjacent shards one after the other."""
    n_q = parts[0][0].shape[0]
    all_dist = np.empty(n_q, dtype=object)
    all_rows = np.empty(n_q, dtype=object)
    for q in range(n_q):
        all_dist[q] = np.concatenate([p[0][q] for p in parts])
        all_rows[q] = np.concatenate([p[1][q] for p in parts])
    return all_dist, all_rows


def _finish_radius(merged, first, sort_results, return_distance):
    all_dist, all_rows = merged
    for q in range(all_dist.shape[0]):
        d, rows = all_dist[q], all_rows[q]
        if first is not None:
            keep = rows != first + q
            d, rows = d[keep], rows[keep]
        if sort_results:
            order = np.argsort(d, kind="stable")
            d, rows = d[order], rows[order]
        all_dist[q], all_rows[q] = d, rows
    if return_distance:
        return all_dist, all_rows
    return all_rows


def sharded_radius_neighbors(est, X, radius, return_distance, sort_results):
    """`radius_neighbors` where the codes or the queries are Dask arrays.

    `radius` must already be checked. Each query gets the rows of every shard
    within `radius`, shard after shard (so in training order), sorted by
    ``(distance, row)`` when `sort_results` is True.
    """
    dask = require_dask()
    outputs = [(object, ())] * (2 if return_distance else 1)
    if getattr(est, "_fit_shards", None) is None:
        X = _check_dask_queries(est, X)
        return map_method(
            est,
            "radius_neighbors",
            X,
            outputs,
            {
                "radius": radius,
                "return_distance": return_distance,
                "sort_results": sort_results,
            },
        )
    if X is not None and is_dask_array(X):
        X = _check_dask_queries(est, X)
    queries = _queries(est, X)
    search = dask.delayed(_shard_radius, pure=True)
    merge = dask.delayed(_merge_radius, pure=True)
    finish = dask.delayed(
        _finish_radius, pure=True, nout=2 if return_distance else None
    )
    shards = est._fit_shards.parts()
    firsts = queries.first or [None] * len(queries.blocks)
    finished = []
    for q, first in zip(queries.blocks, firsts):
        parts = [
            search(q, w, radius, est.n_bits_, off, est.n_jobs)
            for w, _, off, _ in shards
        ]
        finished.append(
            finish(_tree(parts, merge), first, sort_results, return_distance)
        )
    return _results(queries, finished, outputs)
