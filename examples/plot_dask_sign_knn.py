"""
=============================================
Sign codes and an exact sign-kNN on a cluster
=============================================

A Dask array of samples, chunked by rows, goes through a
:class:`~sklearn.pipeline.Pipeline` of
:class:`~sksign.transformers.SignCodeTransformer` and
:class:`~sksign.estimators.SignKNNClassifier` unchanged. The fitted net is
sent once to each worker and maps every block of samples to its codes; the
k-NN, fitted on a Dask array, keeps its packed reference codes on the workers,
one shard per chunk, runs the popcount kernel on every shard and merges the
per-shard neighbours in a tree. The answers are exactly those of the same
pipeline on NumPy arrays, ties included.

The cluster here is a :class:`~distributed.LocalCluster` of two workers with
threads in this process (``processes=False``): worker *processes* re-import
the script that starts them, so a script would need all of its code under one
``if __name__ == "__main__":`` guard, which does not fit a gallery's cells.
The scheduler, the graph and the sharded search are the same; on a real
cluster only the client line changes
(``Client("tcp://scheduler-address:8786")``).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sksign.datasets import load_digits
from sksign.estimators import HTAFNetClassifier, SignKNNClassifier
from sksign.transformers import SignCodeTransformer

RANDOM_STATE = 0

cluster = LocalCluster(
    n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
)
client = Client(cluster)

X, y = load_digits()
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.3, stratify=y, random_state=RANDOM_STATE
)
net = HTAFNetClassifier(
    (128,), activation="relu", max_epochs=60, random_state=RANDOM_STATE
).fit(X_train, y_train)

# %%
# The pipeline on Dask arrays
# ---------------------------
# The samples are split into row chunks (the last one shorter); every
# training chunk becomes one shard of packed codes on a worker.
X_train_dask = da.from_array(X_train, chunks=(300, X.shape[1]))
X_test_dask = da.from_array(X_test, chunks=(100, X.shape[1]))

pipe = make_pipeline(
    SignCodeTransformer(net, prefit=True, output="packed"),
    SignKNNClassifier(n_neighbors=5, packed=True),
)
pipe.fit(X_train_dask, y_train)
knn = pipe[-1]
print(
    f"{knn.n_samples_fit_} codes of {knn.n_bits_} bits, in "
    f"{X_train_dask.numblocks[0]} shards of {X_train_dask.chunks[0]} rows"
)

lazy = pipe.predict(X_test_dask)
print(lazy)  # nothing has run yet
labels = lazy.compute()
print(f"sign-kNN accuracy on the cluster: {np.mean(labels == y_test):.4f}")

# %%
# The same answers as on one machine
# ----------------------------------
# The same pipeline fitted on the NumPy arrays predicts the same labels and
# finds the same neighbours, in the same order.
local = make_pipeline(
    SignCodeTransformer(net, prefit=True, output="packed"),
    SignKNNClassifier(n_neighbors=5, packed=True),
).fit(X_train, y_train)
codes_test = local[0].transform(X_test)
assert np.array_equal(labels, local.predict(X_test))
dist, ind = dask.compute(*knn.kneighbors(pipe[0].transform(X_test_dask)))
dist_local, ind_local = local[-1].kneighbors(codes_test)
assert np.array_equal(dist, dist_local)
assert np.array_equal(ind, ind_local)
print("labels, distances and neighbour indices equal the NumPy pipeline's")

# %%
# Accuracy against k, computed in one pass
# ----------------------------------------
# Lazy predictions for several k are computed together: one graph, one pass
# of every shard task per k.
ks = [1, 3, 5, 9, 15, 25]
codes_dask = pipe[0].transform(X_test_dask)
lazy_by_k = [knn.set_params(n_neighbors=k).predict(codes_dask) for k in ks]
accuracy = [np.mean(p == y_test) for p in dask.compute(*lazy_by_k)]

fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(ks, accuracy, "o-")
ax.set_xlabel("k (neighbours)")
ax.set_ylabel("test accuracy")
ax.set_title("Sharded sign-kNN on the 128 sign bits of a ReLU net")
fig.tight_layout()
plt.show()

client.close()
cluster.close()
