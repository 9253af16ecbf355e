"""One adapter from whatever the user passed to a torch module and its input.

The scorers, the sign geometry and :class:`~sksign.transformers.SignCodeTransformer`
all read a fitted net through this module: a ``Pipeline`` (its head transforms
X), an sksign or skorch net (its ``module_``), scikit-learn's ``MLPClassifier``
or ``MLPRegressor`` (a float64 torch copy of its forward, see
:mod:`sksign._sklearn_mlp`), a bare ``nn.Module`` and a Hugging Face model (a
bare module whose forward takes keyword arguments). It decides the device and
dtype of the forward pass, validates and converts rows (float32, or float64
for float64 modules), cuts them into batches and maps labels to logit indices.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.base import is_regressor
from sklearn.frozen import FrozenEstimator
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.utils import assert_all_finite, check_consistent_length, gen_batches
from sklearn.utils.validation import check_array, check_is_fitted
from skorch import NeuralNet
from skorch.utils import data_from_dataset, to_numpy
from torch import nn
from torch.utils.data import Dataset

from sksign._sklearn_mlp import MLP_TYPES, SIGN_PRESERVING_ACTIVATIONS, mlp_module
from sksign._validation import check_net_X
from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor, ICBMClassifier

__all__ = [
    "BATCH_SIZE",
    "SKSIGN_NETS",
    "TorchClassifier",
    "as_torch_classifier",
    "check_module_input",
    "device_and_dtype",
    "final_step_input",
    "is_torch_net",
    "numpy_float_dtype",
    "to_tensor",
    "torch_module",
    "unwrap_frozen",
]

#: The nets whose input rows :func:`sksign._validation.check_net_X` checks
#: (feature count, image shape) as their own ``predict`` does.
SKSIGN_NETS = (HTAFNetClassifier, HTAFNetRegressor, ICBMClassifier)

#: Rows sent through a classifier at once by the scorers. Fixed (not the net's
#: batch_size) so that a score depends only on the data, the model and the seed.
BATCH_SIZE = 4096


# ---------------------------------------------------------------------------
# The module, its device and dtype, and the conversion of rows
# ---------------------------------------------------------------------------
def is_torch_net(est) -> bool:
    """Whether `est` is a (fitted) skorch net: it has an ``nn.Module`` ``module_``."""
    return isinstance(getattr(est, "module_", None), nn.Module)


def unwrap_frozen(estimator):
    """The fitted estimator inside a ``FrozenEstimator``, else `estimator`.

    scikit-learn's wrapper keeps a fit through ``clone`` (GridSearchCV,
    cross-validation); what reads the net reads the estimator it holds.
    """
    return estimator.estimator if isinstance(estimator, FrozenEstimator) else estimator


def torch_module(fitted, *, readout: bool = True) -> nn.Module:
    """The torch module that computes the forward pass of `fitted`.

    A bare ``nn.Module`` is itself, a skorch net its ``module_``, a
    scikit-learn MLP a new float64 copy (:func:`sksign._sklearn_mlp.mlp_module`,
    with the output layer when `readout`).
    """
    if isinstance(fitted, nn.Module):
        return fitted
    if isinstance(fitted, MLP_TYPES):
        return mlp_module(fitted, readout=readout)
    check_is_fitted(fitted, "module_")
    return fitted.module_


def device_and_dtype(
    module: nn.Module, *, device=None, default_device="cpu"
) -> tuple[torch.device, torch.dtype]:
    """Where and in which float dtype `module` runs.

    The device is `device` when given, else that of the module's first
    parameter, else `default_device`; the dtype is that of the first
    parameter when it is a float, else float32 (a net's own ``predict``).
    """
    param = next(module.parameters(), None)
    if device is None:
        device = param.device if param is not None else (default_device or "cpu")
    dtype = (
        param.dtype
        if param is not None and param.dtype.is_floating_point
        else torch.float32
    )
    return torch.device(device), dtype


_CONVS = {nn.Conv1d: ("L",), nn.Conv2d: ("H", "W"), nn.Conv3d: ("D", "H", "W")}


def _first_layer(module: nn.Module) -> nn.Module:
    """The layer that receives the input of `module` for certain: the first
    layer of a (nested) ``nn.Sequential``, else `module` itself."""
    while isinstance(module, nn.Sequential) and len(module):
        module = module[0]
    return module


def check_module_input(module: nn.Module, batch_shape, name: str = "X") -> None:
    """Raise a ValueError when `module` starts with a convolution that
    batches of `batch_shape` cannot feed.

    A bare ``nn.Sequential`` starting with ``Conv2d`` given flat rows
    (n_samples, n_features) would otherwise fail inside torch's ``conv2d``
    ("Expected 3D (unbatched) or 4D (batched) input"), with no word on the
    input the module needs. Only a bare convolution or a (nested)
    ``nn.Sequential`` starting with one is checked: any other module may
    reshape its input before its first convolution.

    Parameters
    ----------
    module : nn.Module
        The module the batches go to.
    batch_shape : tuple of int
        The shape of X (its first axis the samples).
    name : str, default="X"
        Name of the input in the message.
    """
    first = _first_layer(module)
    kind = next((c for c in _CONVS if isinstance(first, c)), None)
    batch_shape = tuple(batch_shape)
    if kind is None or len(batch_shape) == len(_CONVS[kind]) + 2:
        return
    axes = ", ".join(_CONVS[kind])
    channels = first.in_channels  # 0 for a lazy convolution not yet run
    example = ""
    if len(batch_shape) == 2 and channels and batch_shape[1] % channels == 0:
        n_axes = len(_CONVS[kind])
        side = round((batch_shape[1] // channels) ** (1 / n_axes))
        if side**n_axes * channels == batch_shape[1]:
            sides = ", ".join([str(side)] * n_axes)
            example = f", for instance {name}.reshape(-1, {channels}, {sides}),"
    with_c = f" with C = {channels}" if channels else ""
    raise ValueError(
        f"{type(module).__name__} starts with {first}, which takes samples of "
        f"shape (C, {axes}){with_c}, but {name} has shape {batch_shape}. Pass "
        f"{name} as (n_samples, C, {axes}){example} or put nn.Unflatten(1, (C, "
        f"{axes})) in front of the module so that it takes flat rows."
    )


def numpy_float_dtype(dtype: torch.dtype) -> type:
    """The numpy rows for a module of `dtype`: float64 for float64, else float32."""
    return np.float64 if dtype == torch.float64 else np.float32


def to_tensor(rows, device, dtype, *, keep_integers: bool = False) -> torch.Tensor:
    """One batch of rows as a tensor on `device`, floats in `dtype`.

    Rows are checked for NaN and infinity. With `keep_integers`, integer rows
    (token ids for a model called through ``forward_kwargs``) pass through as
    int64.
    """
    rows = np.asarray(rows)
    integers = keep_integers and rows.dtype.kind in "biu"
    if integers:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
    else:
        rows = np.ascontiguousarray(rows, dtype=numpy_float_dtype(dtype))
        assert_all_finite(rows, input_name="X")
    if not rows.flags.writeable:  # a read-only memmap
        rows = rows.copy()
    if integers:
        return torch.from_numpy(rows).to(device=device)
    return torch.from_numpy(rows).to(device=device, dtype=dtype)


def final_step_input(estimator, X):
    """The last step of `estimator` and `X` as it reaches that step.

    A ``Pipeline``'s head transforms X first; an sksign net's rows are
    validated (and images flattened) by :func:`sksign._validation.check_net_X`.
    Anything else passes X through unchanged.
    """
    estimator = unwrap_frozen(estimator)
    if isinstance(estimator, Pipeline):
        X = estimator[:-1].transform(X)
        estimator = unwrap_frozen(estimator[-1])
    if isinstance(estimator, SKSIGN_NETS):
        X = check_net_X(estimator, X, reset=False)
    return estimator, X


# ---------------------------------------------------------------------------
# A classifier as (module, rows, class indices): what the scorers read
# ---------------------------------------------------------------------------
@dataclass
class TorchClassifier:
    """A fitted classifier seen as a torch module, with its rows and labels.

    Attributes
    ----------
    module : nn.Module
        Maps a batch of rows to logits.
    X, X_ref : ndarray
        The validated rows (X_ref None when not given).
    y : ndarray of int64 or None
        Class indices into the logits; -1 for a label the classifier does not
        know.
    device, dtype : torch.device, torch.dtype
        Where and in which dtype the module runs.
    y_are_indices : bool
        Whether y was given as logit indices (bare modules, plain skorch nets,
        skorch's EpochScoring): each must then index a logit.
    """

    module: nn.Module
    X: np.ndarray
    X_ref: np.ndarray | None
    y: np.ndarray | None
    device: torch.device
    dtype: torch.dtype
    y_are_indices: bool = False

    def batches(self, X: np.ndarray) -> Iterator[torch.Tensor]:
        """Tensors of :data:`BATCH_SIZE` rows of X on the module's device."""
        for rows in gen_batches(len(X), BATCH_SIZE):
            yield to_tensor(X[rows], self.device, self.dtype)

    def logits(self, X: np.ndarray) -> np.ndarray:
        """The module's float64 logits on X, checked to be a finite (n, C >= 2)."""
        out = [
            self.module(xb).detach().to("cpu", torch.float64).numpy()
            for xb in self.batches(X)
        ]
        if not out:
            raise ValueError("X has 0 samples.")
        logits = np.concatenate(out)
        if not np.isfinite(logits).all():
            raise ValueError(
                "The net's output contains NaN or infinity on X, so no accuracy or "
                "margin can be read from it; check the input and the weights."
            )
        if logits.ndim != 2 or logits.shape[1] < 2:
            raise ValueError(
                "The scorers need a classifier whose output has shape (n_samples, "
                f"n_classes) with n_classes >= 2; got an output of shape "
                f"{logits.shape}."
            )
        if self.y_are_indices and X is self.X and len(self.y):
            bad = self.y[(self.y < 0) | (self.y >= logits.shape[1])]
            if bad.size:
                raise ValueError(
                    f"y holds class indices into the {logits.shape[1]} logits of "
                    f"the net, but contains {sorted(set(bad.tolist()))[:5]}; y must "
                    f"be in [0, {logits.shape[1] - 1}] (a plain skorch net or bare "
                    "module predicts logit indices)."
                )
        return logits


def _check_rows(X, dtype, name="X"):
    X = check_array(X, dtype=dtype, input_name=name, allow_nd=True)
    return np.ascontiguousarray(X)


def _class_indices(y, classes) -> np.ndarray:
    """Positions of the labels `y` in `classes` (-1 for a label not there)."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D class labels; got shape {y.shape}.")
    lookup = {label: i for i, label in enumerate(np.asarray(classes).tolist())}
    return np.array([lookup.get(v, -1) for v in y.tolist()], dtype=np.int64)


def _integer_targets(y, caller) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if (
        y.ndim != 1
        or y.dtype.kind not in "biuf"
        or (y.dtype.kind == "f" and not np.all(np.isfinite(y) & (y == np.round(y))))
    ):
        raise ValueError(
            f"{caller} on a bare nn.Module (or inside skorch's EpochScoring) needs "
            "y as integer class indices into the logits; got "
            f"y of dtype {y.dtype} and shape {y.shape}."
        )
    return y.astype(np.int64)


def _mlp_classifier_module(mlp: MLPClassifier) -> nn.Module:
    check_is_fitted(mlp, "coefs_")
    if mlp.out_activation_ not in ("softmax", "logistic") or (
        mlp.out_activation_ == "logistic" and mlp.coefs_[-1].shape[1] != 1
    ):
        raise ValueError(
            "Only single-label MLPClassifier models are supported; got "
            f"out_activation_={mlp.out_activation_!r} with "
            f"{mlp.coefs_[-1].shape[1]} outputs."
        )
    if mlp.activation not in SIGN_PRESERVING_ACTIVATIONS:
        raise ValueError(
            f"MLPClassifier(activation={mlp.activation!r}) is not a sign-preserving "
            "nonlinearity with a sign code to intervene on; use one of "
            f"{SIGN_PRESERVING_ACTIVATIONS}."
        )
    return mlp_module(mlp)


def _is_a_regressor(estimator) -> bool:
    # scikit-learn's tags where the object has them (estimators, skorch nets);
    # a bare nn.Module is taken as a classifier (its output as the logits)
    return (
        not isinstance(estimator, nn.Module)
        and hasattr(estimator, "__sklearn_tags__")
        and is_regressor(estimator)
    )


def _skorch_rows(net, X, y, caller):
    """Rows (and y) for a skorch net; also from the Dataset EpochScoring passes."""
    if isinstance(X, Dataset):
        # skorch's EpochScoring passes the (valid or train) Dataset and the
        # targets the net trains on, i.e. class indices.
        try:
            X_ds, y_ds = data_from_dataset(X)
        except AttributeError as exc:
            raise TypeError(
                f"{caller} reads X and y from a skorch Dataset (as passed by "
                f"EpochScoring); got a {type(X).__name__} without them."
            ) from exc
        X = to_numpy(X_ds) if isinstance(X_ds, torch.Tensor) else X_ds
        # Take y from the Dataset itself when it has one: with caching,
        # EpochScoring(on_train=True) passes y in the shuffled batch order.
        if y_ds is not None:
            y = to_numpy(y_ds) if isinstance(y_ds, torch.Tensor) else y_ds
        return _check_rows(X, np.float32), y, True
    if isinstance(net, SKSIGN_NETS):
        return check_net_X(net, X, reset=False), y, False
    return _check_rows(X, np.float32), y, False


def _skorch_ref_rows(net, X_ref):
    if isinstance(net, SKSIGN_NETS):
        return check_net_X(net, X_ref, reset=False)
    return _check_rows(X_ref, np.float32, "X_ref")


def _check_mlp_width(mlp, X, name):
    if X.shape[1] != mlp.n_features_in_:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but MLPClassifier is expecting "
            f"{mlp.n_features_in_} features as input."
        )


def as_torch_classifier(
    estimator, X, y=None, *, X_ref=None, caller: str, need_y: bool = False
) -> TorchClassifier:
    """Unwrap a Pipeline / skorch net / MLPClassifier / nn.Module classifier.

    Parameters
    ----------
    estimator : estimator or nn.Module
        A fitted sksign/skorch classifier net (also mid-fit, with X the
        Dataset skorch's ``EpochScoring`` passes), a bare ``nn.Module`` whose
        output is the logits, a fitted ``MLPClassifier``, or a ``Pipeline``
        ending in one of these (X goes through its head first); any of them
        in a ``FrozenEstimator``.
    X : array-like
        Samples.
    y : array-like, default=None
        Labels (class indices for a bare module or a plain skorch net).
    X_ref : array-like, default=None
        Reference samples, converted like X.
    caller : str
        Name used in error messages.
    need_y : bool, default=False
        Whether y is required.

    Returns
    -------
    TorchClassifier
    """
    estimator = unwrap_frozen(estimator)
    if isinstance(estimator, Pipeline):
        check_is_fitted(estimator)
        head = estimator[:-1]
        X = head.transform(X)
        if X_ref is not None:
            X_ref = head.transform(X_ref)
        estimator = unwrap_frozen(estimator[-1])
    if _is_a_regressor(estimator):
        raise TypeError(
            f"{caller} needs a classifier (logits over classes); got the regressor "
            f"{type(estimator).__name__}."
        )
    labels_are_indices = False
    if isinstance(estimator, NeuralNet):
        module = torch_module(estimator)
        device, dtype = device_and_dtype(module)
        X, y, labels_are_indices = _skorch_rows(estimator, X, y, caller)
        if X_ref is not None:
            X_ref = _skorch_ref_rows(estimator, X_ref)
        if not isinstance(estimator, SKSIGN_NETS):  # sksign nets reshape rows
            check_module_input(module, X.shape)
            if X_ref is not None:
                check_module_input(module, X_ref.shape, "X_ref")
        # sksign nets predict their original labels (label_encoder_); a plain
        # skorch classifier trains on y as logit indices and predicts indices
        maps_labels = hasattr(estimator, "label_encoder_")
        classes = estimator.classes_ if maps_labels and not labels_are_indices else None
    elif isinstance(estimator, MLPClassifier):
        module = _mlp_classifier_module(estimator)
        device, dtype = torch.device("cpu"), torch.float64
        X = _check_rows(X, np.float64)
        _check_mlp_width(estimator, X, "X")
        if X_ref is not None:
            X_ref = _check_rows(X_ref, np.float64, "X_ref")
            _check_mlp_width(estimator, X_ref, "X_ref")
        classes = estimator.classes_
    elif isinstance(estimator, nn.Module):
        module = estimator
        device, dtype = device_and_dtype(module)
        np_dtype = numpy_float_dtype(dtype)
        X = _check_rows(X, np_dtype)
        check_module_input(module, X.shape)
        if X_ref is not None:
            X_ref = _check_rows(X_ref, np_dtype, "X_ref")
            check_module_input(module, X_ref.shape, "X_ref")
        classes = None
    else:
        raise TypeError(
            f"{caller} needs a fitted sksign/skorch net, a torch nn.Module, a "
            "scikit-learn MLPClassifier or a Pipeline ending in one; got "
            f"{type(estimator).__name__}."
        )
    if y is None:
        if need_y:
            raise ValueError(f"{caller} requires y (the true class labels).")
        y_idx = None
    else:
        check_consistent_length(X, y)
        y_arr = np.asarray(y)
        if y_arr.dtype.kind in "fc" and not np.all(np.isfinite(y_arr)):
            raise ValueError(f"{caller}: y contains NaN or infinity.")
        y_idx = (
            _integer_targets(y, caller)
            if classes is None
            else _class_indices(y, classes)
        )
    return TorchClassifier(
        module,
        X,
        X_ref,
        y_idx,
        device,
        dtype,
        y_are_indices=y is not None and classes is None,
    )
