"""ICBMClassifier: the implicit concept bottleneck model as a skorch estimator."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from numbers import Integral

import numpy as np
import torch
from sklearn.base import TransformerMixin
from skorch import NeuralNetClassifier
from skorch.dataset import unpack_data
from skorch.utils import to_tensor
from torch import nn

from sksign.estimators._htaf_net import HTAFNetClassifier
from sksign.nn.icbm import BACKBONES, ICBMNet, check_n_concepts
from sksign.nn.modules import ACTIVATIONS, infer_input_shape

__all__ = ["ConceptRecord", "ICBMClassifier"]


@dataclasses.dataclass
class ConceptRecord:
    """What :meth:`ICBMClassifier.explain_concepts` says about one concept.

    Attributes
    ----------
    index : int
        Concept unit j (column j of ``transform(X)``).
    firing_rate : float
        Share of all samples on which the concept fires (bit = 1).
    class_rates : dict
        Class label -> share of that class's samples on which it fires.
    activated : list
        G_act: the labels of the classes with ``class_rate >= threshold``.
    non_activated : list
        G_non: the other classes.
    specificity : float
        Mean firing rate over G_act minus mean firing rate over G_non, in
        [0, 1]; 0 when either group is empty. 1 means the concept is a
        function of the class (fires on every sample of G_act and on none of
        G_non).
    status : {"contrastive", "silent", "constant"}
        "contrastive" when both groups are non-empty; "silent" when no class
        reaches the threshold (G_act empty); "constant" when every class does
        (G_non empty). Only contrastive concepts have a class-level meaning.
    prompt : str
        Contrastive naming prompt built from the class names.
    name : str or None
        The name given by the ``namer``; None without one.
    """

    index: int
    firing_rate: float
    class_rates: dict
    activated: list
    non_activated: list
    specificity: float
    status: str
    prompt: str
    name: str | None = None

    def to_dict(self) -> dict:
        """The record as a plain dict."""
        return dataclasses.asdict(self)


def _join(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _naming_prompt(j: int, act: list[str], non: list[str], rate: float) -> str:
    if act and non:
        return (
            f"Concept {j} of a classifier fires on most samples of the classes "
            f"{_join(act)} and on few samples of the classes {_join(non)}. "
            f"What do {_join(act)} share that {_join(non)} lack? "
            "Answer with a short name for that property (at most five words)."
        )
    where = "every class" if not non else "no class"
    return (
        f"Concept {j} of a classifier fires on {rate:.0%} of all samples and on "
        f"most samples of {where}, so it does not separate the classes "
        f"({_join(act or non)}). Answer with a short name for what the samples "
        "it fires on share (at most five words), or 'none'."
    )


class ICBMClassifier(TransformerMixin, HTAFNetClassifier):
    """Implicit concept bottleneck model: backbone, binary concepts, linear head.

    The net is ``backbone -> Linear -> concepts -> head``: the concept layer
    of `n_concepts` units is an HTAF in training and the exact step
    ``1[z >= 0]`` at inference (the HTAF paper, ICBM), so every prediction
    goes through a binary concept vector ``c in {0, 1}^N``, and a linear head
    reads it. No concept labels are needed: :meth:`explain_concepts` splits
    the classes into those on which a concept fires and those on which it
    does not, and builds a contrastive prompt to name it.

    Built on :class:`HTAFNetClassifier` (label encoding, seeding, input
    validation, skorch machinery).

    Parameters
    ----------
    backbone : {"mlp", "cnn", "identity"} or nn.Module, default="mlp"
        Feature extractor ``g``. "mlp": dense layers `hidden_layer_sizes`
        with `backbone_activation`; "cnn": the small CNN of
        :class:`~sksign.nn.modules.SmallCNN` (images, see `input_shape`);
        "identity": none, for X holding precomputed embeddings of a frozen
        backbone; an ``nn.Module`` instance (for example a pretrained net
        ending in ``nn.Flatten()``) is deep-copied at each fit, so the
        instance passed is never trained. It must map a batch of rows (or of
        images, when X is 4-D or `input_shape` is given) to a
        ``(batch, features)`` tensor.
    n_concepts : int, default=64
        Number of binary concept units N.
    alpha0 : float, default=2.0
        HTAF inner scale of the concept layer.
    alpha1 : float, default=11.0
        HTAF outer scale (keep ``alpha0 * alpha1 ~ 22``).
    hidden_layer_sizes : int or tuple of int, default=(256,)
        Dense layers of the "mlp" and "cnn" backbones.
    backbone_activation : str, default="relu"
        Activation inside the built-in backbones (one of "htaf", "ste",
        "scaled_sigmoid", "relu", "silu", "gelu", "tanh").
    concept_activation : str, default="htaf"
        Activation of the concept layer: "htaf" (ICBM); "ste" and
        "scaled_sigmoid" (baselines, exact step at inference too); or a
        plain activation such as "relu" for the reference net without a
        binary bottleneck (``transform`` then gives ``1[z > 0]``).
    freeze_backbone : bool, default=False
        Train only the concept layer and the head; the backbone's weights
        and batch-norm statistics stay as they are.
    input_shape : tuple of int, default=None
        ``(channels, height, width)`` of one image when X holds flat rows
        (the "cnn" backbone, or a module backbone that takes images).
    conv_channels : tuple of int, default=(16, 32)
        Channels of the conv blocks of the "cnn" backbone.
    criterion, optimizer, lr, max_epochs, batch_size, train_split
        As in :class:`HTAFNetClassifier` (Adam, ``lr=1e-3``, 20 epochs,
        batches of 128, no validation split).
    relaxation_gap : bool or "auto", default="auto"
        See :class:`HTAFNetClassifier`.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation and the batch order.
    device : str or torch.device, default="cpu"
        Where the net trains.
    verbose : int, default=0
        skorch's progress output when > 0.
    **kwargs
        Any other skorch parameter (``callbacks``, ``optimizer__*``, ...).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    module_ : ICBMNet
        The fitted network (children ``backbone``, ``fc``, ``concepts``,
        ``head``).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names, when X was a DataFrame with string column names.
    input_shape_ : tuple of int or None
        Image shape used by the backbone.
    history_ : skorch.History
        Per-epoch losses (and the relaxation gap when recorded).

    See Also
    --------
    HTAFNetClassifier : Nets whose every hidden unit is a bit.
    sksign.nn.icbm.ICBMNet : The torch module.

    Notes
    -----
    Grouping rule of :meth:`explain_concepts`: class c is in the activated
    group G_act of concept j iff the concept fires on at least `threshold`
    (default one half) of the samples of class c, i.e. it is on for a
    typical member of the class; the class-specificity score is the mean
    firing rate over G_act minus that over G_non.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import ICBMClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = ICBMClassifier(n_concepts=16, hidden_layer_sizes=(64,), max_epochs=2,
    ...                      random_state=0).fit(X / 16, y)
    >>> clf.transform(X[:2] / 16).shape
    (2, 16)
    """

    def __init__(
        self,
        backbone="mlp",
        *,
        n_concepts=64,
        alpha0=2.0,
        alpha1=11.0,
        hidden_layer_sizes=(256,),
        backbone_activation="relu",
        concept_activation="htaf",
        freeze_backbone=False,
        input_shape=None,
        conv_channels=(16, 32),
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.Adam,
        lr=1e-3,
        max_epochs=20,
        batch_size=128,
        train_split=None,
        relaxation_gap="auto",
        random_state=None,
        device="cpu",
        verbose=0,
        **kwargs,
    ):
        kwargs.setdefault("iterator_train__shuffle", True)
        # skorch lists ``module`` among the parameters, so clone passes it
        # back; the net is always built from ``backbone``.
        if kwargs.pop("module", None) is not None:
            raise ValueError(
                f"{type(self).__name__} builds its own module; pass the feature "
                "extractor as backbone=... instead of module=..."
            )
        NeuralNetClassifier.__init__(
            self,
            None,
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
        self.backbone = backbone
        self.n_concepts = n_concepts
        self.alpha0 = alpha0
        self.alpha1 = alpha1
        self.hidden_layer_sizes = hidden_layer_sizes
        self.backbone_activation = backbone_activation
        self.concept_activation = concept_activation
        self.freeze_backbone = freeze_backbone
        self.input_shape = input_shape
        self.conv_channels = conv_channels
        self.relaxation_gap = relaxation_gap
        self.random_state = random_state

    # -- parameters and module ---------------------------------------------
    def __setattr__(self, name, attr):
        if name == "backbone":
            # A parameter (a template deep-copied at each fit), not one of
            # skorch's torch components: skip skorch's registration, which
            # refuses nn.Module values outside initialize().
            object.__setattr__(self, name, attr)
            return
        super().__setattr__(name, attr)

    def _check_params(self):
        name = type(self).__name__
        bb = self.backbone
        if not (isinstance(bb, nn.Module) or (isinstance(bb, str) and bb in BACKBONES)):
            hint = (
                " Pass an instance, not the class."
                if isinstance(bb, type) and issubclass(bb, nn.Module)
                else ""
            )
            raise ValueError(
                f"The 'backbone' parameter of {name} must be one of {BACKBONES} or "
                f"an nn.Module instance. Got {bb!r} instead.{hint}"
            )
        check_n_concepts(self.n_concepts)
        for pname in ("backbone_activation", "concept_activation"):
            value = getattr(self, pname)
            if value not in ACTIVATIONS:
                raise ValueError(
                    f"The {pname!r} parameter of {name} must be one of "
                    f"{ACTIVATIONS}. Got {value!r} instead."
                )
        if self.freeze_backbone not in (True, False):
            raise ValueError(
                f"The 'freeze_backbone' parameter of {name} must be a bool. Got "
                f"{self.freeze_backbone!r} instead."
            )
        self._check_common_params()

    def initialize_module(self):
        kwargs = self.get_params_for("module")
        n_features = self.n_features_in_
        image_shape = getattr(self, "_image_shape", None)
        shape = self.input_shape or image_shape
        if self.backbone == "cnn":
            shape = infer_input_shape(n_features, shape)
        elif shape is not None and len(shape) == 2:
            shape = (1, *shape)
        self.input_shape_ = tuple(shape) if shape is not None else None
        module = ICBMNet(
            self.backbone,
            n_features,
            self.n_concepts,
            self._n_outputs(),
            hidden_layer_sizes=self.hidden_layer_sizes,
            backbone_activation=self.backbone_activation,
            concept_activation=self.concept_activation,
            alpha0=self.alpha0,
            alpha1=self.alpha1,
            input_shape=self.input_shape_,
            conv_channels=self.conv_channels,
            freeze_backbone=self.freeze_backbone,
            **kwargs,
        )
        self.module_ = module.to(self.device)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # transform gives uint8 bits whatever the input dtype.
        tags.transformer_tags.preserves_dtype = []
        return tags

    def _check_repulsion_layers(self):
        # No sign repulsion in ICBM (see train_step_single).
        return None

    def train_step_single(self, batch, **fit_params):
        # No sign repulsion in ICBM: skip HTAFNetClassifier's hook machinery.
        return NeuralNetClassifier.train_step_single(self, batch, **fit_params)

    # -- concepts -------------------------------------------------------------
    def transform(self, X):
        """Binary concept matrix: the exact-step concept bits of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Samples.

        Returns
        -------
        concepts : ndarray of shape (n_samples, n_concepts), dtype uint8
            ``1[z >= 0]`` for the pre-activations z of the concept units
            (the outputs of the step at inference); ``1[z > 0]`` when
            `concept_activation` is not step-like.
        """
        self._check_fitted()
        X = self._as_rows(X, reset=False)
        module = self.module_
        was_training = module.training
        out = []
        try:
            module.eval()
            dataset = self.get_dataset(X)
            with torch.no_grad():
                for batch in self.get_iterator(dataset, training=False):
                    Xi = to_tensor(unpack_data(batch)[0], device=self.device)
                    out.append(module.concept_bits(Xi).cpu().numpy())
        finally:
            module.train(was_training)
        if not out:
            return np.zeros((0, self.n_concepts), dtype=np.uint8)
        return np.concatenate(out).astype(np.uint8)

    def get_feature_names_out(self, input_features=None):
        """Names of the concept columns: ``concept0, concept1, ...``.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Ignored.

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        self._check_fitted()
        return np.asarray([f"concept{j}" for j in range(self.n_concepts)], dtype=object)

    def explain_concepts(self, X, y, namer=None, *, class_names=None, threshold=0.5):
        """One record per concept: which classes it fires on, and a prompt.

        Class c is in the activated group G_act of concept j iff the concept
        fires on at least `threshold` of the samples of class c in (X, y);
        the other classes form G_non. Nothing is sent anywhere unless a
        `namer` is given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples (typically held-out data).
        y : array-like of shape (n_samples,)
            Their class labels (any labels; the groups are built from the
            classes present in y).
        namer : callable or None, default=None
            Called once per concept with its :class:`ConceptRecord` (``name``
            still None); its return value, as a str, becomes the record's
            ``name``. An LLM client that answers ``record.prompt`` fits here.
        class_names : mapping or sequence of str, default=None
            Names used in the prompts: a mapping label -> name, or a sequence
            aligned with the sorted labels of y. Default: ``str(label)``.
        threshold : float, default=0.5
            Firing rate from which a class counts as activated, in (0, 1].

        Returns
        -------
        records : list of ConceptRecord
            In concept order.
        """
        threshold = float(threshold)
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must lie in (0, 1]; got {threshold!r}.")
        if namer is not None and not callable(namer):
            raise TypeError(f"namer must be a callable or None; got {namer!r}.")
        C = self.transform(X)
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1 or len(y) != len(C):
            raise ValueError(
                f"y must be 1-D with one label per sample of X ({len(C)}); got "
                f"shape {y.shape}."
            )
        if len(C) == 0:
            raise ValueError("explain_concepts needs at least one sample.")
        labels, inverse = np.unique(y, return_inverse=True)
        names = self._class_names(labels, class_names)
        counts = np.bincount(inverse, minlength=len(labels)).astype(np.float64)
        fired = np.zeros((len(labels), C.shape[1]), dtype=np.float64)
        np.add.at(fired, inverse, C)
        rates = fired / counts[:, None]
        overall = C.mean(axis=0, dtype=np.float64)
        records = []
        for j in range(C.shape[1]):
            on = rates[:, j] >= threshold
            act = [_py(v) for v in labels[on]]
            non = [_py(v) for v in labels[~on]]
            if on.any() and (~on).any():
                spec = float(rates[on, j].mean() - rates[~on, j].mean())
                status = "contrastive"
            else:
                spec, status = 0.0, "constant" if on.all() else "silent"
            rec = ConceptRecord(
                index=j,
                firing_rate=float(overall[j]),
                class_rates={_py(c): float(r) for c, r in zip(labels, rates[:, j])},
                activated=act,
                non_activated=non,
                specificity=spec,
                status=status,
                prompt=_naming_prompt(
                    j,
                    [n for n, o in zip(names, on) if o],
                    [n for n, o in zip(names, on) if not o],
                    float(overall[j]),
                ),
            )
            if namer is not None:
                rec.name = str(namer(rec))
            records.append(rec)
        return records

    @staticmethod
    def _class_names(labels, class_names):
        if class_names is None:
            return [str(c) for c in labels]
        if isinstance(class_names, Mapping):
            missing = [c for c in labels if _py(c) not in class_names]
            if missing:
                raise ValueError(f"class_names lacks the labels {missing!r}.")
            return [str(class_names[_py(c)]) for c in labels]
        names = [str(n) for n in class_names]
        if len(names) != len(labels):
            raise ValueError(
                f"class_names has {len(names)} names for {len(labels)} classes "
                f"({list(labels)!r})."
            )
        return names

    def concept_report(
        self,
        X,
        y,
        namer=None,
        *,
        class_names=None,
        threshold=0.5,
        sort_by="specificity",
        max_concepts=None,
        as_frame=False,
    ):
        """A readable table of the concepts (see :meth:`explain_concepts`).

        Parameters
        ----------
        X, y, namer, class_names, threshold
            As in :meth:`explain_concepts`.
        sort_by : {"specificity", "index", "firing_rate"}, default="specificity"
            Row order (decreasing specificity / firing rate, or by index).
        max_concepts : int or None, default=None
            Show only the first rows.
        as_frame : bool, default=False
            Return a pandas DataFrame instead of a string.

        Returns
        -------
        report : str or pandas.DataFrame
        """
        if sort_by not in ("specificity", "index", "firing_rate"):
            raise ValueError(
                "sort_by must be 'specificity', 'index' or 'firing_rate'; got "
                f"{sort_by!r}."
            )
        if max_concepts is not None and (
            not isinstance(max_concepts, Integral) or max_concepts < 1
        ):
            raise ValueError(f"max_concepts must be an int >= 1; got {max_concepts!r}.")
        records = self.explain_concepts(
            X, y, namer, class_names=class_names, threshold=threshold
        )
        if sort_by != "index":
            records = sorted(records, key=lambda r: -getattr(r, sort_by))
        records = records[:max_concepts]
        rows = [
            {
                "concept": r.index,
                "firing_rate": round(r.firing_rate, 3),
                "specificity": round(r.specificity, 3),
                "status": r.status,
                "activated": " ".join(map(str, r.activated)),
                "non_activated": " ".join(map(str, r.non_activated)),
                "name": "" if r.name is None else r.name,
            }
            for r in records
        ]
        if as_frame:
            import pandas as pd

            return pd.DataFrame(rows, columns=list(_REPORT_COLUMNS))
        return _format_table(rows)


_REPORT_COLUMNS = (
    "concept",
    "firing_rate",
    "specificity",
    "status",
    "activated",
    "non_activated",
    "name",
)


def _py(value):
    """numpy scalar -> Python scalar (readable records, hashable keys)."""
    return value.item() if isinstance(value, np.generic) else value


def _format_table(rows: list[dict], columns: tuple = _REPORT_COLUMNS) -> str:
    header = [str(c) for c in columns]
    body = [[str(r[c]) for c in columns] for r in rows]
    widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    sep = "  ".join("-" * w for w in widths)
    out = [line.rstrip(), sep]
    out += ["  ".join(v.ljust(w) for v, w in zip(b, widths)).rstrip() for b in body]
    return "\n".join(out)
