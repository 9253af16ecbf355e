"""Helpers to read the sign codes of Hugging Face models.

A Hugging Face model (``transformers.AutoModel``) is a plain ``nn.Module``
whose forward takes keyword arguments (``input_ids``, ``attention_mask``).
:class:`~sksign.transformers.SignCodeTransformer` reads it given a
``forward_kwargs`` callable; this module builds that callable
(:func:`hf_forward_kwargs`), turns texts into a fixed-width integer matrix
that scikit-learn accepts as X (:func:`tokenize_to_array`), and puts the two
together (:func:`hf_sign_code_transformer`).

``transformers`` itself is never imported here: tokenizers and models are
used through their public methods only, so sksign imports without it.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Iterable
from numbers import Integral

import numpy as np
import torch

from sksign.transformers._sign_codes import SignCodeTransformer

__all__ = [
    "BERT_FFN_LAYERS",
    "HFForwardKwargs",
    "hf_forward_kwargs",
    "hf_sign_code_transformer",
    "tokenize_to_array",
]

#: Layers of the feed-forward (intermediate) activations of BERT-like encoders
#: (BERT, RoBERTa, MiniLM, ViT in ``transformers``).
BERT_FFN_LAYERS = "encoder.layer.*.intermediate.*"


def _pad_id_of(tokenizer, pad_token_id) -> int:
    if pad_token_id is None and tokenizer is not None:
        pad_token_id = getattr(tokenizer, "pad_token_id", None)
        if pad_token_id is None:
            raise ValueError(
                f"the tokenizer {type(tokenizer).__name__} has no pad token "
                "(pad_token_id is None). Set one (tokenizer.pad_token = "
                "tokenizer.eos_token) or pass pad_token_id=..."
            )
    if pad_token_id is None:
        raise ValueError(
            "hf_forward_kwargs needs the padding id: pass a tokenizer or "
            "pad_token_id=..."
        )
    if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, Integral):
        raise TypeError(
            f"pad_token_id must be an int; got {pad_token_id!r} "
            f"({type(pad_token_id).__name__})."
        )
    return int(pad_token_id)


class HFForwardKwargs:
    """Turn a batch of padded token ids into a Hugging Face model's kwargs.

    Instances are picklable (no lambdas, no tokenizer inside), so a
    :class:`~sksign.transformers.SignCodeTransformer` that holds one can be
    cloned, pickled and used in ``GridSearchCV`` with ``n_jobs``.

    Parameters
    ----------
    pad_token_id : int
        The id that pads the rows; ``attention_mask = (ids != pad_token_id)``.
    vocab_size : int, default=None
        If given, ids outside ``[0, vocab_size)`` raise a ValueError (instead
        of an ``IndexError`` deep inside the embedding).
    token_type_ids : bool, default=False
        Also return ``token_type_ids`` (all zeros: one segment), for models
        whose forward needs them explicitly.

    Examples
    --------
    >>> import torch
    >>> fk = HFForwardKwargs(pad_token_id=0)
    >>> kw = fk(torch.tensor([[101, 7592, 102, 0, 0]]))
    >>> sorted(kw), kw["attention_mask"].tolist()
    (['attention_mask', 'input_ids'], [[1, 1, 1, 0, 0]])
    """

    def __init__(self, pad_token_id, *, vocab_size=None, token_type_ids=False):
        self.pad_token_id = pad_token_id
        self.vocab_size = vocab_size
        self.token_type_ids = token_type_ids

    def __call__(self, batch: torch.Tensor) -> dict[str, torch.Tensor]:
        if not isinstance(batch, torch.Tensor):
            batch = torch.as_tensor(np.asarray(batch))
        if batch.is_floating_point() or batch.is_complex() or batch.dtype == torch.bool:
            raise TypeError(
                "HFForwardKwargs expects integer token ids (as made by "
                f"tokenize_to_array); got a tensor of dtype {batch.dtype}. Pass X "
                "as an integer array (np.int64), not floats."
            )
        if batch.dim() != 2:
            raise ValueError(
                "HFForwardKwargs expects token ids of shape (batch, tokens); got "
                f"shape {tuple(batch.shape)}."
            )
        ids = batch.long()
        if self.vocab_size is not None and ids.numel():
            lo, hi = int(ids.min()), int(ids.max())
            if lo < 0 or hi >= self.vocab_size:
                raise ValueError(
                    f"token ids must lie in [0, {self.vocab_size}) (the vocabulary "
                    f"of the tokenizer); got ids from {lo} to {hi}. Is X made by "
                    "tokenize_to_array with the model's own tokenizer?"
                )
        out = {"input_ids": ids, "attention_mask": (ids != self.pad_token_id).long()}
        if self.token_type_ids:
            out["token_type_ids"] = torch.zeros_like(ids)
        return out

    def __eq__(self, other):
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self):
        return hash((type(self), self.pad_token_id, self.vocab_size))

    def __repr__(self):
        extra = f", vocab_size={self.vocab_size}" if self.vocab_size is not None else ""
        if self.token_type_ids:
            extra += ", token_type_ids=True"
        return f"HFForwardKwargs(pad_token_id={self.pad_token_id}{extra})"


def hf_forward_kwargs(tokenizer=None, *, pad_token_id=None, token_type_ids=False):
    """A picklable ``forward_kwargs`` for Hugging Face models.

    The callable turns a batch of integer token ids of shape (n, T), padded
    with the tokenizer's pad id, into ``{"input_ids": ids, "attention_mask":
    (ids != pad_id)}``; :class:`~sksign.transformers.SignCodeTransformer`
    passes it to the model and uses the mask to leave padding out of
    ``token_pool="majority"``.

    Parameters
    ----------
    tokenizer : transformers tokenizer, default=None
        Gives the pad id (``tokenizer.pad_token_id``) and the vocabulary size
        (``len(tokenizer)``, used to check the ids). Not stored.
    pad_token_id : int, default=None
        The padding id; overrides the tokenizer's. One of `tokenizer` and
        `pad_token_id` is needed.
    token_type_ids : bool, default=False
        Also pass ``token_type_ids`` (zeros).

    Returns
    -------
    forward_kwargs : HFForwardKwargs
        Picklable callable ``batch -> dict``.

    Notes
    -----
    A real token that has the pad id is masked too: for tokenizers without a
    pad token (GPT-2) set one that does not occur in the texts.

    Examples
    --------
    >>> import torch
    >>> from sksign.transformers import hf_forward_kwargs
    >>> forward_kwargs = hf_forward_kwargs(pad_token_id=0)
    >>> kw = forward_kwargs(torch.tensor([[101, 7592, 102, 0]]))
    >>> sorted(kw), kw["attention_mask"].tolist()
    (['attention_mask', 'input_ids'], [[1, 1, 1, 0]])
    """
    pad = _pad_id_of(tokenizer, pad_token_id)
    vocab_size = None
    if tokenizer is not None:
        try:
            vocab_size = len(tokenizer)
        except TypeError:
            vocab_size = getattr(tokenizer, "vocab_size", None)
    return HFForwardKwargs(pad, vocab_size=vocab_size, token_type_ids=token_type_ids)


def tokenize_to_array(tokenizer, texts, *, max_length=None, pad_token_id=None):
    """Token ids of `texts` as an int64 matrix, right-padded to a fixed width.

    scikit-learn takes it as X: rows are samples, columns token positions.
    Padding is always on the right (whatever ``tokenizer.padding_side``
    says), so column 0 holds the first token ([CLS] for BERT-like models)
    and ``token_pool="first"`` reads it.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        Called as ``tokenizer(texts, truncation=True, max_length=...)``;
        special tokens are added as the tokenizer does by default.
    texts : str or iterable of str
        The texts.
    max_length : int, default=None
        Width of the matrix: longer texts are truncated (keeping the final
        special token), shorter ones padded. None uses the longest text in
        `texts` (capped at ``tokenizer.model_max_length``); pass a value to
        give train and test data the same width.
    pad_token_id : int, default=None
        Padding id; None uses ``tokenizer.pad_token_id``.

    Returns
    -------
    ids : ndarray of shape (n_texts, max_length), dtype int64

    Examples
    --------
    A stand-in tokenizer (one id per word, between [CLS] = 101 and [SEP] = 102):

    >>> from sksign.transformers import tokenize_to_array
    >>> class WordTokenizer:
    ...     pad_token_id = 0
    ...     def __call__(self, texts, truncation, max_length, padding):
    ...         ids = [[101, *(len(w) for w in t.split()), 102] for t in texts]
    ...         return {"input_ids": ids}
    >>> tokenize_to_array(WordTokenizer(), ["a bb", "ccc"])
    array([[101,   1,   2, 102],
           [101,   3, 102,   0]])
    """
    if isinstance(texts, str):
        texts = [texts]
    elif not isinstance(texts, Iterable):
        raise TypeError(
            f"texts must be a string or an iterable of strings; got {texts!r}."
        )
    texts = list(texts)
    bad = [t for t in texts if not isinstance(t, str)]
    if bad:
        raise TypeError(
            f"texts must be strings; got {type(bad[0]).__name__} ({bad[0]!r})."
        )
    if max_length is not None and (
        isinstance(max_length, bool)
        or not isinstance(max_length, Integral)
        or max_length < 1
    ):
        raise ValueError(
            f"max_length must be a positive int or None; got {max_length!r}."
        )
    pad = _pad_id_of(tokenizer, pad_token_id)
    if not texts:
        return np.zeros((0, max_length or 0), dtype=np.int64)
    limit = max_length
    if limit is None:
        model_max = getattr(tokenizer, "model_max_length", None)
        limit = model_max if isinstance(model_max, int) and model_max < 10**6 else None
    enc = tokenizer(
        texts, truncation=limit is not None, max_length=limit, padding=False
    )
    rows = enc["input_ids"]
    longest = max(len(r) for r in rows)
    if max_length is not None and longest > max_length:
        # the tokenizer cannot truncate below its special tokens
        n_special = getattr(tokenizer, "num_special_tokens_to_add", None)
        n_special = n_special(pair=False) if callable(n_special) else 0
        need = n_special if n_special > max_length else longest
        raise ValueError(
            f"max_length={max_length} is too short for this tokenizer: it adds "
            f"{n_special} special token(s) (such as [CLS] and [SEP]) to every "
            f"text and returned {longest} tokens; use max_length >= {need}."
        )
    width = max_length if max_length is not None else longest
    out = np.full((len(rows), width), pad, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def hf_sign_code_transformer(
    model,
    tokenizer=None,
    *,
    layers=BERT_FFN_LAYERS,
    token_pool="majority",
    pad_token_id=None,
    **kwargs,
):
    """A :class:`~sksign.transformers.SignCodeTransformer` for a Hugging Face model.

    Parameters
    ----------
    model : nn.Module
        A (pretrained) Hugging Face model, e.g. ``AutoModel.from_pretrained``.
        Taken as already trained (as a bare ``nn.Module`` always is).
    tokenizer : transformers tokenizer, default=None
        Gives the pad id and the vocabulary size (see :func:`hf_forward_kwargs`).
    layers : str, list or module type, default="encoder.layer.*.intermediate.*"
        The feed-forward activations of BERT-like encoders. Other families
        name them differently, e.g. ``"transformer.layer.*.ffn.activation"``
        (DistilBERT), ``"h.*.mlp.act"`` (GPT-2); an activation class works
        where the model uses it (``transformers.activations.GELUActivation``
        for BERT and DistilBERT; GPT-2 uses ``NewGELUActivation``).
    token_pool : {"first", "majority"} or None, default="majority"
        "first": the first token ([CLS]); "majority": the majority sign over
        the non-padding tokens (ties to +1); None: token-level codes, one row
        per non-padding token (read them with their (sequence, position)
        index by :meth:`SignCodeTransformer.transform_tokens
        <sksign.transformers.SignCodeTransformer.transform_tokens>`).
    pad_token_id : int, default=None
        Overrides the tokenizer's pad id.
    **kwargs
        Other parameters of ``SignCodeTransformer`` (``output``,
        ``batch_size``, ``device``, ...).

    Returns
    -------
    transformer : SignCodeTransformer
        Unfitted; ``fit(X)`` with X from :func:`tokenize_to_array`.

    Examples
    --------
    Any module whose forward takes ``input_ids`` and ``attention_mask`` works;
    here a tiny stand-in encoder with one GELU feed-forward layer:

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
    >>> sct = hf_sign_code_transformer(TinyEncoder(), pad_token_id=0, layers="act")
    >>> X = np.array([[101, 7, 102, 0], [101, 9, 12, 102]])
    >>> sct.fit_transform(X).shape
    (2, 8)

    With a pretrained model and its tokenizer (downloaded by ``transformers``):

    >>> from transformers import AutoModel, AutoTokenizer  # doctest: +SKIP
    >>> tok = AutoTokenizer.from_pretrained(path)  # doctest: +SKIP
    >>> model = AutoModel.from_pretrained(path)  # doctest: +SKIP
    >>> X = tokenize_to_array(tok, ["a text", "more"], max_length=32)  # doctest: +SKIP
    >>> codes = hf_sign_code_transformer(model, tok).fit_transform(X)  # doctest: +SKIP
    >>> tokens = hf_sign_code_transformer(model, tok, token_pool=None)  # doctest: +SKIP
    >>> codes, index = tokens.fit(X).transform_tokens(X)  # doctest: +SKIP
    """
    forward_kwargs = hf_forward_kwargs(tokenizer, pad_token_id=pad_token_id)
    return SignCodeTransformer(
        model,
        layers=layers,
        token_pool=token_pool,
        forward_kwargs=forward_kwargs,
        **kwargs,
    )
