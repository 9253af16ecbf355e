"""How SignCodeTransformer reads a net: input checks and the forward pass.

:class:`_NetReader` holds the part of
:class:`~sksign.transformers.SignCodeTransformer` that validates X, picks the
module and layers to run, and runs it batch by batch under
:func:`~sksign.nn.record_signs`, handing each batch's bits (and, for
token-level codes, the (sequence, token) index of each row) to a callback.
The public methods (fit, transform, transform_tokens) stay in
:mod:`sksign.transformers._sign_codes`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import fnmatch

import numpy as np
import torch
from sklearn.utils import gen_batches
from sklearn.utils.validation import validate_data
from torch import nn

from sksign._adapter import (
    SKSIGN_NETS,
    check_module_input,
    device_and_dtype,
    is_torch_net,
    to_tensor,
    torch_module,
)
from sksign._shapes import check_sample_shape, split_sample_shape
from sksign._sklearn_mlp import (
    MLP_TYPES,
    SIGN_PRESERVING_ACTIVATIONS,
    hidden_layer_names,
)
from sksign.nn import record_signs

__all__ = []


def _same_type_error(exc, message):
    """``type(exc)(message)``, or None when that class cannot be built so."""
    try:
        return type(exc)(message)
    except Exception:
        return None


def _is_text(value):
    return isinstance(value, str | bytes | np.str_ | np.bytes_)


def _reject_empty_or_text(X):
    """Raise a clear error for texts, or no rows, given where numbers go."""
    if isinstance(X, np.ndarray):
        text = X.dtype.kind in "SU" or (
            X.dtype.kind == "O" and X.size > 0 and _is_text(X.flat[0])
        )
        empty = X.ndim >= 1 and X.shape[0] == 0
    elif _is_text(X):
        text, empty = True, False
    elif isinstance(X, list | tuple):
        empty = not X
        text = bool(X) and (
            _is_text(X[0])
            or (isinstance(X[0], list | tuple) and bool(X[0]) and _is_text(X[0][0]))
        )
    else:
        return
    if text:
        got = "a string" if _is_text(X) else f"a {type(X).__name__} of strings"
        raise ValueError(  # as check_array's "could not convert string"
            f"SignCodeTransformer reads numbers, but X holds text (got {got}). "
            "For a language model, turn the texts into token ids first: "
            "X = tokenize_to_array(tokenizer, texts, max_length=...)."
        )
    if empty:
        shape = getattr(X, "shape", (0,))
        raise ValueError(
            f"X has no samples (shape {tuple(shape)}): SignCodeTransformer needs "
            "at least one row (for texts, a non-empty list of strings)."
        )


def _n_columns(X):
    """Columns of a 2-D array-like (an array, a DataFrame, a list of rows)."""
    shape = getattr(X, "shape", None)
    if shape is not None:
        return shape[1] if len(shape) == 2 else None
    if isinstance(X, list | tuple) and X and hasattr(X[0], "__len__"):
        return len(X[0])
    return None


def _token_rows(bits, mask, start):
    """Per-token codes (N, T, B) -> the rows of the real tokens and their index.

    `mask` (N, T) is nonzero on real tokens (None: every token is real);
    the index holds ``(start + sequence, token position)`` per row, in the
    order of the rows (sequence by sequence, tokens in order).
    """
    n, t = bits.shape[:2]
    if mask is None:
        keep = torch.ones((n, t), dtype=torch.bool, device=bits.device)
    else:
        keep = mask.to(bits.device) != 0
        if keep.shape != (n, t):
            raise ValueError(
                f"the attention_mask returned by forward_kwargs has shape "
                f"{tuple(keep.shape)}, but the token layers have (batch, tokens) "
                f"= {(n, t)}; token-level codes need one mask entry per token."
            )
    index = keep.nonzero().cpu().numpy()
    index[:, 0] += start
    return bits[keep], index


class _NetReader:
    """Validation of X and the batched forward pass of SignCodeTransformer."""

    def _fit_dtype(self, est):
        if self.forward_kwargs is not None:
            return "numeric"
        if isinstance(est, MLP_TYPES):
            return [np.float64, np.float32]
        return np.float32

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
        """Run one small batch to learn the layers, the bit names and whether
        the codes are per token."""
        out = {}

        def grab(_, bits, rec, index):
            out["layers"], out["names"] = list(rec.layers), rec.feature_names()
            out["per_token"] = index is not None

        self._run_torch(X, grab)
        return out["layers"], out["names"], out["per_token"]

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

    def _run_torch(self, X, write, start=0):
        """Forward X batch by batch; ``write(rows, bits, recorder, index)``
        per batch: `bits` (n, n_bits) numpy bool, `index` None, or for
        token-level codes the bits of the real tokens and their (sequence,
        token) index, sequences counted from `start` (see
        :func:`_token_rows`)."""
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
                # token_pool=None on token layers: one code per token
                keep_tokens=True,
            ) as rec,
            torch.no_grad(),
        ):
            shape = self._module_sample_shape()
            check_module_input(module, (X.shape[0], *(shape or X.shape[1:])))
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
                bits, index = rec.pop_matrix(), None
                if bits.dim() == 3:
                    first = start + rows.start
                    bits, index = _token_rows(bits, rec.attention_mask, first)
                write(rows, bits.cpu().numpy(), rec, index)

    def _check_X(self, X, est, *, reset):
        """Validate X; a 2-D numeric ndarray (memmaps too) is read lazily.

        Such an array is only checked for its shape here; each batch is
        converted and checked for NaN/inf when it is read, so a memmap is
        never loaded whole. Samples with more than one axis (images
        (N, C, H, W), token arrays) are validated as flat rows; their shape
        is recorded at fit (``sample_shape_``) and must match afterwards.
        """
        _reject_empty_or_text(X)
        X, shape = split_sample_shape(X)
        if not reset and shape is None and self.forward_kwargs is not None:
            self._check_token_width(X)
        if reset:
            self.sample_shape_ = shape
        else:
            check_sample_shape(shape, self.sample_shape_, type(self).__name__)
        if (
            isinstance(X, np.ndarray)
            and X.ndim == 2
            and X.dtype.kind in "biuf"
            and X.shape[0] > 0
        ):
            validate_data(self, X[:1], reset=reset, dtype=None)
            return X
        return validate_data(self, X, reset=reset, dtype=self._fit_dtype(est))

    def _check_token_width(self, X):
        """Token ids of another width: name max_length, not "features"."""
        n, n_fit = _n_columns(X), getattr(self, "n_features_in_", None)
        if n is None or n_fit is None or n == n_fit:
            return
        raise ValueError(
            f"X has {n} token positions, but {type(self).__name__} was fitted on "
            f"{n_fit}: the max_length of the token ids differs from fit's "
            f"(max_length={n} here, max_length={n_fit} at fit). Tokenize all "
            f"data to the same width: tokenize_to_array(tokenizer, texts, "
            f"max_length={n_fit})."
        )

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
