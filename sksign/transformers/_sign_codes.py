"""SignCodeTransformer: the sign code of any fitted net as a feature matrix."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from copy import deepcopy
from numbers import Integral
from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from sksign._adapter import torch_module, unwrap_frozen
from sksign._compat import (
    HasMethods,
    Interval,
    StrOptions,
    _check_feature_names_in,
    _fit_context,
    _get_output_config,
)
from sksign._shapes import split_sample_shape
from sksign._sklearn_mlp import MLP_TYPES
from sksign._utils import (
    is_batch_iterator,
    reject_batch_iterator,
    restore_state_on_error,
    stream_batches,
)
from sksign.distributed import is_dask_array, transform_blocks
from sksign.estimators import HTAFNetClassifier
from sksign.nn.hooks import CONV_POOLS, RESIDUAL_MODES, TOKEN_POOLS
from sksign.transformers._reading import (
    _NetReader,
    _reject_empty_or_text,
)

__all__ = ["SignCodeTransformer"]


def _default_estimator(random_state=None):
    return HTAFNetClassifier(
        hidden_layer_sizes=(128,), activation="relu", random_state=random_state
    )


class SignCodeTransformer(_NetReader, TransformerMixin, BaseEstimator):
    """Sign code of a fitted net: one bit per hidden unit, ``1[z > 0]``.

    For a sign-preserving activation ``phi`` every hidden unit splits as
    ``h = phi(z) = S * M`` with ``S = sgn(z)`` (the Sign Code paper). This
    transformer runs the net once over X and returns the sign bits ``S`` of
    the selected layers: bit 1 iff the pre-activation ``z > 0``, else 0
    (ReLU's zero outputs give 0). Works like
    :class:`~sklearn.feature_selection.SelectFromModel`: with
    ``prefit=True`` it reads an already fitted net, otherwise it clones and
    fits `estimator`.

    Parameters
    ----------
    estimator : estimator or nn.Module, default=None
        The net to read:

        - an sksign net (:class:`~sksign.estimators.HTAFNetClassifier`, ...)
          or any skorch net (its fitted ``module_`` is read);
        - a bare torch ``nn.Module`` (always taken as already trained, as if
          ``prefit=True``);
        - scikit-learn's :class:`~sklearn.neural_network.MLPClassifier` or
          :class:`~sklearn.neural_network.MLPRegressor` (the forward pass is
          recomputed in float64 from ``coefs_`` and ``intercepts_``; layers
          are called ``hidden0``, ``hidden1``, ...).

        None fits ``HTAFNetClassifier(hidden_layer_sizes=(128,),
        activation="relu")``.
    layers : "last", "all", str, list or module type, default="last"
        Layers whose signs make the code: "last" (the last activation
        module), "all", a module name or a list of names from
        ``named_modules()`` (fnmatch wildcards such as
        ``"encoder.layer.*.intermediate.*"`` allowed), or a module type
        (``nn.ReLU``, a residual block class). The bit of an activation
        module is the sign of its INPUT; that of any other module (a Linear
        or Conv layer, for nets that call ``F.relu``) the sign of its
        OUTPUT. A module called several times per forward pass names its
        calls ``name``, ``name#1``, ... in every mode, and ``"name#1"``
        selects that call alone, so that a fitted ``layers_`` passed back
        gives the same code. See :func:`sksign.nn.hooks.record_signs`.
    prefit : bool, default=False
        Whether `estimator` is already fitted. If True, ``fit`` checks that
        it is and stores a deep copy; if False it fits a clone.
    output : {"bits", "signs", "packed"}, default="bits"
        "bits": uint8 0/1; "signs": int8 -1/+1; "packed": uint8 with 8 bits
        per byte, most significant bit first (as :func:`numpy.packbits`),
        ``ceil(n_bits_ / 8)`` columns, the last one zero-padded.
    conv_pool : {"quadrant", "flatten"}, default="quadrant"
        Conv maps (N, C, H, W): the majority sign per channel and 2x2
        quadrant (ties to +1; 4C bits; for an odd height or width the middle
        row or column belongs to both halves), or every position.
    residual : {"int", "out", "both"}, default="out"
        Codes of a selected module that contains activation modules (a
        residual block): S_out (the sign after the residual addition and its
        activation), S_int (the branch's hidden units) or both.
    token_pool : {"first", "majority"} or None, default=None
        Token activations (N, T, U), as in transformers and ViTs: the first
        token (CLS) or the majority sign over the tokens (ties to +1;
        padding excluded when ``forward_kwargs`` returns an
        ``attention_mask``). Selected layers without a token axis (a
        pooler's (N, U) output, with ``layers="all"``) keep their units; a
        token_pool with no token layer selected is an error. None on token
        layers gives token-level codes: one row per real token (padding
        left out as above; see :meth:`transform_tokens`, which also gives
        each row's sequence and position), and then every selected layer
        must have the token axis.
    forward_kwargs : callable, default=None
        For models whose forward does not take one tensor: called with a
        batch of X as a tensor on the net's device and returning the keyword
        arguments of the forward (``module(**forward_kwargs(batch))``). In
        that case integer X (token ids) passes through as int64 and floats
        as float32.
    allow_non_sign_preserving : bool, default=False
        Accept layers whose activation is not sign-preserving (sigmoid,
        softplus, logistic MLPs): the sign of their input is recorded.
    batch_size : int, default=256
        Rows per forward pass; bounds the memory used beyond the output.
    device : str or torch.device, default=None
        Where the forward pass runs. None uses the net's own device (that of
        its parameters; the CPU for a scikit-learn MLP); otherwise the fitted
        copy's module (a scikit-learn MLP's float64 torch copy) is moved there.
    random_state : int, RandomState instance or None, default=None
        Seeds the default net (``estimator=None``) so that the same value
        gives the same codes; a given estimator keeps its own seed.

    Attributes
    ----------
    estimator_ : estimator or nn.Module
        The fitted net that is read (a deep copy when ``prefit=True``).
    layers_ : list of str
        Names of the recorded codes in the order of their bits (call `k` of
        a module called several times per forward is ``name#k``, also with
        ``layers="last"``; a residual block's S_out is named after the
        block, its S_int after the activations inside). Passed back as
        `layers`, it gives the same codes and feature names.
    n_bits_ : int
        Number of bits per sample (per token for token-level codes).
    per_token_ : bool
        Whether the codes are token-level (``token_pool=None`` on token
        layers): ``transform`` then gives one row per real token.
    n_features_in_ : int
        Number of features seen during fit (the flat size of a sample when
        the samples are images or other arrays).
    sample_shape_ : tuple of int or None
        Shape of one sample when X had more than two axes at fit (images
        ``(C, H, W)``, say), else None. A bare module (or a plain skorch net)
        is fed batches of that shape; sksign's nets and scikit-learn's MLPs
        take the flat rows.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of X, when X was a DataFrame with string column names.

    See Also
    --------
    sksign.nn.hooks.record_signs : The context manager underneath.
    sklearn.feature_selection.SelectFromModel : The same prefit convention.

    Notes
    -----
    Bits are computed inside forward hooks (``z > 0``, then pooling) and only
    bits leave the net's device, so a transform costs about one forward pass.
    A numpy array, memory-mapped ones included, is read one batch at a time.
    Hooks are always removed and the net's train/eval mode restored, also
    when the forward pass raises.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neural_network import MLPClassifier
    >>> from sksign.transformers import SignCodeTransformer
    >>> rng = np.random.RandomState(0)
    >>> X, y = rng.randn(40, 4), rng.randint(0, 2, 40)
    >>> mlp = MLPClassifier((6, 5), max_iter=20, random_state=0).fit(X, y)
    >>> codes = SignCodeTransformer(mlp, layers="all", prefit=True).fit_transform(X)
    >>> codes.shape, codes.dtype
    ((40, 11), dtype('uint8'))
    """

    _parameter_constraints: ClassVar[dict] = {
        "estimator": [HasMethods(["fit"]), nn.Module, None],
        "layers": [str, list, tuple, type],
        "prefit": ["boolean"],
        "output": [StrOptions({"bits", "signs", "packed"})],
        "conv_pool": [StrOptions(set(CONV_POOLS))],
        "residual": [StrOptions(set(RESIDUAL_MODES))],
        "token_pool": [StrOptions(set(TOKEN_POOLS)), None],
        "forward_kwargs": [callable, None],
        "allow_non_sign_preserving": ["boolean"],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "device": [str, torch.device, None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        layers="last",
        prefit=False,
        output="bits",
        conv_pool="quadrant",
        residual="out",
        token_pool=None,
        forward_kwargs=None,
        allow_non_sign_preserving=False,
        batch_size=256,
        device=None,
        random_state=None,
    ):
        self.estimator = estimator
        self.layers = layers
        self.prefit = prefit
        self.output = output
        self.conv_pool = conv_pool
        self.residual = residual
        self.token_pool = token_pool
        self.forward_kwargs = forward_kwargs
        self.allow_non_sign_preserving = allow_non_sign_preserving
        self.batch_size = batch_size
        self.device = device
        self.random_state = random_state

    # -- fit -----------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None, **fit_params):
        """Fit (or check) the net and record which bits the code holds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, ...)
            Training data; DataFrames keep their column names.
        y : array-like of shape (n_samples,), default=None
            Targets, needed to fit the net when ``prefit=False``.
        **fit_params : dict
            Passed to the estimator's ``fit`` when ``prefit=False``.

        Returns
        -------
        self : SignCodeTransformer
        """
        with restore_state_on_error(self):
            return self._fit(X, y, **fit_params)

    def _fit(self, X, y=None, **fit_params):
        reject_batch_iterator(X, "SignCodeTransformer.fit", "transform")
        est = self.estimator
        if isinstance(est, nn.Module):
            X = self._check_X(X, est, reset=True)
            fitted = deepcopy(est)
        elif self.prefit:
            if est is None:
                raise ValueError(
                    "prefit=True needs a fitted estimator, but estimator=None. "
                    "Pass the fitted net or use prefit=False."
                )
            try:
                check_is_fitted(est)
            except NotFittedError as exc:
                raise NotFittedError(
                    f"The estimator {type(est).__name__} passed to "
                    "SignCodeTransformer with prefit=True is not fitted. If you "
                    "fitted it, a clone dropped the fit: GridSearchCV, "
                    "cross_validate and cross_val_score clone every step, and "
                    "clone copies a net's parameters, not its fitted weights. "
                    "There, wrap the fitted net in "
                    "sklearn.frozen.FrozenEstimator (its clone keeps the fit), or "
                    "use prefit=False to let the transformer fit a clone of the "
                    "net on each training split. Otherwise fit the net first."
                ) from exc
            X = self._check_X(X, est, reset=True)
            fitted = deepcopy(est)
        else:
            base = _default_estimator(self.random_state) if est is None else est
            _reject_empty_or_text(X)
            rows, shape = split_sample_shape(X)
            self.sample_shape_ = shape
            rows = validate_data(self, rows, dtype=self._fit_dtype(base))
            # the net sees the samples in their own shape (images stay images)
            data = rows if shape is None else rows.reshape(len(rows), *shape)
            fitted = clone(base).fit(data, y, **fit_params)
            X = rows
        fitted = unwrap_frozen(fitted)
        self._check_readable(fitted)
        n_net = getattr(fitted, "n_features_in_", None)
        if n_net is not None and n_net != self.n_features_in_:
            raise ValueError(
                f"X has {self.n_features_in_} features, but the estimator "
                f"{type(fitted).__name__} was fitted with {n_net} features."
            )
        self._mlp_torch = None
        if isinstance(fitted, MLP_TYPES):
            # the float64 torch copy of its forward, made once (not per batch)
            self._mlp_torch = torch_module(fitted, readout=False)
        if self.device is not None:
            (self._mlp_torch or torch_module(fitted)).to(self.device)
        self.estimator_ = fitted
        layers, names, per_token = self._probe(X[: min(2, len(X))])
        self.layers_ = layers
        self.per_token_ = per_token
        self._feature_names = names
        self.n_bits_ = len(names)
        self._n_features_out = (
            -(-self.n_bits_ // 8) if self.output == "packed" else self.n_bits_
        )
        return self

    def transform(self, X):
        """Sign code of each row of X (of each real token: see below).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, ...), \
