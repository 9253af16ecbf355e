"""Checks and losses of :func:`~sksign.transformers.distill_ffn`.

The option, data and model checks (each error names the parameter or the
model part at fault) and the per-token distillation losses.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sksign.transformers._ffn import find_ffn_activations

__all__ = [
    "check_data",
    "check_options",
    "output_tensor",
    "swapped_ffns",
    "token_losses",
    "trainable_params",
]

_TRAINABLE = ("ffn", "ffn+norms")
_LOSSES = ("auto", "kl", "mse", "cosine")


def _param_error(name, allowed, value):
    return ValueError(
        f"The {name!r} parameter of distill_ffn must be {allowed}; got {value!r}."
    )


def _check_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise _param_error(name, f"an int >= {low}", value)
    return int(value)


def _check_real(name, value, *, low=0.0, strict=True, none=False):
    if value is None and none:
        return None
    ok = isinstance(value, Real) and not isinstance(value, bool)
    if not ok or not (value > low if strict else value >= low):
        sign = ">" if strict else ">="
        extra = " or None" if none else ""
        raise _param_error(name, f"a real number {sign} {low:g}{extra}", value)
    return float(value)


def check_options(options: dict) -> dict:
    if options["trainable"] not in _TRAINABLE:
        raise _param_error("trainable", f"one of {_TRAINABLE}", options["trainable"])
    if options["loss"] not in _LOSSES:
        raise _param_error("loss", f"one of {_LOSSES}", options["loss"])
    out = dict(options)
    out["max_steps"] = _check_int("max_steps", options["max_steps"], 1)
    out["batch_size"] = _check_int("batch_size", options["batch_size"], 1)
    out["checkpoint_every"] = _check_int(
        "checkpoint_every", options["checkpoint_every"], 1
    )
    out["verbose"] = _check_int("verbose", options["verbose"], 0)
    if options["anneal_steps"] is not None:
        out["anneal_steps"] = _check_int("anneal_steps", options["anneal_steps"], 1)
    out["lr"] = _check_real("lr", options["lr"])
    out["temperature"] = _check_real("temperature", options["temperature"])
    out["task_weight"] = _check_real(
        "task_weight", options["task_weight"], strict=False
    )
    out["alpha0_start"] = _check_real(
        "alpha0_start", options["alpha0_start"], none=True
    )
    out["max_grad_norm"] = _check_real(
        "max_grad_norm", options["max_grad_norm"], none=True
    )
    checkpoint = options["checkpoint"]
    if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
        raise _param_error("checkpoint", "a file path or None", checkpoint)
    return out


def check_data(data) -> dict[str, torch.Tensor]:
    """The batch tensors: ``input_ids`` (n, T), ``attention_mask`` and extras."""
    if not isinstance(data, Mapping) or "input_ids" not in data:
        raise TypeError(
            "data must be a dict of tensors with 'input_ids' (n_texts, n_tokens) "
            "and optionally 'attention_mask' (a tokenizer's output with "
            f"return_tensors='pt' works); got {type(data).__name__}."
        )
    out = {
        k: torch.as_tensor(np.asarray(v) if not torch.is_tensor(v) else v)
        for k, v in data.items()
    }
    ids = out["input_ids"]
    if ids.ndim != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(
            "data['input_ids'] must be a 2-D integer tensor (n_texts, n_tokens); "
            f"got dtype {ids.dtype} and shape {tuple(ids.shape)}."
        )
    if "attention_mask" not in out:
        out["attention_mask"] = torch.ones_like(ids)
    for key, value in out.items():
        if value.shape[:1] != ids.shape[:1]:
            raise ValueError(
                f"data[{key!r}] has {value.shape[0] if value.ndim else 0} rows but "
                f"data['input_ids'] has {ids.shape[0]}: every tensor of data needs "
                "one row per text."
            )
    if out["attention_mask"].shape != ids.shape:
        raise ValueError(
            "data['attention_mask'] must have the shape of data['input_ids'] "
            f"{tuple(ids.shape)}; got {tuple(out['attention_mask'].shape)}."
        )
    if ids.shape[0] == 0 or not bool(out["attention_mask"].any()):
        raise ValueError("data holds no text (no row, or an all-zero attention mask).")
    return out


def swapped_ffns(student: nn.Module, teacher: nn.Module) -> list:
    """The student's FFN layers whose activation differs from the teacher's."""
    if not isinstance(student, nn.Module) or not isinstance(teacher, nn.Module):
        raise TypeError(
            "distill_ffn expects torch nn.Modules for student and teacher; got "
            f"{type(student).__name__} and {type(teacher).__name__}."
        )
    if student is teacher:
        raise ValueError(
            "student is teacher: swap the activations on a copy "
            "(swap_ffn_activations(teacher, ..., copy=True), the default) so that "
            "the original model stays the reference."
        )
    for role, model in (("student", student), ("teacher", teacher)):
        if isinstance(model, torch.jit.ScriptModule):
            raise TypeError(
                f"the {role} is a TorchScript module ({type(model).__name__}), an "
                "inference-only form: pass the nn.Module it was scripted from."
            )
    s_ffns, t_ffns = find_ffn_activations(student), find_ffn_activations(teacher)
    s_names, t_names = list(s_ffns), list(t_ffns)
    if s_names != t_names:
        only_s = [n for n in s_names if n not in t_ffns]
        only_t = [n for n in t_names if n not in s_ffns]
        raise ValueError(
            "student and teacher have different FFN layouts: FFN activations "
            f"only in the student: {only_s or '(none)'}; only in the teacher: "
            f"{only_t or '(none)'} ({len(s_names)} vs {len(t_names)} blocks)."
        )
    s_mods, t_mods = dict(student.named_modules()), dict(teacher.named_modules())
    for name, s in s_ffns.items():
        t = t_ffns[name]
        shapes = [
            (
                p,
                tuple(s_mods[p].weight.shape),
                tuple(t_mods[p].weight.shape),
            )
            for p in (*s.up, s.down)
        ]
        diff = [f"{p} {a} vs {b}" for p, a, b in shapes if a != b]
        if (s.up, s.down, s.gated) != (t.up, t.down, t.gated) or diff:
            raise ValueError(
                f"student and teacher have different FFN layouts in {s.block!r}: "
                f"student up={s.up}, down={s.down!r}, gated={s.gated}; teacher "
                f"up={t.up}, down={t.down!r}, gated={t.gated}"
                + (
                    f"; weight shapes (student vs teacher): {', '.join(diff)}"
                    if diff
                    else ""
                )
                + "."
            )
    swapped = [
        s for n, s in s_ffns.items() if type(s.module) is not type(t_ffns[n].module)
    ]
    if not swapped:
        kinds = sorted({type(s.module).__name__ for s in s_ffns.values()})
        raise ValueError(
            "the student has no swapped FFN activation: each of its "
            f"{len(s_ffns)} FFN activations is of the teacher's class "
            f"({', '.join(kinds)}). Swap some first, e.g. student = "
            "swap_ffn_activations(teacher, 'htaf', layers=2)."
        )
    return swapped


def _is_norm(module: nn.Module) -> bool:
    name = type(module).__name__.lower()
    return isinstance(module, (nn.LayerNorm, nn.GroupNorm)) or (
        "norm" in name and not list(module.children())
    )


def trainable_params(student, swapped, trainable) -> dict[str, nn.Parameter]:
    """Name -> parameter of what is trained, in ``named_parameters`` order."""
    prefixes = [n for f in swapped for n in (*f.up, f.down, f.name)]
    if trainable == "ffn+norms":
        for f in swapped:
            block = student.get_submodule(f.block)
            prefixes += [
                f"{f.block}.{n}" for n, m in block.named_modules() if n and _is_norm(m)
            ]
    chosen = {}
    for name, param in student.named_parameters():
        if any(name.startswith(f"{p}.") for p in prefixes):
            chosen[name] = param
    for name, param in chosen.items():
        if not param.dtype.is_floating_point or param.is_inference():
            what = "an inference tensor" if param.is_inference() else param.dtype
            raise ValueError(
                f"parameter {name!r} of the student cannot be trained: it is "
                f"{what} (a quantized or inference-mode model). Load the model "
                "in float32 (or float16/bfloat16) outside torch.inference_mode()."
            )
    if not chosen:
        raise ValueError(
            "the swapped FFN blocks of the student have no parameters to train."
        )
    return chosen


def output_tensor(out) -> tuple[torch.Tensor, str]:
    """(tensor, "logits" | "hidden") of a model output."""
    if torch.is_tensor(out):
        return out, "logits"
    logits = getattr(out, "logits", None)
    if logits is None and isinstance(out, Mapping):
        logits = out.get("logits")
    if logits is not None:
        return logits, "logits"
    hidden = getattr(out, "last_hidden_state", None)
    if hidden is None and isinstance(out, Mapping):
        hidden = out.get("last_hidden_state")
    if hidden is None and isinstance(out, tuple) and out and torch.is_tensor(out[0]):
        hidden = out[0]
    if hidden is None:
        raise TypeError(
            "the model output has neither 'logits' nor 'last_hidden_state' (got "
            f"{type(out).__name__}); distill_ffn needs one of them."
        )
    return hidden, "hidden"


def token_losses(s, t, kind, loss, temperature):
    """Per-token distillation loss, shape (n, T)."""
    if loss == "auto":
        loss = "kl" if kind == "logits" else "cosine"
    if loss == "kl":
        if kind != "logits":
            raise ValueError(
                "loss='kl' needs logits (a language-model head); the model "
                "returns hidden states: use loss='cosine' or 'mse'."
            )
        log_s = F.log_softmax(s.float() / temperature, dim=-1)
        log_t = F.log_softmax(t.float() / temperature, dim=-1)
        per = (log_t.exp() * (log_t - log_s)).sum(-1) * temperature**2
    elif loss == "mse":
        per = (s.float() - t.float()).pow(2).mean(-1)
    else:
        per = 1.0 - F.cosine_similarity(s.float(), t.float(), dim=-1, eps=1e-8)
    return per
