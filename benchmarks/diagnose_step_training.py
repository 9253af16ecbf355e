"""Why a step net trains or not: gradients, loss and the surrogate's reach.

For each architecture (default: ResNet-18 width 8 and Bi-Real ResNet-18 width
8) and each step activation (HTAF(2, 11), STE with the clipped identity,
scaled sigmoid k = 22), one fit on the digits padded to 3x16x16 (the split
of ``bench_step_recipes.py``) records

- the training loss per epoch;
- the gradient norm of every convolution/linear weight, averaged over the
  epoch's batches (layers in forward order);
- the share of pre-activations where the activation passes gradient, per
  epoch: the units whose derivative (autograd of the training function, the
  surrogate for STE) is at least 1% of its value at 0, read on one training
  batch in ``train()`` mode;
- the held-out accuracy with the exact step at the end.

``--recipe old`` trains with Adam 1e-3 at a constant rate without annealing
(the defaults before 0.x), ``--recipe defaults`` with every default of the
estimator, ``--recipe both`` (the default) both. It writes
``step_training.json`` and ``step_training.png`` into ``--out``.

Run: ``python benchmarks/diagnose_step_training.py [--archs resnet18 bireal]
[--epochs 20] [--recipe both] [--out DIR]``; about 8 minutes on 2 cores.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import json
from pathlib import Path

import numpy as np
from bench_step_recipes import PARAMS, padded_digits

ACTIVATIONS = ("htaf", "ste", "scaled_sigmoid")
RECIPES = {
    "old": {"lr": 1e-3, "lr_schedule": "constant", "alpha0_start": None},
    "defaults": {},
}


def gradient_window(net, X, share=0.01):
    """Per step activation, the share of units with derivative >= share * f'(0)."""
    import torch

    from sksign.nn import StepActivation, forward_hooks

    module = net.module_
    acts = [m for m in module.modules() if isinstance(m, StepActivation)]
    seen = {id(a): [] for a in acts}

    def record(act, args):
        x = args[0].detach().float().requires_grad_(True)
        with torch.enable_grad():
            (d,) = torch.autograd.grad(act.smooth(x).sum(), x)
            zero = torch.zeros(1, requires_grad=True)
            (d0,) = torch.autograd.grad(act.smooth(zero).sum(), zero)
        seen[id(act)].append(float((d >= share * d0).float().mean()))

    flags = [(m, m.training) for m in module.modules()]
    try:
        module.train()
        with forward_hooks(pre=[(a, record) for a in acts]), torch.no_grad():
            module(torch.as_tensor(X, device=net.device))
    finally:
        for m, training in flags:
            m.training = training
    return [float(np.mean(seen[id(a)])) for a in acts]


def fit_and_record(arch, activation, recipe, epochs, seed=0):
    import torch
    from skorch.callbacks import Callback

    from sksign.estimators import HTAFNetClassifier

    torch.set_num_threads(1)
    X_train, X_test, y_train, y_test = padded_digits()
    probe = X_train[:256]
    grads, windows = [], []

    class Recorder(Callback):
        def on_epoch_begin(self, net, **kwargs):
            self.sums, self.n = None, 0

        def on_grad_computed(self, net, named_parameters, **kwargs):
            norms = [
                float(p.grad.norm())
                for name, p in named_parameters
                if name.endswith("weight") and p.grad is not None and p.dim() >= 2
            ]
            self.sums = norms if self.sums is None else np.add(self.sums, norms)
            self.n += 1

        def on_epoch_end(self, net, **kwargs):
            grads.append((np.asarray(self.sums) / self.n).tolist())
            windows.append(gradient_window(net, probe))

    net = HTAFNetClassifier(
        architecture=arch,
        architecture_params=PARAMS[arch],
        activation=activation,
        max_epochs=epochs,
        random_state=seed,
        callbacks=[("diagnose", Recorder())],
        **RECIPES[recipe],
    ).fit(X_train, y_train)
    return {
        "arch": arch,
        "activation": activation,
        "recipe": recipe,
        "loss": [float(v) for v in net.history_[:, "train_loss"]],
        "grad_norms": grads,
        "window": windows,
        "test_acc": float(net.score(X_test, y_test)),
    }


def plot(runs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    archs = sorted({r["arch"] for r in runs})
    fig, axes = plt.subplots(
        len(archs), 3, figsize=(15, 4.2 * len(archs)), squeeze=False
    )
    colors = {"htaf": "C0", "ste": "C1", "scaled_sigmoid": "C2"}
    styles = {"old": "--", "defaults": "-"}
    for row, arch in zip(axes, archs):
        for r in (r for r in runs if r["arch"] == arch):
            label = f"{r['activation']}, {r['recipe']} ({r['test_acc']:.2f})"
            kw = {"color": colors[r["activation"]], "ls": styles[r["recipe"]]}
            epochs = np.arange(1, len(r["loss"]) + 1)
            row[0].plot(epochs, r["loss"], label=label, **kw)
            g = np.asarray(r["grad_norms"])
            row[1].semilogy(np.arange(1, g.shape[1] + 1), g[-1], **kw)
            row[2].plot(epochs, np.mean(r["window"], axis=1), **kw)
        row[0].set(title=f"{arch}: training loss", xlabel="epoch", ylabel="loss")
        row[1].set(
            title=f"{arch}: weight-gradient norm, last epoch",
            xlabel="layer (forward order)",
            ylabel="mean ||dL/dW|| per batch",
        )
        row[2].set(
            title=f"{arch}: units that get gradient",
            xlabel="epoch",
            ylabel="share with f'(x) >= 1% of f'(0)",
            ylim=(0, 1),
        )
        row[0].legend(fontsize=8, title="activation, recipe (held-out acc.)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", nargs="+", default=["resnet18", "bireal"])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--recipe", choices=["old", "defaults", "both"], default="both")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    from joblib import Parallel, delayed

    recipes = list(RECIPES) if args.recipe == "both" else [args.recipe]
    runs = Parallel(n_jobs=args.jobs)(
        delayed(fit_and_record)(arch, act, recipe, args.epochs)
        for arch in args.archs
        for act in ACTIVATIONS
        for recipe in recipes
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "step_training.json").write_text(json.dumps(runs))
    plot(runs, out / "step_training.png")
    print(f"{'arch':<10}{'activation':<16}{'recipe':<10}{'acc':>6}  window e1 -> last")
    for r in runs:
        w = np.mean(r["window"], axis=1)
        print(
            f"{r['arch']:<10}{r['activation']:<16}{r['recipe']:<10}"
            f"{r['test_acc']:>6.3f}  {w[0]:.2f} -> {w[-1]:.2f}"
        )


if __name__ == "__main__":
    main()
