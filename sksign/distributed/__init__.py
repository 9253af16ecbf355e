"""Sign codes and sign-code k-NN on Dask arrays (optional: ``sksign[dask]``).

The estimators dispatch here when they are given a Dask array, so that users
call the usual methods: :class:`~sksign.estimators.SignKNNClassifier` and
:class:`~sksign.estimators.SignKNNRegressor` fitted on a Dask array keep the
packed codes sharded on the workers and answer queries exactly as on one
machine; :meth:`SignCodeTransformer.transform
<sksign.transformers.SignCodeTransformer.transform>` maps the fitted net over
the row blocks. Importing this package does not import dask; the first Dask
array does, and a missing install is reported with the extra to add.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.distributed._arrays import is_dask_array, require_dask
from sksign.distributed._knn import (
    check_fit_rows,
    fit_shards,
    sharded_kneighbors,
    sharded_predict,
    sharded_radius_neighbors,
)
from sksign.distributed._transform import transform_blocks

# The public names are declared in sksign/_public.py. The others imported
# here (require_dask and the entry points of the estimators' Dask paths) are
# internal: importable for sksign's own modules, not public.
__all__ = public_names(__name__)
