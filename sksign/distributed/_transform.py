"""Sign codes of a Dask array: the fitted transformer mapped over row blocks."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np

from sksign.distributed._arrays import check_dask_rows, map_method

__all__ = ["transform_blocks"]

_OUTPUT_DTYPES = {"bits": np.uint8, "signs": np.int8, "packed": np.uint8}


def transform_blocks(transformer, X):
    """Lazy codes of a Dask array: ``transformer`` run on each row block.

    The fitted transformer (with its net) is one key of the graph, so each
    worker receives it once, however many blocks it transforms; the copy
    shipped leaves out the `estimator` parameter, which the transform does
    not read (with ``prefit=True`` it is a second copy of the net). Blocks
    on the same worker are transformed one after the other, since a forward
    pass records the signs through hooks on the shared net.
    """
    X = check_dask_rows(
        X,
        n_features=transformer.n_features_in_,
        packed=None,
        owner=type(transformer).__name__,
    )
    light = object.__new__(type(transformer))
    light.__dict__.update(transformer.__dict__)
    light.estimator = None
    n_out = transformer._n_features_out
    dtype = _OUTPUT_DTYPES[transformer.output]
    # A forward pass records signs through hooks on the net: one at a time.
    return map_method(light, "_transform_array", X, [(dtype, (n_out,))], serial=True)
