"""Fine-tune swapped FFN blocks by distillation from the original model.

:func:`distill_ffn` trains the FFN blocks whose activation
:func:`~sksign.transformers.swap_ffn_activations` replaced (the student) to
reproduce the outputs of the original model (the teacher): KL divergence on
next-token logits for a language model, a cosine loss on the last hidden
state for an encoder. The loop is plain torch; under ``torch.distributed``
each process takes its shard of every global batch and the gradients are
summed over the processes, so that any number of processes computes the same
update as one.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.utils import check_random_state
from torch import nn

from sksign.estimators import AlphaAnnealing
from sksign.nn import HTAF, temporary_mode
from sksign.transformers._ffn_distill_checks import (
    check_data,
    check_options,
    output_tensor,
    swapped_ffns,
    token_losses,
    trainable_params,
)

__all__ = ["distill_ffn"]

#: Bumped when the content of a checkpoint file changes.
_CHECKPOINT_FORMAT = 1


def _dist() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _base_seed(random_state, world: int) -> int:
    seed = int(check_random_state(random_state).randint(2**31 - 1))
    if world > 1:  # every process follows rank 0's batch order
        box = torch.tensor([seed], dtype=torch.int64)
        torch.distributed.broadcast(box, src=0)
        seed = int(box.item())
    return seed


def _batch_rows(base: int, step: int, n: int, size: int) -> np.ndarray:
    """Rows of the global batch of `step`: epoch-wise permutations of `n` rows."""
    per_epoch = n // size
    epoch, k = divmod(step, per_epoch)
    perm = np.random.default_rng([base, epoch]).permutation(n)
    return perm[k * size : (k + 1) * size]


def _fingerprint(options, params, data) -> dict:
    keys = (
        "max_steps",
        "batch_size",
        "lr",
        "trainable",
        "loss",
        "temperature",
        "task_weight",
        "alpha0_start",
        "anneal_steps",
        "max_grad_norm",
    )
    out = {k: options[k] for k in keys}
    out["params"] = [f"{n} {tuple(p.shape)}" for n, p in params.items()]
    out["data"] = tuple(data["input_ids"].shape)
    return out


def _load_checkpoint(run) -> dict | None:
    path = run["path"]
    if not os.path.exists(path):
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format") != _CHECKPOINT_FORMAT:
        raise ValueError(f"{path!r} is not a distill_ffn checkpoint file.")
    saved, now = state["fingerprint"], run["fingerprint"]
    diff = [k for k in now if saved.get(k) != now[k]]
    if diff:
        what = "; ".join(f"{k}: {saved.get(k)!r} -> {now[k]!r}" for k in diff)
        raise ValueError(
            f"checkpoint {path!r} was written by a different run ({what}); rerun "
            "with the same settings to resume, or delete the file."
        )
    return state


def distill_ffn(
    student,
    teacher,
    data,
    *,
    max_steps=100,
    batch_size=16,
    lr=1e-4,
    trainable="ffn",
    loss="auto",
    temperature=1.0,
    task_weight=0.0,
    alpha0_start=None,
    anneal_steps=None,
    max_grad_norm=1.0,
    random_state=None,
    checkpoint=None,
    checkpoint_every=50,
    verbose=0,
):
    """Fine-tune the swapped FFN blocks of a model by distillation from the original.

    The student is a model whose FFN activations
    :func:`~sksign.transformers.swap_ffn_activations` replaced in some blocks;
    the teacher is the original model. The FFNs whose activation class
    differs from the teacher's are trained (their up, gate and down
    projections; with ``trainable="ffn+norms"`` also the norm layers of their
    blocks); every other parameter of the student stays as it is. Each step
    takes a global batch of `batch_size` texts of `data` (epoch-wise
    shuffled) and minimises, over the real tokens (``attention_mask`` 1),

    - ``loss="kl"`` (the default for a model that returns logits, e.g. a
      causal LM): ``T**2 * KL(softmax(t / T) || softmax(s / T))`` of the
      teacher's and the student's next-token logits ``t``, ``s`` at
      temperature ``T``, plus `task_weight` times the next-token cross
      entropy of the student (the language-modelling loss on `data`);
    - ``loss="cosine"`` (the default for an encoder, whose output is a last
      hidden state, e.g. MiniLM): ``1 - cos(s, t)`` of the token vectors,
      which keeps the directions that sentence embeddings are compared by;
      ``loss="mse"``: the mean squared difference.

    The optimiser is AdamW (constant `lr`, no weight decay) with the
    gradient norm clipped to `max_grad_norm`. During training the swapped
    activations are in train mode (HTAF smooth) and every other module in
    eval mode (dropout off, so a run is a function of `random_state`); on
    return the modes and the ``requires_grad`` flags are those the models
    had, and HTAF's ``alpha0`` is its value on entry.

    Parameters
    ----------
    student : nn.Module
        The model with swapped FFN activations; trained in place.
    teacher : nn.Module
        The original model; never modified (run in eval mode, without
        gradients).
    data : dict of tensors
        ``input_ids`` of shape (n_texts, n_tokens), ``attention_mask`` (ones
        when absent) and any further per-text tensor the models take (e.g.
        ``token_type_ids``), all passed to both models as keyword arguments.
        A tokenizer's output with ``return_tensors="pt"`` works.
    max_steps : int, default=100
        Optimisation steps.
    batch_size : int, default=16
        Texts per global batch (over all processes); capped at n_texts.
    lr : float, default=1e-4
        Learning rate.
    trainable : {"ffn", "ffn+norms"}, default="ffn"
        What is trained: the swapped FFNs, or also the norm layers of their
        blocks.
    loss : {"auto", "kl", "mse", "cosine"}, default="auto"
        The distillation loss (see above); "auto" takes "kl" for logits and
        "cosine" for hidden states.
    temperature : float, default=1.0
        Temperature of the KL loss.
    task_weight : float, default=0.0
        Weight of the next-token cross entropy (models with logits only).
    alpha0_start : float, default=None
        Anneal HTAF's ``alpha0`` geometrically from this value to each HTAF's
        own ``alpha0`` over `anneal_steps` steps (the schedule of
        :class:`~sksign.estimators.AlphaAnnealing`, per step); None: no
        annealing. Needs an HTAF among the swapped activations.
    anneal_steps : int, default=None
        Steps of the annealing (None: `max_steps`).
    max_grad_norm : float, default=1.0
        Clip the norm of the gradient of the trained parameters; None: no
        clipping.
    random_state : int, RandomState instance or None, default=None
        Seeds the batch order (the only random choice): the same seed gives
        the same weights.
    checkpoint : str or path-like, default=None
        A file for the run's state (the trained parameters, the optimiser,
        the step, the history), written every `checkpoint_every` steps and
        at the end. When it exists, the run resumes from it and ends with the
        weights of an uninterrupted run; it must come from a run with the
        same settings (else ValueError).
    checkpoint_every : int, default=50
        Steps between checkpoints.
    verbose : int, default=0
        0: silent; 1: about ten progress lines; 2: a line per step.

    Returns
    -------
    student : nn.Module
        The student, trained in place.
    history : list of dict
        One record per step: ``step`` (1-based), ``loss`` (the total),
        ``distill`` and ``task`` losses (means over the global batch's
        tokens), ``alpha0`` (None without annealing) and ``seconds``.

    Raises
    ------
    ValueError
        For a bad option (the message names the parameter and what it
        takes), a student that is the teacher or has no swapped FFN
        activation, a student and teacher with different FFN layouts, a
        parameter to train that is not a float tensor (a quantized model) or
        is an inference tensor, ``loss="kl"`` or a task loss on a model
        without logits, `alpha0_start` without an HTAF, a checkpoint of
        another run.
    TypeError
        For models that are not ``nn.Module`` objects (or are TorchScript),
        or `data` that is not a dict of tensors.

    See Also
    --------
    swap_ffn_activations : Build the student.
    SignCodeTransformer : Read the FFN bits of the result.

    Notes
    -----
    Under ``torch.distributed`` (a process group initialised, e.g. gloo on
    CPU) every process must call this with the same models and data. Each
    takes its shard of each global batch, the losses are normalised by the
    global batch's token count, and the gradients are summed over the
    processes (one ``all_reduce``) before the step, so that 2 processes give
    the weights of 1 to float32 rounding. Rank 0 writes the checkpoint and
    prints the progress.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from sksign.transformers import distill_ffn, swap_ffn_activations
    >>> class Block(nn.Module):
    ...     def __init__(self, d=8):
    ...         super().__init__()
    ...         self.up, self.down = nn.Linear(d, 32), nn.Linear(32, d)
    ...         self.act = nn.GELU()
    ...     def forward(self, x):
    ...         return x + self.down(self.act(self.up(x)))
    >>> class TinyLM(nn.Module):
    ...     def __init__(self, vocab=20, d=8):
    ...         super().__init__()
    ...         self.emb, self.head = nn.Embedding(vocab, d), nn.Linear(d, vocab)
    ...         self.blocks = nn.ModuleList([Block(d), Block(d)])
    ...     def forward(self, input_ids, attention_mask=None):
    ...         x = self.emb(input_ids)
    ...         for block in self.blocks:
    ...             x = block(x)
    ...         return self.head(x)  # next-token logits
    >>> _ = torch.manual_seed(0)
    >>> teacher = TinyLM().eval()
    >>> student = swap_ffn_activations(teacher, "htaf", layers=1)
    >>> data = {"input_ids": torch.randint(0, 20, (32, 6))}
    >>> student, history = distill_ffn(
    ...     student, teacher, data, max_steps=30, batch_size=8, lr=1e-2,
    ...     alpha0_start=0.5, random_state=0)
    >>> len(history), history[0]["alpha0"], history[-1]["alpha0"]
    (30, 0.5, 2.0)
    >>> history[-1]["loss"] < history[0]["loss"]
    True
    """
    opts = check_options(
        {k: v for k, v in locals().items() if k not in ("student", "teacher", "data")}
    )
    data = check_data(data)
    swapped = swapped_ffns(student, teacher)
    params = trainable_params(student, swapped, opts["trainable"])
    teacher_ids = {id(p) for p in teacher.parameters()}
    shared = [n for n, p in params.items() if id(p) in teacher_ids]
    if shared:
        raise ValueError(
            f"the student shares parameters to train with the teacher ({shared[0]}, "
            "...): training would change the teacher. Swap on a copy "
            "(swap_ffn_activations(..., copy=True))."
        )
    htafs = {f.name: f.module for f in swapped if isinstance(f.module, HTAF)}
    if opts["alpha0_start"] is not None and not htafs:
        kinds = sorted({type(f.module).__name__ for f in swapped})
        raise ValueError(
            "alpha0_start anneals HTAF's alpha0, but the swapped activations are "
            f"{', '.join(kinds)}: pass alpha0_start=None."
        )
    rank, world = _dist()
    optimizer = torch.optim.AdamW(list(params.values()), lr=opts["lr"], weight_decay=0)
    run = {
        "opts": opts,
        "rank": rank,
        "world": world,
        "params": params,
        "optimizer": optimizer,
        "fingerprint": _fingerprint(opts, params, data),
        "alpha0": {n: float(m.alpha0) for n, m in htafs.items()},
        "path": None if checkpoint is None else os.fspath(checkpoint),
    }
    state = None if run["path"] is None else _load_checkpoint(run)
    start, history = 0, []
    if state is not None:
        with torch.no_grad():
            for name, param in params.items():
                param.copy_(state["params"][name])
        optimizer.load_state_dict(state["optimizer"])
        start, history, run["seed"] = (
            state["step"],
            list(state["history"]),
            state["seed"],
        )
        run["alpha0"] = dict(state["alpha0"])
    else:
        run["seed"] = _base_seed(opts["random_state"], world)
        if world > 1:  # every process starts from rank 0's weights
            with torch.no_grad():
                for param in params.values():
                    torch.distributed.broadcast(param.data, src=0)
    anneal = None
    if opts["alpha0_start"] is not None:
        n_anneal = opts["anneal_steps"] or opts["max_steps"]
        anneal = AlphaAnnealing(opts["alpha0_start"], epochs=n_anneal)
    flags = {n: p.requires_grad for n, p in student.named_parameters()}
    try:
        for p in student.parameters():
            p.requires_grad_(False)
        for p in params.values():
            p.requires_grad_(True)
        with temporary_mode(student, False), temporary_mode(teacher, False):
            for f in swapped:
                f.module.train()
            for step in range(start, opts["max_steps"]):
                tic = time.perf_counter()
                alpha0 = None
                if anneal is not None:
                    for name, module in htafs.items():
                        module.alpha0 = anneal.alpha0_at(
                            step, run["alpha0"][name], opts["max_steps"]
                        )
                    alpha0 = float(next(iter(htafs.values())).alpha0)
                distill, task = _step(student, teacher, data, step, run)
                history.append(
                    {
                        "step": step + 1,
                        "loss": distill + opts["task_weight"] * task,
                        "distill": distill,
                        "task": task,
                        "alpha0": alpha0,
                        "seconds": time.perf_counter() - tic,
                    }
                )
                _report(history, run)
    finally:
        for name, module in htafs.items():
            module.alpha0 = run["alpha0"][name]
        for name, param in student.named_parameters():
            param.requires_grad_(flags[name])
    return student, history


def _step(student, teacher, data, step, run) -> tuple[float, float]:
    """One optimisation step on the global batch of `step`; its two losses."""
    opts, params, world = run["opts"], run["params"], run["world"]
    n_rows = int(data["input_ids"].shape[0])
    rows = _batch_rows(run["seed"], step, n_rows, min(opts["batch_size"], n_rows))
    mask = data["attention_mask"][rows].to(torch.bool)
    n_tok = float(mask.sum())
    n_next = max(float((mask[:, 1:] & mask[:, :-1]).sum()), 1.0)
    shard = np.array_split(rows, world)[run["rank"]]
    sums = torch.zeros(2, dtype=torch.float64)
    if len(shard):
        device = next(iter(params.values())).device
        t_device = next(teacher.parameters(), torch.empty(0)).device
        batch = {k: v[shard] for k, v in data.items()}
        with torch.no_grad():
            t_out = teacher(**{k: v.to(t_device) for k, v in batch.items()})
        s_vec, kind = output_tensor(
            student(**{k: v.to(device) for k, v in batch.items()})
        )
        t_vec = output_tensor(t_out)[0].to(device)
        m = batch["attention_mask"].to(device).to(torch.bool)
        per = token_losses(s_vec, t_vec, kind, opts["loss"], opts["temperature"])
        distill = per[m].sum() / n_tok
        task = torch.zeros((), device=device)
        if opts["task_weight"] > 0:
            if kind != "logits":
                raise ValueError(
                    "task_weight > 0 needs next-token logits; the model returns "
                    "hidden states: pass task_weight=0."
                )
            pairs = m[:, 1:] & m[:, :-1]
            target = batch["input_ids"].to(device)[:, 1:][pairs]
            ce = F.cross_entropy(s_vec[:, :-1][pairs].float(), target, reduction="sum")
            task = ce / n_next
        (distill + opts["task_weight"] * task).backward()
        sums = torch.stack([distill.detach(), task.detach()]).double().cpu()
    grads = [
        p.grad if p.grad is not None else torch.zeros_like(p) for p in params.values()
    ]
    if world > 1:  # each shard's loss is over the global token count: sum
        flat = torch.cat([g.reshape(-1) for g in grads])
        torch.distributed.all_reduce(flat)
        torch.distributed.all_reduce(sums)
        grads = flat.split([g.numel() for g in grads])
    for p, g in zip(params.values(), grads):
        p.grad = g.view_as(p)
    if opts["max_grad_norm"] is not None:
        nn.utils.clip_grad_norm_(list(params.values()), opts["max_grad_norm"])
    run["optimizer"].step()
    run["optimizer"].zero_grad(set_to_none=True)
    distill, task = (float(v) for v in sums)
    return distill, task


def _report(history, run) -> None:
    """Print progress (rank 0) and write the checkpoint when due."""
    opts, rank = run["opts"], run["rank"]
    rec, n = history[-1], opts["max_steps"]
    done = rec["step"] == n
    every = 1 if opts["verbose"] >= 2 else max(1, n // 10)
    if opts["verbose"] and rank == 0 and (done or rec["step"] % every == 0):
        a0 = "" if rec["alpha0"] is None else f"  alpha0 {rec['alpha0']:.3g}"
        print(
            f"distill_ffn step {rec['step']}/{n}  loss {rec['loss']:.5g}{a0}  "
            f"{rec['seconds']:.2f} s/step",
            flush=True,
        )
    if run["path"] is None or not (done or rec["step"] % opts["checkpoint_every"] == 0):
        return
    if rank == 0:
        state = {
            "format": _CHECKPOINT_FORMAT,
            "fingerprint": run["fingerprint"],
            "step": rec["step"],
            "seed": run["seed"],
            "alpha0": run["alpha0"],
            "params": {n: p.detach().cpu().clone() for n, p in run["params"].items()},
            "optimizer": run["optimizer"].state_dict(),
            "history": history,
        }
        tmp = f"{run['path']}.tmp"
        torch.save(state, tmp)
        os.replace(tmp, run["path"])  # a run killed while writing keeps the last
    if run["world"] > 1:
        torch.distributed.barrier()
