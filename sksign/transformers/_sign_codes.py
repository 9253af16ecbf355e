"""SignCodeTransformer: the sign code of any fitted net as a feature matrix."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import fnmatch
from copy import deepcopy
from numbers import Integral
from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import gen_batches, get_tags
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from sksign._adapter import (
    SKSIGN_NETS,
    device_and_dtype,
    is_torch_net,
    to_tensor,
    torch_module,
)
from sksign._compat import (
    HasMethods,
    Interval,
    StrOptions,
    _check_feature_names_in,
    _fit_context,
    _get_output_config,
)
from sksign._sklearn_mlp import (
    MLP_TYPES,
    SIGN_PRESERVING_ACTIVATIONS,
    hidden_layer_names,
)
from sksign._utils import (
    is_batch_iterator,
    reject_batch_iterator,
    restore_state_on_error,
    stream_batches,
)
from sksign.distributed import is_dask_array
from sksign.distributed._transform import transform_blocks
from sksign.estimators import HTAFNetClassifier
from sksign.nn import record_signs
from sksign.nn.hooks import CONV_POOLS, RESIDUAL_MODES, TOKEN_POOLS

__all__ = ["SignCodeTransformer"]


def _default_estimator(random_state=None):
    return HTAFNetClassifier(
        hidden_layer_sizes=(128,), activation="relu", random_state=random_state
    )


def _same_type_error(exc, message):
    """``type(exc)(message)``, or None when that class cannot be built so."""
    try:
        return type(exc)(message)
    except Exception:
        return None


def _split_sample_shape(X):
    """``(rows, sample_shape)``: an array of samples with more than one axis
    as a 2-D view of flat rows, and the samples' shape (None for rows)."""
    if isinstance(X, np.ndarray) or (
        isinstance(X, list | tuple) and X and not is_batch_iterator(X)
    ):
        arr = X if isinstance(X, np.ndarray) else np.asarray(X)
        if arr.ndim > 2:
            return arr.reshape(arr.shape[0], -1), tuple(arr.shape[1:])
    return X, None


