"""The optional faiss backend of the sign-kNN: binary indexes on uint64 words.

faiss is imported on first use only, with an ImportError that names the extra
to install when it is missing.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib

import numpy as np

__all__ = [
    "build_faiss_index",
    "deserialize_faiss_index",
    "faiss_search",
    "import_faiss",
    "serialize_faiss_index",
]


def import_faiss():
    """The faiss module, or an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module("faiss")
    except ImportError as exc:
        raise ImportError(
            "algorithm='faiss' needs the faiss package, which is not installed. "
            "Install it with `pip install sksign[faiss]` (or `pip install "
            "faiss-cpu`), or use algorithm='popcount'."
        ) from exc


def build_faiss_index(words, approximate):
    """A faiss binary index holding the codes `words` (uint64 rows).

    ``IndexBinaryFlat`` (exact, same neighbours and tie order as the popcount
    kernel), or ``IndexBinaryHNSW`` when `approximate` is True.
    """
    faiss = import_faiss()
    codes = words.view(np.uint8)
    dim = 8 * codes.shape[1]
    if approximate:
        index = faiss.IndexBinaryHNSW(dim, 32)
        index.hnsw.efConstruction = 80
        index.hnsw.efSearch = 128
    else:
        index = faiss.IndexBinaryFlat(dim)
    index.add(np.ascontiguousarray(codes))
    return index


def faiss_search(index, words, n_neighbors, n_threads):
    """``(counts, indices)`` of the nearest codes of `index`, both int64.

    Runs on `n_threads` OpenMP threads and restores faiss' thread count (and an
    HNSW index's ``efSearch``) afterwards. An HNSW index pads a query's list with
    index -1 when its graph walk finds fewer than `n_neighbors` codes; the
    caller answers such queries another way.
    """
    faiss = import_faiss()
    old = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n_threads)
    hnsw = getattr(index, "hnsw", None)
    if hnsw is not None:  # the candidate list must hold at least k codes
        old_ef = hnsw.efSearch
        hnsw.efSearch = max(old_ef, n_neighbors)
    try:
        dist, ind = index.search(words.view(np.uint8), n_neighbors)
    finally:
        faiss.omp_set_num_threads(old)
        if hnsw is not None:
            hnsw.efSearch = old_ef
    return dist.astype(np.int64), ind.astype(np.int64)


def serialize_faiss_index(index):
    """The bytes (a uint8 array) of a faiss binary index, for pickling."""
    return import_faiss().serialize_index_binary(index)


def deserialize_faiss_index(data):
    """The faiss binary index that :func:`serialize_faiss_index` wrote."""
    return import_faiss().deserialize_index_binary(data)