or iterator of arrays
            Samples. A numpy array (a memmap too) is converted one batch at a
            time, so peak memory stays about the output plus one batch. A
            :class:`dask.array.Array` chunked by rows gives a lazy Dask array
            of codes with the same row chunks: the fitted net is sent once to
            each worker and run on each block. An
            iterator of row batches (a generator, say) gives a generator of
            their codes, one array per batch, computed as it is consumed: the
            memory then stays that of one batch, whatever the number of
            batches, and the codes can stream into
            :meth:`SignKNNClassifier.predict
            <sksign.estimators.SignKNNClassifier.predict>` in a Pipeline.

        Returns
        -------
        codes : ndarray of shape (n_samples, n_bits_) or (n_samples, ceil(n_bits_ / 8))
            uint8 bits, int8 signs or packed uint8 bytes (see ``output``); for
            an iterator, a generator of such arrays; for a Dask array, a lazy
            Dask array. For token-level codes (``per_token_``) one row per
            real token instead, as in :meth:`transform_tokens`, which also
            says which sequence and token each row is.
        """
        check_is_fitted(self)
        if is_batch_iterator(X):
            container = _get_output_config("transform", self)["dense"]
            if container != "default":
                raise ValueError(
                    "transform was given an iterator of batches, which gives a "
                    f"generator of code batches, but set_output(transform="
                    f"{container!r}) asks for one container; pass an array or "
                    "use set_output(transform='default')."
                )
            return stream_batches(self._transform_array, X)
        if is_dask_array(X):
            self._reject_dask_tokens()
            container = _get_output_config("transform", self)["dense"]
            if container != "default":
                raise ValueError(
                    "transform was given a Dask array, which gives a Dask array "
                    f"of codes, but set_output(transform={container!r}) asks for "
                    "another container; use set_output(transform='default')."
                )
            return transform_blocks(self, X)
        return self._transform_array(X)

    def transform_tokens(self, X):
        """Token-level codes of X, and the (sequence, token) of each row.

        With ``token_pool=None`` on layers with a token axis (``per_token_``
        is True) the code is read per token: one row per real token of each
        sequence (padding, where ``forward_kwargs`` returns an
        ``attention_mask``, is left out), sequence by sequence and tokens in
        order. ``transform`` returns the same rows; this method also returns
        where each row comes from. It is a method rather than an attribute
        set by ``transform`` because a scikit-learn transform must return
        one 2-D array and leave the fitted estimator unchanged (a stored
        index would also be wrong after the next call, or across threads).

        In a Pipeline, the token rows feed steps that need no ``y`` (PCA,
        clustering) or the k-NN of :mod:`sksign.estimators` fitted on
        per-token targets, made with the index: ``y_tokens = y[index[:, 0]]``
        (a label per sequence) or ``tags[index[:, 0], index[:, 1]]`` (one
        per token position). A Pipeline that passes a ``y`` per sequence to
        a later step needs ``token_pool="first"`` or ``"majority"`` instead.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or iterator of arrays
            Samples (token ids from
            :func:`~sksign.transformers.tokenize_to_array`, for a Hugging
            Face model), as in :meth:`transform`. An iterator of row batches
            (a generator over a memmap, say) gives a generator of ``(codes,
            index)`` per batch, computed as it is consumed: memory stays that
            of one batch, however long the corpus. The index then counts the
            sequences across batches.

        Returns
        -------
        codes : ndarray of shape (n_tokens, n_bits_) or (n_tokens, ceil(n_bits_ / 8))
            The code of each real token (see ``output``).
        index : ndarray of shape (n_tokens, 2), dtype int64
            ``(sequence, token position)`` of each row: the row of X and the
            token's column (its position in the model's token axis).

        Examples
        --------
        >>> import numpy as np
        >>> import torch
        >>> from torch import nn
        >>> from sksign.transformers import hf_sign_code_transformer
        >>> class TinyEncoder(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.embed = nn.Embedding(128, 8)
        ...         self.act = nn.GELU()
        ...     def forward(self, input_ids, attention_mask):
        ...         return self.act(self.embed(input_ids))
        >>> _ = torch.manual_seed(0)
        >>> X = np.array([[101, 7, 102, 0], [101, 9, 12, 102]])  # 0 pads
        >>> sct = hf_sign_code_transformer(
        ...     TinyEncoder(), pad_token_id=0, layers="act", token_pool=None
        ... ).fit(X)
        >>> codes, index = sct.transform_tokens(X)
        >>> codes.shape, index.tolist()
        ((7, 8), [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [1, 3]])
        """
        check_is_fitted(self)
        if not self.per_token_:
            raise ValueError(
                "transform_tokens reads token-level codes, but this "
                f"{type(self).__name__} gives one code per sample (token_pool="
                f"{self.token_pool!r}"
                + ("" if self.token_pool else ", on layers without a token axis")
                + "). Use token_pool=None on layers with a token axis (batch, "
                "tokens, units), or transform."
            )
        if is_batch_iterator(X):
            return self._stream_tokens(X)
        if is_dask_array(X):
            self._reject_dask_tokens()
        codes, index, _ = self._token_codes(X)
        return codes, index

    def _stream_tokens(self, batches):
        start = 0
        for batch in batches:
            codes, index, n = self._token_codes(batch, start)
            start += n
            yield codes, index

    def _reject_dask_tokens(self):
        if self.per_token_:
            raise ValueError(
                "token-level codes (token_pool=None) of a Dask array are not "
                "supported: the rows of a block depend on its padding. Pass an "
                "iterator of row batches to transform_tokens instead."
            )

    def _encode(self, bits):
        """Bits (n, n_bits) bool as the rows of ``output``."""
        if self.output == "packed":
            return np.packbits(bits, axis=1)
        if self.output == "signs":
            return np.subtract(np.multiply(bits, 2, dtype=np.int8), 1)
        return bits.view(np.uint8)

    def _check_layers(self, rec):
        if rec.layers != self.layers_:
            raise RuntimeError(
                f"the net gave the layers {rec.layers}, but {self.layers_} at fit "
                "time; was the module changed after fit?"
            )

    def _token_codes(self, X, start=0):
        """``(codes, index, n_sequences)`` of token-level codes, sequence
        indices counted from `start`."""
        X = self._check_X(X, self.estimator_, reset=False)
        codes, index = [], []

        def write(rows, bits, rec, idx):
            self._check_layers(rec)
            codes.append(self._encode(bits))
            index.append(idx)

        self._run_torch(X, write, start)
        return np.concatenate(codes), np.concatenate(index), X.shape[0]

    def _transform_array(self, X):
        if self.per_token_:
            return self._token_codes(X)[0]
        X = self._check_X(X, self.estimator_, reset=False)
        n = X.shape[0]
        if self.output == "packed":
            out = np.empty((n, -(-self.n_bits_ // 8)), dtype=np.uint8)
        else:
            dtype = np.int8 if self.output == "signs" else np.uint8
            out = np.empty((n, self.n_bits_), dtype=dtype)

        def write(rows, bits, rec, index):
            self._check_layers(rec)
            out[rows] = self._encode(bits)

        self._run_torch(X, write)
        return out

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns.

        Parameters
        ----------
        input_features : array-like of str, default=None
            Only checked against ``feature_names_in_``; the names do not
            depend on it.

        Returns
        -------
        feature_names_out : ndarray of str objects
            ``<layer>_<unit>`` per bit (``<layer>_c{channel}q{quadrant}`` for
            quadrant-pooled conv maps); ``signcodetransformer0``, ... per
            byte for ``output="packed"``.
        """
        check_is_fitted(self, "n_bits_")
        _check_feature_names_in(self, input_features, generate_names=False)
        if self.output == "packed":
            names = [f"signcodetransformer{i}" for i in range(self._n_features_out)]
        else:
            names = self._feature_names
        return np.asarray(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        est = self.estimator
        is_module = isinstance(est, nn.Module)
        tags.target_tags.required = not self.prefit and not is_module
        if est is None:
            tags.non_deterministic = self.random_state is None
        elif not is_module:
            tags.non_deterministic = get_tags(est).non_deterministic
        return tags