class SignCodeTransformer(TransformerMixin, BaseEstimator):
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
        OUTPUT. See :func:`sksign.nn.hooks.record_signs`.
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
        token_pool with no token layer selected is an error.
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
        Names of the recorded codes in the order of their bits (a module
        called twice per forward gives ``name#1``; a residual block's S_out
        is named after the block, its S_int after the activations inside).
    n_bits_ : int
        Number of bits per sample.
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
    def _fit_dtype(self, est):
        if self.forward_kwargs is not None:
            return "numeric"
        if isinstance(est, MLP_TYPES):
            return [np.float64, np.float32]
        return np.float32

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
                    "SignCodeTransformer with prefit=True is not fitted yet. Fit "
                    "it first, or use prefit=False to let the transformer fit a "
                    "clone."
                ) from exc
            X = self._check_X(X, est, reset=True)
            fitted = deepcopy(est)
        else:
            base = _default_estimator(self.random_state) if est is None else est
            rows, shape = _split_sample_shape(X)
            self.sample_shape_ = shape
            rows = validate_data(self, rows, dtype=self._fit_dtype(base))
            # the net sees the samples in their own shape (images stay images)
            data = rows if shape is None else rows.reshape(len(rows), *shape)
            fitted = clone(base).fit(data, y, **fit_params)
            X = rows
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
        layers, names = self._probe(X[: min(2, len(X))])
        self.layers_ = layers
        self._feature_names = names
        self.n_bits_ = len(names)
        self._n_features_out = (
            -(-self.n_bits_ // 8) if self.output == "packed" else self.n_bits_
        )
        return self

    def _check_readable(self, fitted):
        if isinstance(fitted, MLP_TYPES):
            if fitted.activation not in SIGN_PRESERVING_ACTIVATIONS and not (
                self.allow_non_sign_preserving
            ):
                raise ValueError(
                    f"{type(fitted).__name__}(activation={fitted.activation!r}) is "
                    "not sign-preserving (its hidden outputs are always "
                    f"positive), so it has no sign code; use one of "
                    f"{SIGN_PRESERVING_ACTIVATIONS} or pass "
                    "allow_non_sign_preserving=True "
                    "to record the sign of the pre-activations anyway."
                )
            if len(fitted.coefs_) < 2:
                raise ValueError(f"{type(fitted).__name__} has no hidden layer.")
            return
        if isinstance(fitted, nn.Module) or is_torch_net(fitted):
            return
        raise TypeError(
            "SignCodeTransformer reads sksign or skorch nets (with a fitted "
            "module_), torch nn.Modules and scikit-learn's MLPClassifier or "
            f"MLPRegressor. Got {type(fitted).__name__} instead."
        )

    def _module_to_read(self):
        """The module to run, its layers to record, and whether any may be
        non-sign-preserving (a scikit-learn MLP's were checked at fit)."""
        fitted = self.estimator_
        if isinstance(fitted, MLP_TYPES):
            idx = self._mlp_layers()
            # fc{i}, hidden{i} pairs up to the last hidden layer read
            module = self._mlp_torch[: 2 * (idx[-1] + 1)]
            return module, [f"hidden{i}" for i in idx], True
        return (
            torch_module(fitted),
            self.layers,
            self.allow_non_sign_preserving,
        )

    # -- the code --------------------------------------------------------------
    def _probe(self, X):
        """Run one small batch to learn the layers and the bit names."""
        out = {}

        def grab(_, bits, rec):
            out["layers"], out["names"] = list(rec.layers), rec.feature_names()

        self._run_torch(X, grab)
        return out["layers"], out["names"]

    def _mlp_layers(self):
        names = hidden_layer_names(self.estimator_)
        n_hidden = len(names)
        if self.token_pool is not None:
            raise ValueError(
                f"token_pool={self.token_pool!r} was given, but the hidden layers "
                f"of {type(self.estimator_).__name__} give 2-D activations "
                "(batch, units); token pooling needs (batch, tokens, units)."
            )
        spec = self.layers
        if isinstance(spec, str) and spec in ("last", "all"):
            return [n_hidden - 1] if spec == "last" else list(range(n_hidden))
        items = [spec] if isinstance(spec, str | type) else list(spec)
        chosen = set()
        for item in items:
            if not isinstance(item, str):
                raise ValueError(
                    f"layers of {type(self.estimator_).__name__} are given by "
                    f"name ({', '.join(names)}), not by type; got {item!r}."
                )
            found = [i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, item)]
            if not found:
                raise ValueError(
                    f"layer {item!r} was not found in {type(self.estimator_).__name__}"
                    f"; available: {', '.join(names)}."
                )
            chosen.update(found)
        return sorted(chosen)

    def _run_torch(self, X, write):
        """Forward X batch by batch; ``write(rows, bits, recorder)`` per batch."""
        fitted = self.estimator_
        module, layers, allow_non_sign_preserving = self._module_to_read()
        # float32 like the net's own predict; the module's dtype if it differs
        device, dtype = device_and_dtype(
            module,
            device=self.device,
            default_device=getattr(fitted, "device", None),
        )
        keep_integers = self.forward_kwargs is not None
        with (
            record_signs(
                module,
                layers,
                conv_pool=self.conv_pool,
                token_pool=self.token_pool,
                residual=self.residual,
                allow_non_sign_preserving=allow_non_sign_preserving,
                to_cpu=False,
            ) as rec,
            torch.no_grad(),
        ):
            shape = self._module_sample_shape()
            for rows in gen_batches(X.shape[0], self.batch_size):
                xb = to_tensor(X[rows], device, dtype, keep_integers=keep_integers)
                if shape is not None:
                    xb = xb.reshape(len(xb), *shape)
                if self.forward_kwargs is None:
                    module(xb)
                else:
                    kwargs = self.forward_kwargs(xb)
                    if not isinstance(kwargs, dict):
                        raise TypeError(
                            "forward_kwargs must return a dict of keyword "
                            f"arguments; got {type(kwargs).__name__}."
                        )
                    kwargs = {
                        k: v.to(device) if isinstance(v, torch.Tensor) else v
                        for k, v in kwargs.items()
                    }
                    rec.attention_mask = kwargs.get("attention_mask")
                    try:
                        module(**kwargs)
                    except (TypeError, ValueError, RuntimeError, IndexError) as exc:
                        if exc is rec.error:  # the recorder's own (NaN, shapes)
                            raise
                        wrapped = _same_type_error(
                            exc,
                            f"the forward of {type(module).__name__} failed with "
                            f"the keyword arguments {sorted(kwargs)} returned by "
                            f"forward_kwargs: {exc}",
                        )
                        if wrapped is None:
                            raise
                        raise wrapped from exc
                bits = rec.pop_matrix()
                write(rows, bits.cpu().numpy(), rec)

    def _check_X(self, X, est, *, reset):
        """Validate X; a 2-D numeric ndarray (memmaps too) is read lazily.

        Such an array is only checked for its shape here; each batch is
        converted and checked for NaN/inf when it is read, so a memmap is
        never loaded whole. Samples with more than one axis (images
        (N, C, H, W), token arrays) are validated as flat rows; their shape
        is recorded at fit (``sample_shape_``) and must match afterwards.
        """
        X, shape = _split_sample_shape(X)
        if reset:
            self.sample_shape_ = shape
        elif shape is not None and self.sample_shape_ not in (None, shape):
            raise ValueError(
                f"X has samples of shape {shape}, but {type(self).__name__} was "
                f"fitted on samples of shape {self.sample_shape_}."
            )
        if (
            isinstance(X, np.ndarray)
            and X.ndim == 2
            and X.dtype.kind in "biuf"
            and X.shape[0] > 0
        ):
            validate_data(self, X[:1], reset=reset, dtype=None)
            return X
        return validate_data(self, X, reset=reset, dtype=self._fit_dtype(est))

    def _module_sample_shape(self):
        """The sample shape the read module takes, or None for flat rows.

        sksign's nets and scikit-learn's MLPs take flat rows (the nets
        reshape images themselves); a bare module or another skorch net gets
        its batches back in the shape of the samples seen at fit.
        """
        shape = getattr(self, "sample_shape_", None)
        if shape is None or isinstance(self.estimator_, (*SKSIGN_NETS, *MLP_TYPES)):
            return None
        return shape

    def transform(self, X):
        """Sign code of each row of X.

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
            Dask array.
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
            container = _get_output_config("transform", self)["dense"]
            if container != "default":
                raise ValueError(
                    "transform was given a Dask array, which gives a Dask array "
                    f"of codes, but set_output(transform={container!r}) asks for "
                    "another container; use set_output(transform='default')."
                )
            return transform_blocks(self, X)
        return self._transform_array(X)

    def _transform_array(self, X):
        X = self._check_X(X, self.estimator_, reset=False)
        n = X.shape[0]
        if self.output == "packed":
            out = np.empty((n, -(-self.n_bits_ // 8)), dtype=np.uint8)
        else:
            dtype = np.int8 if self.output == "signs" else np.uint8
            out = np.empty((n, self.n_bits_), dtype=dtype)
        layers = self.layers_

        def write(rows, bits, rec):
            if rec is not None and rec.layers != layers:
                raise RuntimeError(
                    f"the net gave the layers {rec.layers}, but {layers} at fit "
                    "time; was the module changed after fit?"
                )
            if self.output == "packed":
                out[rows] = np.packbits(bits, axis=1)
            elif self.output == "signs":
                np.subtract(np.multiply(bits, 2, dtype=np.int8), 1, out=out[rows])
            else:
                out[rows] = bits

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
