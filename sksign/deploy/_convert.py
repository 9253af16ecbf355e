"""pack(): read a fitted sksign net (torch) into a packed layer graph.

With the converter modules it loads (``_convert_base``, ``_convert_mlp``,
``_convert_images``), the only part of :mod:`sksign.deploy` that imports
torch (and only when :func:`pack` is called, or when
:func:`~sksign.deploy.packed_summary` times a torch reference): the runtime,
:func:`~sksign.deploy.load` and the packed estimators run on numpy and numba
alone. Each converter module registers the net types it reads in its
``CONVERTERS``; :func:`pack` looks the net's type up once.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
from sklearn.base import BaseEstimator, is_classifier, is_regressor
from sklearn.utils.validation import check_is_fitted
from torch import nn

from sksign.deploy import _convert_images, _convert_mlp
from sksign.deploy._convert_base import Builder
from sksign.deploy._estimators import PackedClassifier, PackedRegressor
from sksign.deploy._format import FORMAT, VERSION
from sksign.deploy._runtime import PackedNet
from sksign.nn.activations import force_step_mode
from sksign.nn.hooks import temporary_mode

__all__ = ["CONVERTERS", "pack"]

#: Module type -> (architecture name, ``convert(builder, module)``), over
#: every converter module: :func:`pack` takes the entry of the most specific
#: type of the net (a new net type is one more entry).
CONVERTERS = {**_convert_mlp.CONVERTERS, **_convert_images.CONVERTERS}

_SUPPORTED = (
    "MLP, SmallCNN, BinaryMLP, SpikingMLP, ICBMNet (with an MLP, CNN or no "
    "backbone), BiRealResNet18, WideResNet and ResNet18 (with step activations) "
    "and SEWResNet (IF/LIF neurons, add/iand/and connections)"
)


def _json_labels(classes):
    classes = np.asarray(classes)
    if classes.dtype.kind in "biuf":
        return classes.tolist(), classes.dtype.str
    if classes.dtype.kind == "U":
        return classes.tolist(), None
    if classes.dtype.kind == "O" and all(isinstance(c, str) for c in classes):
        return [str(c) for c in classes], None
    raise TypeError(
        "The packed model stores class labels as JSON: numbers, bools or "
        f"strings; got labels of dtype {classes.dtype}."
    )


@contextmanager
def _torch_forward(reference, X, n_threads):
    """A no-grad eval forward of `reference`'s torch module on `X`, to time.

    What the packed net computes, in torch: the module in eval mode with every
    step activation forced to the exact step (the packed net computes
    ``1[z >= 0]`` whatever the estimator's ``inference``), under
    :func:`torch.inference_mode`, on `n_threads` torch threads, on a tensor
    of the module's dtype made once (no validation, no data loader, no
    conversion inside the timed call). The module's mode, the activations'
    modes and torch's thread count are restored on exit.

    Parameters
    ----------
    reference : torch.nn.Module or fitted sksign net
        The module, or an estimator whose ``module_`` it is.
    X : ndarray of shape (n_samples, n_features)
        The validated float32 rows the packed net runs on (images flattened:
        the sksign modules take rows).
    n_threads : int
        Threads of the packed run.

    Yields
    ------
    forward : callable
        ``forward()`` runs the module on `X`.
    what : str
        What it runs, for instance ``"the torch module's forward (float32,
        1 thread)"``.
    """
    module = reference if isinstance(reference, nn.Module) else reference.module_
    if not isinstance(module, nn.Module):
        raise TypeError(
            "packed_summary's reference must be a torch module or a fitted "
            f"sksign net with a torch module_; got {type(module).__name__}."
        )
    param = next(module.parameters(), None)
    dtype = torch.float32 if param is None else param.dtype
    device = "cpu" if param is None else param.device
    x = torch.as_tensor(np.asarray(X), dtype=dtype, device=device)
    threads = torch.get_num_threads()
    what = (
        f"the torch module's forward ({str(dtype).removeprefix('torch.')}, "
        f"{n_threads} thread{'s' if n_threads != 1 else ''})"
    )
    cuda = x.device.type == "cuda"

    def forward():
        with torch.inference_mode():
            out = module(x)
        if cuda:  # pragma: no cover - CPU nets in the tests
            torch.cuda.synchronize(x.device)
        return out

    try:
        torch.set_num_threads(n_threads)
        # each submodule's mode comes back (a net may keep BatchNorm in eval)
        with temporary_mode(module, training=False), force_step_mode(module, "hard"):
            yield forward, what
    finally:
        torch.set_num_threads(threads)


def _converter_for(module):
    """``(architecture, convert)`` of the most specific registered type of `module`."""
    for cls in type(module).__mro__:
        if cls in CONVERTERS:
            return CONVERTERS[cls]
    raise ValueError(
        f"Cannot pack a net of type {type(module).__name__}. Packable nets: "
        + _SUPPORTED
        + "."
    )


def pack(estimator, *, n_jobs=None):
    """Turn a fitted step net into an estimator that runs on packed bits.

    Hidden units that are exact steps become bits packed 64 to a word; binary
    weights (``architecture="bnn"``) become one bit each, multiplied by
    XNOR-popcount; real weights on bits are summed over the active bits
    (convolutions over packed patches of bits); the bias of a layer followed
    by a step becomes a per-unit threshold, and a BatchNorm is folded into
    the scale and shift of the layer before it. The
    first layer (real input) and the readout stay float, as in torch (the
    readout sums in float64, as :class:`~sksign.nn.Readout` does). Image
    nets run on channels-last maps whose channel bits are packed per pixel;
    their real parts (stem, shortcuts, residual stream, pooling) stay float.

    Parameters
    ----------
    estimator : HTAFNetClassifier, HTAFNetRegressor or ICBMClassifier
        A fitted net with step-like hidden activations ("htaf", "ste",
        "scaled_sigmoid"): ``architecture`` "mlp" (DHN), "cnn", "bnn" or
        "snn", the image nets "bireal" (Bi-Real ResNet-18: XNOR-popcount
        convolutions, real shortcuts), "wrn" and "resnet18" (step
        activations: real-weight convolutions on bit maps), "sew_resnet"
        (spikes as bits over T steps folded into rows), or an ICBM
        with an "mlp" (step or ReLU activations), "cnn" (step activations)
        or "identity" backbone. Its module must be float32.
    n_jobs : int, default=None
        Threads of the packed estimator's kernels.

    Returns
    -------
    packed : PackedClassifier or PackedRegressor
        A fitted scikit-learn estimator that needs neither torch nor skorch.

    Raises
    ------
    ValueError
        For a layer that is not a step activation (a ReLU net: the message
        names the layer) or an architecture that cannot be packed.
    sklearn.exceptions.NotFittedError
        For an estimator that is not fitted.

    See Also
    --------
    sksign.deploy.save : Write the packed model to one file.
    sksign.deploy.load : Read it back without torch.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.deploy import pack
    >>> X, y = load_digits(return_X_y=True)
    >>> net = HTAFNetClassifier((32, 32), architecture="bnn", max_epochs=2,
    ...                         random_state=0).fit(X / 16, y)
    >>> packed = pack(net)
    >>> bool((packed.predict(X / 16) == net.predict(X / 16)).all())
    True
    """
    if not isinstance(estimator, BaseEstimator):
        kind = None
    elif is_classifier(estimator):
        kind = "classifier"
    elif is_regressor(estimator):
        kind = "regressor"
    else:
        kind = None
    if kind is None:
        raise TypeError(
            "pack takes a fitted HTAFNetClassifier, HTAFNetRegressor or "
            f"ICBMClassifier; got {type(estimator).__name__}."
        )
    check_is_fitted(estimator, "module_")
    module = estimator.module_
    if not isinstance(module, nn.Module):
        raise TypeError(f"module_ must be a torch module; got {type(module)!r}.")
    param = next(module.parameters(), None)
    if param is not None and param.dtype != torch.float32:
        raise ValueError(
            f"pack needs a float32 net; this one is {param.dtype} (dtype="
            f"{getattr(estimator, 'dtype', None)!r})."
        )
    n_features = int(estimator.n_features_in_)
    builder = Builder(n_features)
    arch, convert = _converter_for(module)
    convert(builder, module)
    graph = {
        "format": FORMAT,
        "version": VERSION,
        "estimator": kind,
        "architecture": arch,
        "n_features_in": n_features,
        "layers": builder.layers,
        "output": builder.value,
    }
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        graph["feature_names_in"] = [str(n) for n in names]
    # the shape of the samples the net was fitted on (images), checked on
    # predict as the net checks it
    shape = getattr(estimator, "input_shape_", None)
    if shape is not None:
        graph["input_shape"] = [int(s) for s in shape]
    tensors = dict(builder.tensors)
    if kind == "classifier":
        graph["classes"], graph["classes_dtype"] = _json_labels(estimator.classes_)
        net = PackedNet(graph, tensors)
        return PackedClassifier(net, n_jobs=n_jobs).fit()
    graph["y_ndim"] = int(getattr(estimator, "_y_ndim", 1))
    tensors["target_mean"] = np.asarray(estimator.target_mean_, dtype=np.float64)
    tensors["target_scale"] = np.asarray(estimator.target_scale_, dtype=np.float64)
    net = PackedNet(graph, tensors)
    return PackedRegressor(net, n_jobs=n_jobs).fit()
