"""ICBMClassifier: the implicit concept bottleneck model as a skorch estimator."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from sklearn.base import TransformerMixin
from skorch import NeuralNetClassifier
from skorch.dataset import unpack_data
from skorch.utils import to_tensor
from torch import nn

from sksign._compat import InvalidParameterError
from sksign._docstrings import Substitution
from sksign._shapes import image_shape
from sksign.estimators._base import NetBase
from sksign.estimators._classifier import ClassifierNetMixin
from sksign.estimators._concepts import (
    ConceptRecord,
    check_explain_args,
    check_report_args,
    concept_records,
    concept_table,
)
from sksign.estimators._inference import InferenceModeMixin
from sksign.estimators._params import ICBM_CONSTRAINTS, ICBM_DOCS
from sksign.estimators._training import BatchNormRecalibrationMixin
from sksign.nn import BACKBONES, ICBMNet, infer_input_shape, temporarily_eval

__all__ = ["ConceptRecord", "ICBMClassifier"]


@Substitution(**ICBM_DOCS)
class ICBMClassifier(
    InferenceModeMixin,
    BatchNormRecalibrationMixin,
    TransformerMixin,
    ClassifierNetMixin,
    NetBase,
    NeuralNetClassifier,
):
    """Implicit concept bottleneck model: backbone, binary concepts, linear head.

    The net is ``backbone -> Linear -> concepts -> head``: the concept layer
    of `n_concepts` units is an HTAF in training and the exact step
    ``1[z >= 0]`` at inference (the HTAF paper, ICBM), so every prediction
    goes through a binary concept vector ``c in {{0, 1}}^N``, and a linear
    head reads it. No concept labels are needed: :meth:`explain_concepts`
    splits the classes into those on which a concept fires and those on
    which it does not, and builds a contrastive prompt to name it.

    Shares label encoding, seeding, input validation and the skorch machinery
    with :class:`HTAFNetClassifier` (without sign repulsion).

    Parameters
    ----------
    backbone : {{"mlp", "cnn", "identity", "resnet18", "wrn", "vit", \
"sew_resnet", "bireal"}} or nn.Module, default="mlp"
        Feature extractor ``g``. "mlp": dense layers `hidden_layer_sizes`
        with `backbone_activation`; "cnn": the small CNN of
        :class:`~sksign.nn.SmallCNN` (images, see `input_shape`); the papers'
        image nets by name, their arguments in `backbone_params`;
        "identity": none, for X holding precomputed embeddings of a frozen
        backbone; an ``nn.Module`` instance (for example a pretrained net
        ending in ``nn.Flatten()``) is deep-copied at each fit, so the
        instance passed is never trained. It must map a batch of rows (or of
        images, when X is 4-D or `input_shape` is given) to a
        ``(batch, features)`` tensor.
    backbone_params : dict, default=None
        Arguments of a named image backbone (e.g. ``{{"width": 16}}`` for
        "resnet18"; see :func:`sksign.nn.architectures.factory.architecture_arguments`).
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
    criterion : torch loss class, default=torch.nn.CrossEntropyLoss
        skorch's criterion; it receives the logits and the encoded labels.
    {training}
    {inference}
    {recalibrate_bn}
    {class_weight}
    {tail}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    label_encoder_ : LabelEncoder
        Maps the labels to the net's output columns.
    {fitted}

    See Also
    --------
    HTAFNetClassifier : Nets whose every hidden unit is a bit.
    sksign.nn.ICBMNet : The torch module (children ``backbone``, ``fc``,
        ``concepts``, ``head``).

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

    _parameter_constraints: ClassVar[dict] = dict(ICBM_CONSTRAINTS)
    _plain_params = ("backbone",)

    def __init__(
        self,
        backbone="mlp",
        backbone_params=None,
        *,
        n_concepts=64,
        alpha0=2.0,
        alpha1=11.0,
        hidden_layer_sizes=(256,),
        backbone_activation="relu",
        concept_activation="htaf",
        freeze_backbone=False,
        recalibrate_bn=True,
        inference="step",
        input_shape=None,
        conv_channels=(16, 32),
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.Adam,
        lr=1e-3,
        max_epochs=20,
        batch_size=128,
        train_split=None,
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
        # skorch lists ``module`` among the parameters, so clone passes it
        # back; the net is always built from ``backbone``.
        if kwargs.pop("module", None) is not None:
            raise ValueError(
                f"{type(self).__name__} builds its own module; pass the feature "
                "extractor as backbone=... instead of module=..."
            )
        super().__init__(
            None,
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
        self.backbone = backbone
        self.backbone_params = backbone_params
        self.n_concepts = n_concepts
        self.alpha0 = alpha0
        self.alpha1 = alpha1
        self.hidden_layer_sizes = hidden_layer_sizes
        self.backbone_activation = backbone_activation
        self.concept_activation = concept_activation
        self.freeze_backbone = freeze_backbone
        self.recalibrate_bn = recalibrate_bn
        self.inference = inference
        self.input_shape = input_shape
        self.conv_channels = conv_channels
        self.class_weight = class_weight
        self.relaxation_gap = relaxation_gap
        self.random_state = random_state
        self.augment = augment
        self.mixed_precision = mixed_precision
        self.channels_last = channels_last
        self.checkpoint_dir = checkpoint_dir
        self.dtype = dtype

    # -- parameters and module ---------------------------------------------
    def _check_param_instances(self):
        super()._check_param_instances()
        bb = self.backbone
        if isinstance(bb, type) and issubclass(bb, nn.Module):
            raise InvalidParameterError(
                f"The 'backbone' parameter of {type(self).__name__} must be one of "
                f"{BACKBONES} or an nn.Module instance. Got {bb!r} instead. Pass "
                "an instance, not the class."
            )

    def initialize_module(self):
        """Build the :class:`~sksign.nn.ICBMNet` for the data (skorch's hook).

        Returns
        -------
        self

        Examples
        --------
        >>> from sksign.estimators import ICBMClassifier
        >>> net = ICBMClassifier(n_concepts=4, hidden_layer_sizes=(8,))
        >>> net.initialize_for(3, classes=[0, 1]).module_.fc.out_features
        4
        """
        kwargs = self.get_params_for("module")
        n_features = self.n_features_in_
        shape = self.input_shape or getattr(self, "_image_shape", None)
        if self.backbone == "cnn":
            shape = infer_input_shape(n_features, shape)
        # (H, W) images have one channel
        self.input_shape_ = image_shape(shape)
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
            backbone_kwargs=self.backbone_params,
            **kwargs,
        )
        self.module_ = self._place_module(module)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # transform gives uint8 bits whatever the input dtype.
        tags.transformer_tags.preserves_dtype = []
        return tags

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
            `concept_activation` is not step-like. Bits whatever
            ``inference`` says.

        Examples
        --------
        >>> from sksign.estimators import ICBMClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
        >>> icbm = ICBMClassifier(n_concepts=3, hidden_layer_sizes=(4,),
        ...                       max_epochs=2, random_state=0).fit(X, y)
        >>> icbm.transform(X[:2]).shape, icbm.transform(X).dtype
        ((2, 3), dtype('uint8'))
        """
        X = self._rows(X)
        module = self.module_
        out = []
        with temporarily_eval(module), torch.no_grad():
            dataset = self.get_dataset(X)
            for batch in self.get_iterator(dataset, training=False):
                Xi = to_tensor(unpack_data(batch)[0], device=self.device)
                out.append(module.concept_bits(Xi).cpu().numpy())
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
            One name per concept.

        Examples
        --------
        >>> from sksign.estimators import ICBMClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
        >>> icbm = ICBMClassifier(n_concepts=2, hidden_layer_sizes=(4,),
        ...                       max_epochs=2, random_state=0).fit(X, y)
        >>> icbm.get_feature_names_out().tolist()
        ['concept0', 'concept1']
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

        Examples
        --------
        >>> from sksign.estimators import ICBMClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, ["cat", "dog"] * 4
        >>> icbm = ICBMClassifier(n_concepts=3, hidden_layer_sizes=(4,),
        ...                       max_epochs=2, random_state=0).fit(X, y)
        >>> records = icbm.explain_concepts(X, y, namer=lambda rec: "a name")
        >>> len(records), records[0].name
        (3, 'a name')
        """
        check_explain_args(namer, threshold)
        C = self.transform(X)
        return concept_records(
            C, y, namer, class_names=class_names, threshold=threshold
        )

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
            One row per concept.

        Examples
        --------
        >>> from sksign.estimators import ICBMClassifier
        >>> X, y = [[0.0, 1.0], [1.0, 0.0]] * 4, [0, 1] * 4
        >>> icbm = ICBMClassifier(n_concepts=3, hidden_layer_sizes=(4,),
        ...                       max_epochs=2, random_state=0).fit(X, y)
        >>> icbm.concept_report(X, y, as_frame=True).shape
        (3, 7)
        """
        check_report_args(sort_by, max_concepts)
        records = self.explain_concepts(
            X, y, namer, class_names=class_names, threshold=threshold
        )
        return concept_table(
            records, sort_by=sort_by, max_concepts=max_concepts, as_frame=as_frame
        )
