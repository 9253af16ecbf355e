"""HTAFNetClassifier and HTAFNetRegressor: skorch nets with the HTAF family."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from contextlib import contextmanager
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data
from skorch import NeuralNetClassifier, NeuralNetRegressor
from skorch.callbacks import EarlyStopping, EpochScoring, PrintLog
from skorch.history import History
from torch import nn

from sksign._utils import restore_state_on_error
from sksign.estimators._callbacks import RelaxationGap
from sksign.nn.losses import repulsion_lambda, sign_repulsion_loss
from sksign.nn.modules import ACTIVATIONS, ARCHITECTURES, build_network

__all__ = ["HTAFNetClassifier", "HTAFNetRegressor"]

_COMMON_PARAMS_DOC = """
    hidden_layer_sizes : int or tuple of int, default=(256, 256)
        Width of each hidden (dense) layer.
    activation : {"htaf", "ste", "scaled_sigmoid", "relu", "silu", "gelu", \
"tanh"}, default="htaf"
        Hidden activation. The first three are step-like: smooth (or
        straight-through) in training and the exact step ``1[x >= 0]`` at
        inference, so hidden units are bits. "scaled_sigmoid" uses
        ``k = alpha0 * alpha1``.
    alpha0 : float, default=2.0
        HTAF inner scale (tail decay rate). A top-level parameter, so
        ``GridSearchCV(net, {"alpha0": ..., "alpha1": ...})`` works directly.
    alpha1 : float, default=11.0
        HTAF outer scale. Keep ``alpha0 * alpha1 ~ 22`` (see
        :func:`sksign.nn.activations.htaf_grid`).
    architecture : {"mlp", "cnn", "bnn", "snn"} or nn.Module subclass, \
default="mlp"
        Built-in net: "mlp" (with a step-like activation, a deep Heaviside
        net), "cnn", "bnn" (binary weights and activations with real-valued
        shortcuts, Bi-Real style) or "snn" (integrate-and-fire neurons over
        ``time_steps``); or a module class instantiated as
        ``architecture(n_features=..., n_outputs=..., **module_params)``
        with the ``module__*`` parameters.
    input_shape : tuple of int, default=None
        ``(channels, height, width)`` of one image for ``architecture="cnn"``
        when X holds flat rows; None infers it from 4-D X or, for flat rows,
        a square one-channel image.
    conv_channels : tuple of int, default=(16, 32)
        Channels of the conv blocks (``architecture="cnn"`` only).
    module : nn.Module class or instance, default=None
        skorch's ``module``; when given, it replaces ``architecture``."""

_PARAMS_DOC_TRAINING = """
    optimizer : torch optimizer class, default=torch.optim.Adam
        skorch's optimizer (Adam trains well where skorch's SGD default
        does not).
    lr : float, default=1e-3
        Learning rate.
    max_epochs : int, default=20
        Number of epochs.
    batch_size : int, default=128
        Mini-batch size; batches are shuffled every epoch
        (``iterator_train__shuffle=True``).
    train_split : callable or None, default=None
        skorch's validation split, e.g. ``skorch.dataset.ValidSplit(5)``.
        None trains on all of X, like scikit-learn's estimators.
    time_steps : int, default=4
        Simulation steps of the integrate-and-fire neurons
        (``architecture="snn"`` only)."""

_PARAMS_DOC_TAIL = """
    relaxation_gap : bool or "auto", default="auto"
        Add the :class:`~sksign.estimators.RelaxationGap` callback, which
        records the exact-step vs smooth accuracy and the binarization rate
        into ``history_`` every epoch. "auto" adds it when ``verbose > 0``.
    random_state : int, RandomState instance or None, default=None
        Seeds the weight initialisation and the shuffling of batches; the
        same value gives the same model.
    device : str or torch.device, default="cpu"
        Where the net trains ("cuda" where available).
    verbose : int, default=0
        skorch's progress output (a table per epoch) when > 0.
    **kwargs
        Any other skorch parameter (``callbacks``, ``iterator_train__*``,
        ``module__*``, ``optimizer__*``, ...)."""

