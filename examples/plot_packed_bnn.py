"""
=============================================
A binary net that runs as bits, without torch
=============================================

A binary neural net (BNN) trained with HTAF has binary activations and, in
its hidden layers, binary weights: one bit each. :func:`sksign.deploy.pack`
turns the fitted net into a scikit-learn estimator that computes those layers
with XNOR and popcount on 64-bit words, folds the BatchNorm into one scale
and shift per unit, and keeps the first layer (real pixels) and the readout
in float, as the torch net does. It runs on numpy and numba alone, so a
deployment needs no torch install. Here we train a BNN on MNIST-5k, pack it,
and compare accuracy, size and speed with the float model; then we save it
to one file and predict with it in a fresh process that never imports
torch.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split

from sksign.datasets import load_mnist5k
from sksign.deploy import pack, packed_summary, save
from sksign.estimators import HTAFNetClassifier

RANDOM_STATE = 0

X, y = load_mnist5k()
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.2, stratify=y, random_state=RANDOM_STATE
)

# %%
# Train a binary net with HTAF
# ----------------------------
# ``architecture="bnn"``: a real first layer, then binary blocks (step
# activations, binary weights, BatchNorm, real shortcuts), then a real
# readout. HTAF is smooth in training and the exact step ``1[x >= 0]`` at
# inference.
net = HTAFNetClassifier(
    (256, 256),
    architecture="bnn",
    max_epochs=3,
    batch_size=128,
    lr=3e-3,
    random_state=RANDOM_STATE,
).fit(X_train, y_train)

# %%
# Pack it
# -------
# The packed model predicts what the torch net predicts, sample for sample.
packed = pack(net)
same = np.mean(packed.predict(X_test) == net.predict(X_test))
print(f"accuracy, torch float32: {net.score(X_test, y_test):.4f}")
print(f"accuracy, packed bits:   {packed.score(X_test, y_test):.4f}")
print(f"same prediction on {same:.0%} of the test samples")

# %%
# What is deployed
# ----------------
# Each binary layer keeps one bit per weight plus a float scale and shift per
# unit; activations between layers are bits. Given samples and the torch net,
# the summary also times the packed ``predict`` against the torch module's own
# forward (eval mode, exact steps, ``torch.inference_mode``, same threads): the
# baseline a deployment in torch would run, not skorch's ``predict``.
rows, table = packed_summary(packed, X_test, reference=net, n_repeats=3)
print(table)

# One sample at a time, as a service answering single requests would run.
one, _ = packed_summary(packed, X_test[:1], reference=net, n_repeats=50)
lat_torch, lat_packed = one[-1]["seconds_reference"], one[-1]["seconds_packed"]
lat_torch, lat_packed = lat_torch * 1e3, lat_packed * 1e3  # ms
print(f"one sample: torch forward {lat_torch:.3f} ms, packed {lat_packed:.3f} ms")
total = rows[-1]

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(8, 3))
ax0.bar(
    ["float32", "packed"],
    [total["weight_bytes_float32"] / 1e6, total["weight_bytes_packed"] / 1e6],
    color=["tab:gray", "tab:blue"],
)
ax0.set_ylabel("weights (MB)")
ax0.set_title("model size")
ax1.bar(
    ["torch forward", "packed predict"],
    [lat_torch, lat_packed],
    color=["tab:gray", "tab:blue"],
)
ax1.set_ylabel("ms per sample (batch 1)")
ax1.set_title("latency, one sample")
fig.tight_layout()
plt.show()

# %%
# Save, and load where torch is not installed
# -------------------------------------------
# One file: the arrays in the safetensors layout, the layer graph as JSON.
# Loading parses and checks it, and executes nothing. The child process below
# loads it and predicts; it checks that torch was never imported.
folder = Path(tempfile.mkdtemp())
path = save(packed, folder / "mnist_bnn.sksign")
np.save(folder / "X.npy", X_test[:10])
print(f"file size: {path.stat().st_size / 1e3:.0f} kB")
code = f"""
import sys
import numpy as np
from sksign.deploy import load

model = load({str(path)!r})
print(model.predict(np.load({str(folder / "X.npy")!r})))
print("torch imported:", "torch" in sys.modules)
"""
result = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, check=True
)
print(result.stdout)
print("expected:", y_test[:10])
