"""HTAFNetClassifier: a skorch classifier with the HTAF family.

The architecture mixin here builds the module of both HTAF nets; the
regressor is in :mod:`sksign.estimators._regressor`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib
from typing import ClassVar

import torch
from skorch import NeuralNetClassifier
from torch import nn

from sksign._compat import InvalidParameterError
from sksign._docstrings import Substitution
from sksign.estimators._base import NetBase
from sksign.estimators._classifier import ClassifierNetMixin
from sksign.estimators._params import (
    CLASSIFIER_CONSTRAINTS,
    DOCS,
    HTAF_CONSTRAINTS,
    REPULSION_CONSTRAINTS,
)
from sksign.estimators._repulsion import SignRepulsionMixin
from sksign.estimators._training import StepTrainingMixin
from sksign.nn import (
    ARCHITECTURES,
    IMAGE_ARCHITECTURES,
    build_network,
    infer_input_shape,
)

__all__ = ["HTAFNetClassifier"]


class _ArchitectureMixin:
    """Build the module from `architecture` (a name or a module class)."""

    _plain_params = ("architecture",)

    def _check_param_instances(self):
        super()._check_param_instances()
        arch = self.architecture
        is_module_class = isinstance(arch, type) and issubclass(arch, nn.Module)
        if isinstance(arch, str) or is_module_class:
            return  # a name is checked against ARCHITECTURES by the constraints
        hint = (
            " Pass the class (it is built for the data's shape), not an instance."
            if isinstance(arch, nn.Module)
            else ""
        )
        raise InvalidParameterError(
            f"The 'architecture' parameter of {type(self).__name__} must be one "
            f"of {ARCHITECTURES} or an nn.Module subclass. Got {arch!r} "
            f"instead.{hint}"
        )

    def initialize_module(self):
        """Build ``module_`` for the data seen in fit (skorch's hook).

        Returns
        -------
        self

        Examples
        --------
        >>> from sksign.estimators import HTAFNetClassifier
        >>> net = HTAFNetClassifier((4,), random_state=0)
        >>> net.initialize_for(3, classes=["a", "b"]).module_.fc0.in_features
        3
        """
        if self.module is not None:
            return super().initialize_module()
        # the dict first: skorch's routed ``module__name`` values win
        kwargs = {**(self.architecture_params or {}), **self.get_params_for("module")}
        n_features, n_outputs = self.n_features_in_, self._n_outputs()
        arch = self.architecture
        image_shape = getattr(self, "_image_shape", None)
        self.input_shape_ = None
        if arch == "cnn" or image_shape is not None:
            self.input_shape_ = self.input_shape or image_shape
        if isinstance(arch, type):
            module = arch(n_features=n_features, n_outputs=n_outputs, **kwargs)
        else:
            if arch == "cnn" or arch in IMAGE_ARCHITECTURES:
                # the image nets read flat rows as a square one-channel image
                # unless input_shape says otherwise (augmentation needs it)
                self.input_shape_ = infer_input_shape(n_features, self.input_shape_)
            module = build_network(
                arch,
                n_features,
                n_outputs,
                hidden_layer_sizes=self.hidden_layer_sizes,
                activation=self.activation,
                alpha0=self.alpha0,
                alpha1=self.alpha1,
                input_shape=self.input_shape_,
                conv_channels=self.conv_channels,
                time_steps=self.time_steps,
                **kwargs,
            )
        self.module_ = self._place_module(module)
        return self


@Substitution(**DOCS)
class HTAFNetClassifier(
    StepTrainingMixin,
    SignRepulsionMixin,
    ClassifierNetMixin,
    _ArchitectureMixin,
    NetBase,
    NeuralNetClassifier,
):
    """Neural-net classifier with HTAF (or any listed) hidden activations.

    A :class:`skorch.NeuralNetClassifier` that builds its own network from the
    parameters below. With a step-like activation ("htaf", "ste",
    "scaled_sigmoid") the net trains with the smooth (or straight-through)
    function and predicts with the exact Heaviside step, so its hidden
    units are single bits (a deep Heaviside network, the HTAF paper).
    With "relu", "silu", "gelu" or "tanh" it trains the Sign Code paper's
    FFNNs.

    Parameters
    ----------
    {architecture}
    criterion : torch loss class, default=torch.nn.CrossEntropyLoss
        skorch's criterion; it receives the logits and the encoded labels.
    {training}
    {steps}
    {inference}
    {recalibrate_bn}
    {time_steps}
    sign_repulsion : float, default=0.0
        Final weight lambda of the intra-class sign repulsion regulariser
        (the Sign Code paper; the paper uses 500). 0 disables it.
        ``sample_weight`` and ``class_weight`` weigh the criterion's loss,
        not this term.
    repulsion_tau : float, default=0.005
        Temperature of the smooth gate proxy.
    repulsion_warmup : int, default=50
        Epochs with lambda = 0 before the ramp.
    repulsion_ramp : int, default=200
        Epochs of the linear ramp of lambda up to ``sign_repulsion``.
    repulsion_layers : "last" or list of str, default="last"
        Activation modules (by name) whose pre-activations are repelled.
    {class_weight}
    {tail}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The original class labels (strings included).
    label_encoder_ : LabelEncoder
        Maps the labels to the net's output columns.
    {fitted}

    See Also
    --------
    HTAFNetRegressor : The same for regression.
    ICBMClassifier : A net whose binary concept layer explains its classes.
    sksign.nn.activations.HTAF : The activation module.

    Notes
    -----
    Defaults differ from skorch's on purpose: Adam with ``lr=1e-3`` and
    shuffled mini-batches (skorch's SGD ``lr=0.01`` without shuffling trains
    poorly), and no internal validation split.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import HTAFNetClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = HTAFNetClassifier((64,), max_epochs=2, random_state=0).fit(X / 16, y)
    >>> clf.predict(X[:3] / 16).shape
    (3,)
    """

    _parameter_constraints: ClassVar[dict] = {
        **HTAF_CONSTRAINTS,
        **CLASSIFIER_CONSTRAINTS,
        **REPULSION_CONSTRAINTS,
    }

    def __init__(
        self,
        hidden_layer_sizes=(256, 256),
        *,
        activation="htaf",
        alpha0=2.0,
        alpha1=11.0,
        architecture="mlp",
        architecture_params=None,
        input_shape=None,
        conv_channels=(16, 32),
        module=None,
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.Adam,
        lr="auto",
        lr_schedule="auto",
        max_epochs=20,
        batch_size=128,
        train_split=None,
        time_steps=4,
        alpha0_start="auto",
        anneal_epochs="auto",
        step_forward_from="auto",
        inference="step",
        recalibrate_bn=True,
        sign_repulsion=0.0,
        repulsion_tau=0.005,
        repulsion_warmup=50,
        repulsion_ramp=200,
        repulsion_layers="last",
        class_weight=None,
        relaxation_gap="auto",
        random_state=None,
        augment=None,
        mixed_precision=False,
        channels_last=False,
        checkpoint_dir=None,
        device="cpu",
        dtype="float32",
        verbose=0,
        iterator_train__shuffle=True,
        **kwargs,
    ):
        super().__init__(
            module,
            criterion=criterion,
            optimizer=optimizer,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            train_split=train_split,
            device=device,
            verbose=verbose,
            iterator_train__shuffle=iterator_train__shuffle,
            **kwargs,
        )
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.alpha0 = alpha0
        self.alpha1 = alpha1
        self.architecture = architecture
        self.architecture_params = architecture_params
        self.input_shape = input_shape
        self.conv_channels = conv_channels
        self.time_steps = time_steps
        self.lr_schedule = lr_schedule
        self.alpha0_start = alpha0_start
        self.anneal_epochs = anneal_epochs
        self.step_forward_from = step_forward_from
        self.inference = inference
        self.recalibrate_bn = recalibrate_bn
        self.sign_repulsion = sign_repulsion
        self.repulsion_tau = repulsion_tau
        self.repulsion_warmup = repulsion_warmup
        self.repulsion_ramp = repulsion_ramp
        self.repulsion_layers = repulsion_layers
        self.class_weight = class_weight
        self.relaxation_gap = relaxation_gap
        self.random_state = random_state
        self.augment = augment
        self.mixed_precision = mixed_precision
        self.channels_last = channels_last
        self.checkpoint_dir = checkpoint_dir
        self.dtype = dtype


def __getattr__(name):
    # regressors pickled when HTAFNetRegressor lived here still load (by name:
    # _regressor imports this module, and the alias is no import dependency)
    if name == "HTAFNetRegressor":
        return importlib.import_module("sksign.estimators._regressor").HTAFNetRegressor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