_COMMON_ATTRS_DOC = """
    module_ : nn.Module
        The fitted network.
    history_ : skorch.History
        Per-epoch losses, timings and, with ``relaxation_gap``, the
        exact-step gap and binarization rate.
    n_features_in_ : int
        Number of features seen during fit (the flattened image size for
        4-D input).
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names, when X was a DataFrame with string column names.
    input_shape_ : tuple of int or None
        Image shape used by ``architecture="cnn"``."""


def _check_real(owner, name, value, *, low, inclusive):
    """A finite real number above `low` (or at it, when `inclusive`)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not np.isfinite(value)
        or value < low
        or (value == low and not inclusive)
    ):
        if low == 0:
            what = "non-negative" if inclusive else "positive"
            kind = f"a {what} real number"
        else:
            kind = f"a real number {'>=' if inclusive else '>'} {low}"
        raise ValueError(
            f"The {name!r} parameter of {owner} must be {kind}. Got {value!r} instead."
        )


def _check_int(owner, name, value, *, low, also=()):
    """An integer >= `low` (or one of the values in `also`)."""
    if value in also and not isinstance(value, bool):
        return
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        extra = f" or one of {list(also)}" if also else ""
        raise ValueError(
            f"The {name!r} parameter of {owner} must be an integer >= {low}"
            f"{extra}. Got {value!r} instead."
        )


def _check_known_labels(y, classes, which):
    """Refuse labels of `y` outside `classes` ("given", "of the first call")."""
    unseen = np.setdiff1d(np.unique(y), classes)
    if len(unseen):
        raise ValueError(
            f"y contains labels {unseen.tolist()!r} that are not among the classes "
            f"{which} ({np.asarray(classes).tolist()!r})."
        )


def _image_shape(shape):
    """(C, H, W) of one image; a 2-D (H, W) shape has one channel."""
    if shape is not None and len(shape) == 2:
        return (1, *shape)
    return None if shape is None else tuple(shape)


class _HTAFNetMixin:
    """What the HTAF classifier and regressor share: params, data, seeding."""

    def __setattr__(self, name, attr):
        if name == "architecture":
            # A parameter (a name or a module class), not one of skorch's torch
            # components: skip skorch's registration, which refuses nn.Module
            # values outside initialize(), so _check_params can explain.
            object.__setattr__(self, name, attr)
            return
        super().__setattr__(name, attr)

    def _init_common(
        self,
        hidden_layer_sizes,
        activation,
        alpha0,
        alpha1,
        architecture,
        input_shape,
        conv_channels,
        relaxation_gap,
        random_state,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.alpha0 = alpha0
        self.alpha1 = alpha1
        self.architecture = architecture
        self.input_shape = input_shape
        self.conv_channels = conv_channels
        self.relaxation_gap = relaxation_gap
        self.random_state = random_state

    # -- data ---------------------------------------------------------------
    def _as_rows(self, X, reset):
        """Validate X and return float32 rows (images are flattened).

        torch Datasets (skorch passes its validation split to the scoring
        callbacks) are skorch's own business and pass through unchanged.
        """
        if isinstance(X, torch.utils.data.Dataset):
            return X
        shape = None
        if not hasattr(X, "iloc") and not hasattr(X, "__dataframe__"):
            arr = X if isinstance(X, np.ndarray) else None
            if arr is None and isinstance(X, list | tuple):
                try:
                    arr = np.asarray(X)
                except ValueError:
                    arr = None
            if arr is not None and arr.ndim > 2:
                shape = tuple(arr.shape[1:])
                X = arr.reshape(arr.shape[0], -1)
        if reset and shape is not None and self.input_shape is not None:
            if _image_shape(shape) != _image_shape(self.input_shape):
                raise ValueError(
                    f"X has images of shape {shape}, but input_shape="
                    f"{tuple(self.input_shape)} was given; leave input_shape=None "
                    "for image input or make them agree."
                )
        X = validate_data(self, X, reset=reset, dtype=np.float32)
        if reset:
            self._image_shape = shape
        elif shape is not None and self.input_shape_ is not None:
            if _image_shape(shape) != _image_shape(self.input_shape_):
                raise ValueError(
                    f"X has images of shape {shape}, but {type(self).__name__} "
                    f"was fitted on images of shape {self.input_shape_}."
                )
        return np.ascontiguousarray(X, dtype=np.float32)

    def _check_params(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"The 'activation' parameter of {type(self).__name__} must be one "
                f"of {ACTIVATIONS}. Got {self.activation!r} instead."
            )
        arch = self.architecture
        if not (
            arch in ARCHITECTURES
            or (isinstance(arch, type) and issubclass(arch, nn.Module))
        ):
            hint = (
                " Pass the class (it is built for the data's shape), not an instance."
                if isinstance(arch, nn.Module)
                else ""
            )
            raise ValueError(
                f"The 'architecture' parameter of {type(self).__name__} must be one "
                f"of {ARCHITECTURES} or an nn.Module subclass. Got {arch!r} "
                f"instead.{hint}"
            )
        self._check_common_params()

    def _check_common_params(self):
        """Checks shared by every net: alpha0/alpha1, training, relaxation_gap."""
        owner = type(self).__name__
        for name in ("alpha0", "alpha1", "lr"):
            _check_real(owner, name, getattr(self, name), low=0, inclusive=False)
        _check_int(owner, "max_epochs", self.max_epochs, low=1)
        # skorch's convention: -1 is the whole data set in one batch
        _check_int(owner, "batch_size", self.batch_size, low=1, also=(-1,))
        if self.train_split is None:
            # skorch's EarlyStopping watches valid_loss by default, which a net
            # without a validation split never records
            for cb in self.callbacks or []:
                cb = cb[1] if isinstance(cb, tuple) else cb
                monitor = getattr(cb, "monitor", None)
                if isinstance(cb, EarlyStopping) and str(monitor).startswith("valid"):
                    raise ValueError(
                        f"EarlyStopping(monitor={monitor!r}) needs validation "
                        f"data, but {owner} has train_split=None (its default: it "
                        "trains on all of X). Pass train_split=ValidSplit(5) "
                        "(skorch.dataset) or EarlyStopping(monitor='train_loss')."
                    )
        if self.relaxation_gap not in (True, False, "auto"):
            raise ValueError(
                "The 'relaxation_gap' parameter must be True, False or 'auto'. "
                f"Got {self.relaxation_gap!r} instead."
            )

    def _get_param_names(self):
        # skorch takes every public-looking key of __dict__ as a param, which
        # includes its own ``_params_to_validate`` set and our private fitted
        # state; private names are never constructor parameters.
        return [k for k in super()._get_param_names() if not k.startswith("_")]

    # -- seeding ------------------------------------------------------------
    def _seed(self):
        if self.random_state is None:
            return None
        return int(check_random_state(self.random_state).randint(2**31 - 1))

    def _continues_training(self):
        """Whether ``fit`` goes on training the existing net (``warm_start``)."""
        return bool(
            self.warm_start
            and getattr(self, "initialized_", False)
            and hasattr(self, "n_features_in_")
        )

    def initialize_history(self):
        # A new History rather than skorch's in-place clear: a fit that fails
        # after initialize() then gives the previous history back intact.
        self.history_ = History()
        return self

    def initialize(self):
        self._check_params()
        seed = self._seed()
        self._rng_seed = seed
        if seed is None:
            self._train_generator = None
            return super().initialize()
        self._train_generator = torch.Generator().manual_seed(seed + 1)
        with torch.random.fork_rng(devices=[]):
            # the weights are drawn on the CPU: seed its generator only
            torch.random.default_generator.manual_seed(seed)
            return super().initialize()

    def get_iterator(self, dataset, training=False):
        # A DataLoader without a generator draws its base seed from torch's
        # global RNG when iterated; predict and transform must not move it.
        generator = (
            getattr(self, "_train_generator", None) if training else torch.Generator()
        )
        if generator is None:  # unseeded training: skorch's own iterator
            return super().get_iterator(dataset, training=training)
        prefix = "iterator_train" if training else "iterator_valid"
        kwargs = self.get_params_for(prefix)
        kwargs.setdefault("batch_size", self.batch_size)
        if kwargs["batch_size"] == -1:
            kwargs["batch_size"] = len(dataset)
        kwargs.setdefault("generator", generator)
        iterator = self.iterator_train if training else self.iterator_valid
        return iterator(dataset, **kwargs)

    @contextmanager
    def _training_rng(self):
        """Seed the training's own randomness (dropout, ...) from random_state,
        leaving torch's global RNG as it was; unseeded nets use the global RNG."""
        seed = getattr(self, "_rng_seed", None)
        if seed is None:
            yield
            return
        device = torch.device(self.device)
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            # one stream per call, so partial_fit rounds differ but repeat; only
            # the generators of the net's device, so no other RNG moves
            stream = seed + 2 + len(self.history_)
            torch.random.default_generator.manual_seed(stream)
            if devices:
                with torch.cuda.device(devices[0]):
                    torch.cuda.manual_seed(stream)
            yield

    # -- module -------------------------------------------------------------
    def _n_outputs(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def initialize_for(
        self, n_features_in, *, classes=None, n_outputs=None, input_shape=None
    ):
        """Build the untrained net for data of this shape (for ``load_params``).

        ``initialize()`` needs what ``fit`` learns from the data: the input
        width and the classes (classifiers) or number of targets (regressors).
        This sets them and initialises, so saved weights can be loaded::

            net.save_params(f_params="net.safetensors", use_safetensors=True)
            new = HTAFNetClassifier(**net.get_params()).initialize_for(
                net.n_features_in_, classes=net.classes_
            )
            new.load_params(f_params="net.safetensors", use_safetensors=True)

        Parameters
        ----------
        n_features_in : int
            Number of input features (flattened image size for images).
        classes : array-like, default=None
            The class labels (classifiers; required there).
        n_outputs : int, default=None
            Number of regression targets (regressors; default 1, which makes
            ``predict`` return 1-D arrays).
        input_shape : tuple of int, default=None
            Image shape ``(C, H, W)`` when the net was fitted on 4-D X.

        Returns
        -------
        self
        """
        self.n_features_in_ = int(n_features_in)
        self._image_shape = None if input_shape is None else tuple(input_shape)
        self._set_targets_for(classes=classes, n_outputs=n_outputs)
        return self.initialize()

    def initialize_module(self):
        if self.module is not None:
            return super().initialize_module()
        kwargs = self.get_params_for("module")
        n_features, n_outputs = self.n_features_in_, self._n_outputs()
        arch = self.architecture
        self.input_shape_ = None
        if arch == "cnn" or getattr(self, "_image_shape", None) is not None:
            self.input_shape_ = self.input_shape or self._image_shape
        if isinstance(arch, type):
            module = arch(n_features=n_features, n_outputs=n_outputs, **kwargs)
        else:
            if arch == "cnn":
                from sksign.nn.modules import infer_input_shape

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
        self.module_ = module.to(self.device)
        return self

    def initialize_callbacks(self):
        super().initialize_callbacks()
        want = self.relaxation_gap is True or (
            self.relaxation_gap == "auto" and self.verbose
        )
        names = [name for name, _ in self.callbacks_]
        if want and "relaxation_gap" not in names:
            pos = len(self.callbacks_)
            for i, (_, cb) in enumerate(self.callbacks_):
                if isinstance(cb, PrintLog):
                    pos = i
                    break
            cb = RelaxationGap().initialize()
            self.callbacks_.insert(pos, ("relaxation_gap", cb))
        return self

    def _forward_numpy(self, X):
        """Raw net outputs for validated float32 rows, in eval mode."""
        out = [o.detach().cpu().numpy() for o in self.forward_iter(X, training=False)]
        return np.concatenate(out).astype(np.float64, copy=False)

    def _check_fitted(self):
        check_is_fitted(self, "module_")
        if not getattr(self, "initialized_", False):  # pragma: no cover
            check_is_fitted(self, "initialized_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


def _encoded_accuracy(net, X, y):
    """Accuracy on skorch's internal split, whose y holds encoded labels."""
    return float(np.mean(net.predict_proba(X).argmax(axis=1) == np.asarray(y)))


class HTAFNetClassifier(_HTAFNetMixin, NeuralNetClassifier):
    __doc__ = (
        """Neural-net classifier with HTAF (or any listed) hidden activations.

    A :class:`skorch.NeuralNetClassifier` that builds its own network from the
    parameters below. With a step-like activation ("htaf", "ste",
    "scaled_sigmoid") the net trains with the smooth (or straight-through)
    function and predicts with the exact Heaviside step, so its hidden
    units are single bits (a deep Heaviside network, the HTAF paper).
    With "relu", "silu", "gelu" or "tanh" it trains the Sign Code paper's
    FFNNs.

    Parameters
    ----------"""
        + _COMMON_PARAMS_DOC
        + """
    criterion : torch loss class, default=torch.nn.CrossEntropyLoss
        skorch's criterion; it receives the logits and the encoded labels."""
        + _PARAMS_DOC_TRAINING
        + """
    sign_repulsion : float, default=0.0
        Final weight lambda of the intra-class sign repulsion regulariser
        (the Sign Code paper; the paper uses 500). 0 disables it.
    repulsion_tau : float, default=0.005
        Temperature of the smooth gate proxy.
    repulsion_warmup : int, default=50
        Epochs with lambda = 0 before the ramp.
    repulsion_ramp : int, default=200
        Epochs of the linear ramp of lambda up to ``sign_repulsion``.
    repulsion_layers : "last" or list of str, default="last"
        Activation modules (by name) whose pre-activations are repelled."""
        + _PARAMS_DOC_TAIL
        + """

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The original class labels (strings included)."""
        + _COMMON_ATTRS_DOC
        + """

    See Also
    --------
    HTAFNetRegressor : The same for regression.
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
    )

    def __init__(
        self,
        hidden_layer_sizes=(256, 256),
        *,
        activation="htaf",
        alpha0=2.0,
        alpha1=11.0,
        architecture="mlp",
        input_shape=None,
        conv_channels=(16, 32),
        module=None,
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.Adam,
        lr=1e-3,
        max_epochs=20,
        batch_size=128,
        train_split=None,
        time_steps=4,
        sign_repulsion=0.0,
        repulsion_tau=0.005,
        repulsion_warmup=50,
        repulsion_ramp=200,
        repulsion_layers="last",
        relaxation_gap="auto",
        random_state=None,
        device="cpu",
        verbose=0,
        **kwargs,
    ):
        kwargs.setdefault("iterator_train__shuffle", True)
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
            **kwargs,
        )
        self._init_common(
            hidden_layer_sizes,
            activation,
            alpha0,
            alpha1,
            architecture,
            input_shape,
            conv_channels,
            relaxation_gap,
            random_state,
        )
        self.time_steps = time_steps
        self.sign_repulsion = sign_repulsion
        self.repulsion_tau = repulsion_tau
        self.repulsion_warmup = repulsion_warmup
        self.repulsion_ramp = repulsion_ramp
        self.repulsion_layers = repulsion_layers

    @property
    def classes_(self):
        check_is_fitted(self, "label_encoder_")
        return self.label_encoder_.classes_

    def _check_params(self):
        super()._check_params()
        owner = type(self).__name__
        _check_real(owner, "sign_repulsion", self.sign_repulsion, low=0, inclusive=True)
        _check_real(owner, "repulsion_tau", self.repulsion_tau, low=0, inclusive=False)
        for name in ("repulsion_warmup", "repulsion_ramp"):
            _check_int(owner, name, getattr(self, name), low=0)

    # -- intra-class sign repulsion -----------------------------------------
    def _check_repulsion_layers(self):
        """Resolve `repulsion_layers` on the built net before any training."""
        if self.sign_repulsion:
            self._repulsion_modules()

    def _repulsion_modules(self):
        from sksign.nn.hooks import resolve_layers

        named = resolve_layers(self.module_, self.repulsion_layers)
        return [
            (m, "tanh" if isinstance(m, nn.Tanh) else "sigmoid") for m in named.values()
        ]

    def train_step_single(self, batch, **fit_params):
        lam = 0.0
        if self.sign_repulsion:
            epoch = len(self.history)
            lam = repulsion_lambda(
                epoch, self.sign_repulsion, self.repulsion_warmup, self.repulsion_ramp
            )
            self.history.record("repulsion_lambda", lam)
        if not lam:
            return super().train_step_single(batch, **fit_params)
        captured = []
        handles = [
            m.register_forward_pre_hook(
                lambda _m, inp, gate=gate: captured.append((inp[0], gate))
            )
            for m, gate in self._repulsion_modules()
        ]
        self._repulsion = (lam, captured)
        try:
            return super().train_step_single(batch, **fit_params)
        finally:
            for h in handles:
                h.remove()
            self._repulsion = None

    def get_loss(self, y_pred, y_true, X=None, training=False):
        loss = super().get_loss(y_pred, y_true, X=X, training=training)
        rep = getattr(self, "_repulsion", None)
        if training and rep is not None:
            lam, captured = rep
            y = torch.as_tensor(y_true, device=y_pred.device)
            penalty = sum(
                sign_repulsion_loss(z, y, tau=self.repulsion_tau, gate=gate)
                for z, gate in captured
            )
            self.history.record_batch("repulsion_loss", float(penalty.detach()))
            loss = loss + lam * penalty
        return loss

    def _n_outputs(self):
        return len(self.label_encoder_.classes_)

    def _set_targets_for(self, classes=None, n_outputs=None):
        if classes is None:
            raise ValueError(
                f"{type(self).__name__}.initialize_for needs classes=..., the "
                "class labels the saved net was fitted on."
            )
        self.label_encoder_ = LabelEncoder().fit(np.asarray(classes))

    @property
    def _default_callbacks(self):
        # skorch's valid_acc compares predict() with the split's y; predict
        # returns original labels here, so score the encoded ones instead.
        return [
            (
                name,
                EpochScoring(
                    _encoded_accuracy,
                    name="valid_acc",
                    lower_is_better=False,
                    on_train=False,
                ),
            )
            if name == "valid_acc"
            else (name, cb)
            for name, cb in super()._default_callbacks
        ]

    def _encode_fit_targets(self, X, y, classes=None, reset=True):
        X = self._as_rows(X, reset=reset)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
            )
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        if len(y) != len(X):
            raise ValueError(
                f"Found input variables with inconsistent numbers of samples: "
                f"X has {len(X)}, y has {len(y)}."
            )
        if classes is None:
            classes = getattr(self, "classes", None)  # skorch's parameter
        labels = np.unique(y) if classes is None else np.unique(np.asarray(classes))
        if classes is not None:
            _check_known_labels(y, labels, "given")
        if len(labels) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in the "
                f"data, but the data contain only one class: {labels[0]!r}."
            )
        encoder = LabelEncoder().fit(labels)
        return X, encoder

    def fit(self, X, y, **fit_params):
        """Initialise (unless ``warm_start``) and train the net.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Training data; DataFrames keep their column names.
        y : array-like of shape (n_samples,)
            Class labels of any type (strings included).
        **fit_params : dict
            Passed to skorch's ``fit``.

        Returns
        -------
        self : HTAFNetClassifier
        """
        # A fit that fails (bad parameters, data, fit_params, or during
        # training) leaves the estimator as it was.
        with restore_state_on_error(self):
            self._check_params()
            warm = self._continues_training()
            X, encoder = self._encode_fit_targets(X, y, reset=not warm)
            if warm and not np.array_equal(
                encoder.classes_, self.label_encoder_.classes_
            ):
                raise ValueError(
                    "warm_start=True needs the same classes as the first fit; got "
                    f"{encoder.classes_!r}, expected {self.label_encoder_.classes_!r}."
                )
            self.label_encoder_ = encoder
            y_enc = encoder.transform(column_or_1d(y)).astype(np.int64)
            if not warm:
                self.initialize()
            self._check_repulsion_layers()
            with self._training_rng():
                return NeuralNetClassifier.partial_fit(self, X, y_enc, **fit_params)

    def partial_fit(self, X, y, classes=None, **fit_params):
        """Train for one more ``max_epochs`` round without re-initialising.

        Parameters and data are checked before anything changes (the classes
        are fixed by the first call); an error during the training itself
        keeps the updates made before it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Class labels.
        classes : array-like, default=None
            All classes; needed on the first call if y lacks some. Later calls
            may repeat it, but not change it.
        **fit_params : dict
            Passed to skorch's ``partial_fit``.

        Returns
        -------
        self : HTAFNetClassifier
        """
        with restore_state_on_error(self):
            self._check_params()
            first = not getattr(self, "initialized_", False) or not hasattr(
                self, "label_encoder_"
            )
            if first:
                X, encoder = self._encode_fit_targets(X, y, classes=classes)
                y_enc = encoder.transform(column_or_1d(y)).astype(np.int64)
                self.label_encoder_ = encoder
                self.initialize()
            else:
                if classes is not None and not np.array_equal(
                    np.unique(np.asarray(classes)), self.classes_
                ):
                    raise ValueError(
                        f"classes={list(classes)!r} is not the same as on the first "
                        f"call to partial_fit: {self.classes_.tolist()!r}."
                    )
                X = self._as_rows(X, reset=False)
                y = column_or_1d(y)
                _check_known_labels(y, self.classes_, "of the first call")
                y_enc = self.label_encoder_.transform(y).astype(np.int64)
            self._check_repulsion_layers()
            with self._training_rng():
                return NeuralNetClassifier.partial_fit(self, X, y_enc, **fit_params)

    def predict_proba(self, X):
        """Class probabilities (softmax of the logits, exact step inside).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        self._check_fitted()
        X = self._as_rows(X, reset=False)
        return NeuralNetClassifier.predict_proba(self, X)

    def predict(self, X):
        """Predict class labels (the original labels, strings included).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]

    def decision_function(self, X):
        """Logits of the net (exact step inside for step-like activations).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        logits : ndarray of shape (n_samples, n_classes) or (n_samples,)
            For two classes, the logit difference of class 1 over class 0,
            as scikit-learn's binary classifiers return it.
        """
        self._check_fitted()
        X = self._as_rows(X, reset=False)
        logits = self._forward_numpy(X)
        if logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        return logits


class HTAFNetRegressor(_HTAFNetMixin, NeuralNetRegressor):
    __doc__ = (
        """Neural-net regressor with HTAF (or any listed) hidden activations.

    The regression twin of :class:`HTAFNetClassifier` (mean squared error),
    for tabular data. ``y`` may be 1-D or 2-D; predictions have the same
    number of dimensions as the ``y`` seen in fit.

    Parameters
    ----------"""
        + _COMMON_PARAMS_DOC
        + """
    criterion : torch loss class, default=torch.nn.MSELoss
        skorch's criterion; it receives the predictions and the float targets."""
        + _PARAMS_DOC_TRAINING
        + _PARAMS_DOC_TAIL
        + """

    Attributes
    ----------
    n_outputs_ : int
        Number of regression targets."""
        + _COMMON_ATTRS_DOC
        + """

    See Also
    --------
    HTAFNetClassifier : The same for classification.

    Notes
    -----
    Standardise X and y first (a ``Pipeline`` with ``StandardScaler`` and
    ``TransformedTargetRegressor``) for best results; the defaults are
    Adam ``lr=1e-3`` with shuffled batches and no internal validation split.
    """
    )

    def __init__(
        self,
        hidden_layer_sizes=(256, 256),
        *,
        activation="htaf",
        alpha0=2.0,
        alpha1=11.0,
        architecture="mlp",
        input_shape=None,
        conv_channels=(16, 32),
        module=None,
        criterion=nn.MSELoss,
        optimizer=torch.optim.Adam,
        lr=1e-3,
        max_epochs=20,
        batch_size=128,
        train_split=None,
        time_steps=4,
        relaxation_gap="auto",
        random_state=None,
        device="cpu",
        verbose=0,
        **kwargs,
    ):
        kwargs.setdefault("iterator_train__shuffle", True)
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
            **kwargs,
        )
        self._init_common(
            hidden_layer_sizes,
            activation,
            alpha0,
            alpha1,
            architecture,
            input_shape,
            conv_channels,
            relaxation_gap,
            random_state,
        )
        self.time_steps = time_steps

    def _n_outputs(self):
        return self.n_outputs_

    def _set_targets_for(self, classes=None, n_outputs=None):
        n_outputs = 1 if n_outputs is None else int(n_outputs)
        if n_outputs < 1:
            raise ValueError(f"n_outputs must be >= 1; got {n_outputs}.")
        self.n_outputs_ = n_outputs
        self._y_ndim = 1 if n_outputs == 1 else 2

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def _prepare_targets(self, X, y, reset):
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y "
                "is None."
            )
        y = np.asarray(y)
        if y.dtype.kind not in "biuf":
            try:
                y = y.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"{type(self).__name__} needs numeric targets; got y of dtype "
                    f"{y.dtype}."
                ) from exc
        if y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D; got shape {y.shape}.")
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity.")
        if len(y) != len(X):
            raise ValueError(
                f"Found input variables with inconsistent numbers of samples: "
                f"X has {len(X)}, y has {len(y)}."
            )
        y2 = y.reshape(len(y), -1).astype(np.float32)
        if reset:
            self._y_ndim = y.ndim
            self.n_outputs_ = y2.shape[1]
        elif y2.shape[1] != self.n_outputs_:
            raise ValueError(
                f"y has {y2.shape[1]} targets, but {type(self).__name__} was "
                f"fitted with {self.n_outputs_}."
            )
        return y2

    def fit(self, X, y, **fit_params):
        """Initialise (unless ``warm_start``) and train the net.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        **fit_params : dict
            Passed to skorch's ``fit``.

        Returns
        -------
        self : HTAFNetRegressor
        """
        # A fit that fails leaves the estimator as it was.
        with restore_state_on_error(self):
            self._check_params()
            warm = self._continues_training()
            X = self._as_rows(X, reset=not warm)
            y2 = self._prepare_targets(X, y, reset=not warm)
            if not warm:
                self.initialize()
            with self._training_rng():
                return NeuralNetRegressor.partial_fit(self, X, y2, **fit_params)

    def partial_fit(self, X, y, **fit_params):
        """Train for one more ``max_epochs`` round without re-initialising.

        Parameters and data are checked before anything changes (the number
        of features and targets is fixed by the first call); an error during
        the training itself keeps the updates made before it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        **fit_params : dict
            Passed to skorch's ``partial_fit``.

        Returns
        -------
        self : HTAFNetRegressor
        """
        with restore_state_on_error(self):
            self._check_params()
            first = not getattr(self, "initialized_", False)
            X = self._as_rows(X, reset=first)
            y2 = self._prepare_targets(X, y, reset=first)
            if first:
                self.initialize()
            with self._training_rng():
                return NeuralNetRegressor.partial_fit(self, X, y2, **fit_params)

    def predict(self, X):
        """Predict targets (exact step inside for step-like activations).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Samples.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        self._check_fitted()
        X = self._as_rows(X, reset=False)
        out = self._forward_numpy(X).reshape(len(X), -1)
        return out.ravel() if self._y_ndim == 1 else out

    @property
    def predict_proba(self):
        """Not available: regressors have no class probabilities."""
        raise AttributeError(
            f"{type(self).__name__} has no predict_proba; it is a regressor."
        )
