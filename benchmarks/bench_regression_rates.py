"""Learning rates of HTAF nets in nonparametric regression (Friedman 1-3).

The HTAF paper claims that deep Heaviside nets reach near-minimax rates in
nonparametric regression. This benchmark measures the excess risk
``E[(f_hat(x) - f(x))^2]`` (the test MSE against the noiseless function, on
5,000 fresh test points) as the training set grows from 500 to 20,000 rows
on scikit-learn's ``make_friedman1`` (noise 1.0), ``make_friedman2`` (noise
125) and ``make_friedman3`` (noise 0.1), the noise levels of Friedman (1991)
and Breiman (1996), for

- ``HTAFNetRegressor()`` with its defaults, predicting with the exact step
  (``inference="step"``: hidden units are bits, the prediction is piecewise
  constant) and, from the same fit, with the smooth HTAF
  (``inference="smooth"``);
- ``MLPRegressor(max_iter=1000)`` (ReLU, scikit-learn's defaults);
- ``HistGradientBoostingRegressor()`` (scikit-learn's defaults).

Every model gets standardised features (``StandardScaler`` in a pipeline;
the trees do without) and the raw targets. The table reports the excess
risk divided by the noise variance at each n, and the slope of
``log(excess risk)`` against ``log(n)`` fitted by least squares per model and
data set: the rate exponent (-1 is the parametric rate; smaller magnitudes
are slower). ``--plot PATH`` writes the log-log figure; ``--csv PATH`` the
raw numbers.

Run: ``python benchmarks/bench_regression_rates.py [--sizes N ...]
[--data NAME ...] [--threads N] [--plot PATH] [--csv PATH]``
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import csv
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import make_friedman1, make_friedman2, make_friedman3
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sksign.estimators import HTAFNetRegressor

RANDOM_STATE = 0
N_TEST = 5000
SIZES = (500, 1000, 2000, 5000, 10000, 20000)

#: name -> (generator, noise standard deviation)
DATA = {
    "friedman1": (make_friedman1, 1.0),
    "friedman2": (make_friedman2, 125.0),
    "friedman3": (make_friedman3, 0.1),
}

MODELS = (
    "HTAF (exact step)",
    "HTAF (smooth)",
    "MLPRegressor",
    "HistGradientBoosting",
)


def draw(name, n, noise, seed):
    """``n`` training rows with noise and the noiseless test set."""
    make, _ = DATA[name]
    X, y = make(n_samples=n, noise=noise, random_state=seed)
    return X, y


def excess_risks(name, n, seed=RANDOM_STATE):
    """Test MSE against the noiseless function, per model, for one (data, n)."""
    _, noise = DATA[name]
    X, y = draw(name, n, noise, seed)
    X_test, f_test = draw(name, N_TEST, 0.0, seed + 1000)
    out = {}
    htaf = make_pipeline(StandardScaler(), HTAFNetRegressor(random_state=seed))
    htaf.fit(X, y)
    out["HTAF (exact step)"] = np.mean((htaf.predict(X_test) - f_test) ** 2)
    htaf.set_params(htafnetregressor__inference="smooth")
    out["HTAF (smooth)"] = np.mean((htaf.predict(X_test) - f_test) ** 2)
    mlp = make_pipeline(
        StandardScaler(), MLPRegressor(max_iter=1000, random_state=seed)
    )
    out["MLPRegressor"] = np.mean((mlp.fit(X, y).predict(X_test) - f_test) ** 2)
    hgb = HistGradientBoostingRegressor(random_state=seed)
    out["HistGradientBoosting"] = np.mean((hgb.fit(X, y).predict(X_test) - f_test) ** 2)
    return out


def slope(sizes, risks):
    """Least-squares slope of log(risk) against log(n)."""
    return float(np.polyfit(np.log(sizes), np.log(risks), 1)[0])


def plot(results, sizes, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6))
    axes = np.atleast_1d(axes)
    for ax, (name, table) in zip(axes, results.items(), strict=True):
        noise_var = DATA[name][1] ** 2
        for model in MODELS:
            risks = np.array(table[model]) / noise_var
            ax.loglog(
                sizes,
                risks,
                "o-",
                label=f"{model} (slope {slope(sizes, risks):.2f})",
            )
        ax.set_title(name)
        ax.set_xlabel("training rows n")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("excess risk / noise variance")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--data", nargs="*", default=list(DATA), choices=list(DATA))
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--plot", default=None, help="write the log-log figure")
    parser.add_argument("--csv", default=None, help="write the raw numbers")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)

    sizes = sorted(args.sizes)
    results, rows = {}, []
    for name in args.data:
        table = {model: [] for model in MODELS}
        for n in sizes:
            t0 = time.perf_counter()
            for model, risk in excess_risks(name, n).items():
                table[model].append(risk)
                rows.append((name, n, model, risk))
            print(f"# {name} n={n}: {time.perf_counter() - t0:.0f} s", flush=True)
        results[name] = table

    print("\nExcess risk / noise variance (test MSE against the noiseless f)")
    for name, table in results.items():
        noise_var = DATA[name][1] ** 2
        print(f"\n{name}")
        print(f"| model | {' | '.join(f'n={n}' for n in sizes)} | slope |")
        print(f"|---|{'---|' * len(sizes)}---|")
        for model in MODELS:
            risks = np.array(table[model]) / noise_var
            cells = " | ".join(f"{r:.3f}" for r in risks)
            print(f"| {model} | {cells} | {slope(sizes, risks):.2f} |")
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["data", "n", "model", "excess_risk"])
            writer.writerows(rows)
    if args.plot:
        plot(results, sizes, args.plot)


if __name__ == "__main__":
    main()
