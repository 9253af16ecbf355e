"""Packed bit inference (``sksign.deploy``) against the same nets in torch float32.

Prints one table of times and ratios measured side by side in one run (each
callable run back to back, best of several, wall time), for nets of two hidden
layers built by the estimators on 784 inputs and 10 classes (random weights:
speed does not depend on training, except through the firing rate, printed):

- BNN (Bi-Real binary MLP), DHN (HTAF MLP) and SNN (spiking MLP, T = 4);
- hidden widths 1024 and 4096; batches 1, 64 and 1024; 1 and 2 threads;
- "hidden": the second hidden layer alone (BNN: step, XNOR-popcount with the
  BatchNorm folded, residual add, against ``x + bn(linear(2 step(x) - 1))``
  with the binary weights precomputed as a float32 ``nn.Linear``; DHN: real
  weights on bits with the bias folded into a threshold, against
  ``step(linear(h))``; SNN: the same on spikes over T steps plus the
  integrate-and-fire neurons, against torch's layer and ``IFNeuron``);
- "model": the whole net end to end (first and last float layers included),
  ``module(x)`` under ``torch.no_grad()`` in eval against
  ``PackedNet.forward`` (for the BNN, torch's binary layers get their
  weights ``mean|W| * sign(W)`` computed once, as a torch deployment would;
  the note gives the net as built, which recomputes them at every call);
- weight bytes of the BNN hidden layer, packed over float32;
- the sign x sign kernel's multiply-accumulates per second, as a fraction of
  the machine's popcount peak measured here (XOR + popcount of L1-resident
  words, one thread).

``--images`` times instead the image nets whole (untrained, random inputs
of shape (3, 32, 32), 10 classes): Bi-Real ResNet-18 and ResNet-18 (step
activations) at width 16, WRN-10-2 and SEW-ResNet-18 (IF neurons, "add"
connections, T = 4) at width 16, torch eval ``module(x)`` under
``torch.no_grad()`` against the packed net (and against the packed net with
every layer run on its own, ``forward(..., fused=False)``: the speed-up of
the epilogue fusion, same run), batches 1 and 64 (or
``--batches``), one thread (or ``--threads 1 2``: both on that many);
``--nets`` picks some of them (``bireal``, ``resnet18``, ``wrn``,
``sew_resnet``).

``--kernel`` times the sign x sign kernel alone (the one ``xnor_kernel``
chooses for this CPU, on random words: batch rows x width bits x width
outputs; on AVX-512 VPOPCNTDQ the carry-save ``xnor_affine`` it replaces
beside it) on one thread and on two
(rows split, as the packed net splits them), in a process where torch runs
no operation, as in a deployment without torch: torch's idle OpenMP workers
share the cores with the packed layers in the in-process grid above.

``--summary`` prints what :func:`sksign.deploy.packed_summary` reports for
small nets trained on scikit-learn's digits (64 inputs, two hidden layers of
256 or ``--widths``, 10 classes, 5 epochs): the Heaviside MLP (``dhn``), the
binary MLP (``bnn``) and the spiking MLP (``snn``), batches 1, 64 and 256,
one thread: the packed ``predict`` and ``PackedNet.forward`` (no input
validation) against the torch module's own forward (eval, exact step,
``torch.inference_mode``, same threads); for the BNN also against torch with
its binary weights precomputed. It prints the CPU's vector features first.

Run: ``python benchmarks/bench_packed.py`` (full grid, a few minutes) or
``python benchmarks/bench_packed.py --quick`` (width 1024, batches 1 and 64,
one thread); ``--widths``, ``--batches``, ``--threads`` and ``--nets`` pick
a part of the grid.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import copy
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import print_machine
from _timing import best_of

from sksign.deploy import pack
from sksign.deploy._buffers import aligned
from sksign.deploy._kernels import (
    sign_products,
    xnor_affine,
    xnor_kernel,
    xnor_weights,
)
from sksign.deploy._ops._common import run_rows_cols as _run_rows_cols
from sksign.estimators import HTAFNetClassifier

N_FEATURES, N_CLASSES, TIME_STEPS = 784, 10, 4
#: Seconds of untimed runs before each timed one (see ``best_of``): torch's
#: OpenMP workers spin on the second core for 20-40 ms after torch's last call
#: (libgomp's default wait policy), which halved the packed nets' second
#: thread when they were timed right after torch (a two-thread hidden layer
#: 1.0-1.5 ms for 20-40 ms after a torch call, 0.63 ms after).
SETTLE = 0.05


def build(arch, width, seed=0):
    """A net of two hidden layers of `width`, built by the estimator (untrained)."""
    params = {"batch_norm": True} if arch == "bnn" else {}
    est = HTAFNetClassifier(
        (width, width),
        architecture={"dhn": "mlp"}.get(arch, arch),
        architecture_params=params,
        time_steps=TIME_STEPS,
        random_state=seed,
    ).initialize_for(N_FEATURES, classes=list(range(N_CLASSES)))
    module = est.module_.eval()
    if arch == "bnn":  # BatchNorm statistics of a trained net, roughly
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for m in module.modules():
                if isinstance(m, torch.nn.BatchNorm1d):
                    m.running_mean.normal_(0, 0.5, generator=g)
                    m.running_var.uniform_(0.5, 2.0, generator=g)
    return est, module


def precomputed(module):
    """A copy of a BinaryMLP whose binary layers are plain float32 Linears.

    ``BinaryLinear`` recomputes ``mean|W| * sign(W)`` at every forward; a
    deployment in torch would compute it once, so that is the baseline.
    """
    fast = copy.deepcopy(module)
    for i in range(fast.n_blocks):
        fc = getattr(fast, f"fc{i}")
        lin = torch.nn.Linear(fc.in_features, fc.out_features, bias=fc.bias is not None)
        with torch.no_grad():
            lin.weight.copy_(fc.binary_weight())
            if fc.bias is not None:
                lin.bias.copy_(fc.bias)
        setattr(fast, f"fc{i}", lin)
    return fast.eval()


def hidden_pair(arch, est, module, packed, X):
    """Torch and packed callables for the second hidden layer on X's activations."""
    net = packed.net_
    names = [lay["name"] for lay in net.layers]
    with torch.no_grad():
        x = torch.as_tensor(X)
        if arch == "bnn":
            stream = module.stem_bn(module.stem(x))
            a = module.act0(stream)
            stream = stream + module.bn0(module.fc0(2 * a - 1))
            lin = module.fc1  # binary weights precomputed (see precomputed)

            def torch_layer():
                with torch.no_grad():
                    return stream + module.bn1(lin(2 * module.act1(stream) - 1))

            layers = [net.layers[names.index(n)] for n in ("act1", "fc1", "block1")]
            kept = net.forward(X, keep=["block0"])
            env0 = {"block0": kept["block0"]}
            weight_ratio = (
                net.tensors["fc1.weight_bits"].nbytes
                + net.tensors["fc1.alpha"].nbytes
                + net.tensors["fc1.beta"].nbytes
            ) / (4 * lin.weight.numel())
        elif arch == "dhn":
            h = module.act0(module.fc0(x))

            def torch_layer():
                with torch.no_grad():
                    return module.act1(module.fc1(h))

            layers = [net.layers[names.index("fc1")]]
            env0 = {"act0": net.forward(X, keep=["act0"])["act0"]}
            weight_ratio = None
        else:  # snn
            z = module.fc0(x).unsqueeze(1).expand(-1, TIME_STEPS, -1)
            s0 = module.spike0(z)

            def torch_layer():
                with torch.no_grad():
                    return module.spike1(module.fc1(s0))

            layers = [net.layers[names.index(n)] for n in ("fc1", "spike1")]
            env0 = {"spike0": net.forward(X, keep=["spike0"])["spike0"]}
            weight_ratio = None

    def packed_layer(n_threads):
        env = dict(env0)
        for layer in layers:
            env[layer["output"]] = net._run(layer, env, len(X), n_threads)
        return env

    return torch_layer, packed_layer, weight_ratio


def firing_rate(packed, X, value):
    words = packed.net_.forward(X, keep=[value])[value]
    return float(packed.net_.unpack(value, words).mean())


#: The MLPs of the dense grid and the summary (``--nets`` without ``--images``).
DENSE_NETS = ("bnn", "dhn", "snn")

IMAGE_NETS = {
    "bireal": {"width": 16},
    "resnet18": {"width": 16},
    "wrn": {"depth": 10, "widen_factor": 2},
    "sew_resnet": {"width": 16},
}


def image_nets(nets, X):
    """``(name, torch module in eval mode, PackedNet)`` of each image net in
    `nets` (all if empty), untrained (seeded), for inputs shaped as `X`."""
    for arch, params in IMAGE_NETS.items():
        if nets and arch not in nets:
            continue
        est = HTAFNetClassifier(
            architecture=arch,
            architecture_params=params,
            time_steps=TIME_STEPS,
            random_state=0,
        ).initialize_for(
            X[0].size, classes=list(range(N_CLASSES)), input_shape=X.shape[1:]
        )
        yield arch, est.module_.eval(), pack(est).net_


def table_head(columns):
    """Print the head of a markdown table of `columns`."""
    print("| " + " | ".join(columns) + " |")
    print("|---" * len(columns) + "|")


def image_steps(batches, repeats, nets=None):
    """Per image net and batch, the time of each step of the packed forward
    (a layer, or a chain of layers run in one pass), one thread, best of
    `repeats`: where the time goes, the op's Python call included."""
    print_machine()
    rng = np.random.default_rng(0)
    X = rng.random((max(batches), 3, 32, 32), dtype=np.float32)
    table_head(["net", "batch", "step", "op", "ms", "share"])
    for arch, _, packed in image_nets(nets, X):
        for batch in batches:
            xf = X[:batch].reshape(batch, -1)
            packed.forward(xf)  # compiled, buffers made
            best = {}
            for _ in range(repeats):
                env = {"input": xf}
                for step in packed._fused_steps:
                    layer = step[0]
                    t0 = time.perf_counter()
                    env[layer["output"]] = packed._run_step(step, env, batch, 1)
                    took = time.perf_counter() - t0
                    key = (layer["output"], layer["op"])
                    best[key] = min(best.get(key, np.inf), took)
            total = sum(best.values())
            for (name, op), took in best.items():
                print(
                    f"| {arch} | {batch} | {name} | {op} | {took * 1e3:.3f} "
                    f"| {took / total:.1%} |"
                )
            print(f"| {arch} | {batch} | all steps | | {total * 1e3:.3f} | |")


def images(batches, repeats, nets=None, threads=(1,)):
    """One row per image net, thread count and batch: torch eval against the
    packed net, both on the same number of threads. Returns the rows (times
    in seconds)."""
    print_machine()
    print(f"# torch {torch.__version__}")
    rng = np.random.default_rng(0)
    X = rng.random((max(batches), 3, 32, 32), dtype=np.float32)
    speeds = ["torch (ms)", "packed (ms)", "speed-up", "layers one by one (ms)"]
    table_head(["net", "threads", "batch", *speeds, "speed-up"])
    rows = []
    for arch, module, packed in image_nets(nets, X):
        for n_threads in threads:
            torch.set_num_threads(n_threads)
            for batch in batches:
                xt, xf = torch.from_numpy(X[:batch]), X[:batch].reshape(batch, -1)

                def torch_model(xt=xt, module=module):
                    with torch.no_grad():
                        return module(xt)

                def packed_model(xf=xf, packed=packed, n_threads=n_threads):
                    return packed.forward(xf, n_threads)

                def one_by_one(xf=xf, packed=packed, n_threads=n_threads):
                    return packed.forward(xf, n_threads, fused=False)

                (tt, _), (tp, _), (tu, _) = best_of(
                    [torch_model, packed_model, one_by_one],
                    repeats,
                    warm=1,
                    settle=SETTLE,
                )
                print(
                    f"| {arch} | {n_threads} | {batch} | {tt * 1e3:.2f} "
                    f"| {tp * 1e3:.2f} | {tt / tp:.2f}x | {tu * 1e3:.2f} "
                    f"| {tt / tu:.2f}x |",
                    flush=True,
                )
                rows.append(
                    {
                        "net": arch,
                        "threads": n_threads,
                        "batch": batch,
                        "torch": tt,
                        "packed": tp,
                        "unfused": tu,
                    }
                )
    return rows


def summary(widths, batches, threads, repeats, nets):
    """packed_summary's figures for small nets trained on the digits.
    Returns the rows (times in seconds)."""
    from sklearn.datasets import load_digits

    from sksign.deploy import packed_summary

    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    print_machine()
    print(f"# torch {torch.__version__}")
    print(
        "| net | threads | batch | packed predict (ms) | packed forward (ms) "
        "| torch forward (ms) | predict vs torch | note |"
    )
    print("|---" * 8 + "|")
    out = []
    for arch in nets:
        for width in widths:
            est = HTAFNetClassifier(
                (width, width),
                architecture={"dhn": "mlp"}.get(arch, arch),
                time_steps=TIME_STEPS,
                max_epochs=5,
                random_state=0,
            ).fit(X, y)
            fast = precomputed(est.module_) if arch == "bnn" else None
            for n_threads in threads:
                packed = pack(est, n_jobs=n_threads)
                for batch in batches:
                    Xb = X[:batch]
                    rows, _ = packed_summary(
                        packed, Xb, reference=est, n_repeats=repeats
                    )
                    total = rows[-1]
                    # the forward on the same threads as predict (packed_summary
                    # times a bare PackedNet on one)
                    ((t_forward, _),) = best_of(
                        [partial(packed.net_.forward, Xb, n_threads)],
                        repeats,
                        settle=SETTLE,
                    )
                    note = ""
                    if arch == "bnn":
                        torch.set_num_threads(n_threads)
                        xt = torch.from_numpy(Xb)

                        def torch_pre(xt=xt, fast=fast):
                            with torch.inference_mode():
                                return fast(xt)

                        ((t_pre, _),) = best_of([torch_pre], repeats)
                        note = (
                            f"torch, binary weights precomputed: {t_pre * 1e3:.3f} ms "
                            f"(predict {t_pre / total['seconds_packed']:.2f}x)"
                        )
                    print(
                        f"| {arch} 64-{width}-{width}-10 | {n_threads} | {batch} "
                        f"| {total['seconds_packed'] * 1e3:.3f} "
                        f"| {t_forward * 1e3:.3f} "
                        f"| {total['seconds_reference'] * 1e3:.3f} "
                        f"| {total['speedup']:.2f}x | {note} |",
                        flush=True,
                    )
                    out.append(
                        {
                            "net": arch,
                            "width": width,
                            "threads": n_threads,
                            "batch": batch,
                            "predict": total["seconds_packed"],
                            "forward": t_forward,
                            "torch": total["seconds_reference"],
                        }
                    )
    return out


def kernel(widths, batches, repeats):
    """The sign x sign kernel alone, one and two threads, no torch operation;
    where the CPU has the vector popcount, the carry-save kernel it replaces
    beside it (one thread). Returns the rows (times in seconds, `of_peak`
    on one thread)."""
    rng = np.random.default_rng(0)
    peak = print_machine()[1]
    chosen = xnor_kernel()
    print(f"# sign x sign kernel: {chosen.__name__} ({sign_products()})")
    other = chosen is not xnor_affine
    print(
        "| width | batch | 1 thread (ms) | G bit-MAC/s | of peak "
        "| 2 threads (ms) | scaling |"
        + (" carry-save, 1 thread (ms) |" if other else "")
    )
    print("|---" * (7 + other) + "|")
    rows = []
    for width in widths:
        words = rng.integers(0, 2**63, (width // 64, width), dtype=np.uint64)
        alpha, beta = np.ones(width, np.float32), np.zeros(width, np.float32)
        for batch in batches:
            x = rng.integers(0, 2**63, (batch, width // 64), dtype=np.uint64)
            out = np.empty((batch, width), np.float32)
            # on cache lines, as a packed net's derived weights (deploy's ALIGN)
            args = (x, aligned(xnor_weights(words)), width, alpha, beta, out)
            runs = [
                partial(_run_rows_cols, chosen, batch, width, n, *args) for n in (1, 2)
            ]
            args = (x, words, width, alpha, beta, out)
            if other:
                runs.append(
                    partial(_run_rows_cols, xnor_affine, batch, width, 1, *args)
                )
            times = [t for t, _ in best_of(runs, repeats, warm=2, min_seconds=0.1)]
            one, two = times[:2]
            macs = batch * width * width
            print(
                f"| {width} | {batch} | {one * 1e3:.3f} | {macs / one / 1e9:.0f} "
                f"| {macs / one / peak:.0%} | {two * 1e3:.3f} | {one / two:.2f}x |"
                + (f" {times[2] * 1e3:.3f} |" if other else "")
            )
            rows.append(
                {
                    "width": width,
                    "batch": batch,
                    "one": one,
                    "two": two,
                    "of_peak": macs / one / peak,
                }
            )
    return rows


def dense(nets, widths, batches, threads, repeats=None):
    """The dense grid: per net, width, thread count and batch, the second
    hidden layer and the whole model, torch against packed. Returns the rows
    (times in seconds); `repeats` None picks 3 or 7 by the size."""
    rng = np.random.default_rng(0)
    X_all = rng.random((max(batches), N_FEATURES), dtype=np.float32)

    peak = print_machine()[1]
    print(f"# torch {torch.__version__}")
    header = (
        "| net | width | threads | batch | part | torch (ms) | packed (ms) "
        "| speed-up | note |"
    )
    print(header)
    print("|---" * 9 + "|")
    rows = []
    for arch in nets:
        for width in widths:
            est, module = build(arch, width)
            packed = pack(est)
            as_built = module
            if arch == "bnn":
                module = precomputed(module)
            fire = {"bnn": "act1", "dhn": "act0", "snn": "spike0"}[arch]
            rate = firing_rate(packed, X_all[:64], fire)
            for n_threads in threads:
                torch.set_num_threads(n_threads)
                for batch in batches:
                    X = X_all[:batch]
                    xt = torch.as_tensor(X)
                    t_layer, p_layer, weight_ratio = hidden_pair(
                        arch, est, module, packed, X
                    )

                    def torch_model(xt=xt, module=module):
                        with torch.no_grad():
                            return module(xt)

                    def packed_model(X=X, n_threads=n_threads, packed=packed):
                        return packed.net_.forward(X, n_threads)

                    def packed_hidden(n_threads=n_threads, p_layer=p_layer):
                        return p_layer(n_threads)

                    n_runs = repeats or (3 if batch * width >= 1024 * 4096 else 7)
                    # each callable's runs back to back (warm caches: the
                    # torch BNN streams its float weights through the cache)
                    tl, pl, tm, pm = (
                        best_of([fn], n_runs, settle=SETTLE)[0][0]
                        for fn in (t_layer, packed_hidden, torch_model, packed_model)
                    )
                    model_note = ""
                    if arch == "bnn":

                        def torch_built(xt=xt, module=as_built):
                            with torch.no_grad():
                                return module(xt)

                        ((tb, _),) = best_of([torch_built], min(n_runs, 3))
                        model_note = f"torch BinaryLinear as built: {tb * 1e3:.1f} ms"
                    note = f"firing {rate:.2f}"
                    if weight_ratio is not None:
                        note += f"; weights {1 / weight_ratio:.1f}x smaller"
                    if arch == "bnn":
                        macs = batch * width * width
                        note += f"; {macs / pl / 1e9:.0f} GMAC/s"
                        if n_threads == 1:
                            note += f" ({macs / pl / peak:.0%} of peak)"
                    for part, t_t, t_p in (("hidden", tl, pl), ("model", tm, pm)):
                        print(
                            f"| {arch} | {width} | {n_threads} | {batch} | {part} "
                            f"| {t_t * 1e3:.3f} | {t_p * 1e3:.3f} | {t_t / t_p:.2f}x "
                            f"| {note if part == 'hidden' else model_note} |",
                            flush=True,
                        )
                        rows.append(
                            {
                                "net": arch,
                                "width": width,
                                "threads": n_threads,
                                "batch": batch,
                                "part": part,
                                "torch": t_t,
                                "packed": t_p,
                            }
                        )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kernel", action="store_true", help="the XNOR kernel alone, no torch"
    )
    parser.add_argument("--images", action="store_true", help="the image nets")
    parser.add_argument(
        "--steps",
        action="store_true",
        help="with --images: the time of each step of the packed nets (1 thread)",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="packed_summary on small nets trained on the digits",
    )
    parser.add_argument("--quick", action="store_true", help="small grid only")
    parser.add_argument("--repeats", type=int, default=None, help="best of N runs")
    parser.add_argument("--widths", type=int, nargs="+", help="hidden widths")
    parser.add_argument("--batches", type=int, nargs="+", help="batch sizes")
    parser.add_argument("--threads", type=int, nargs="+", help="thread counts")
    parser.add_argument(
        "--nets",
        nargs="+",
        default=None,
        help="bnn, dhn, snn (default: all); with --images: bireal, resnet18, wrn, "
        "sew_resnet (default: all)",
    )
    args = parser.parse_args()
    if args.steps and not args.images:
        parser.error("--steps times the image nets: add --images")
    unknown = set(args.nets or ()) - set(IMAGE_NETS if args.images else DENSE_NETS)
    if unknown:
        kind = "image nets (--images)" if args.images else "nets (without --images)"
        parser.error(f"unknown {kind} {sorted(unknown)}")
    if args.images:
        if args.steps:
            image_steps(args.batches or [1, 64], args.repeats or 7, args.nets)
            return
        images(
            args.batches or [1, 64], args.repeats or 5, args.nets, args.threads or [1]
        )
        return
    if args.summary:
        summary(
            args.widths or [256],
            args.batches or [1, 64, 256],
            args.threads or [1],
            args.repeats or 20,
            args.nets or ["dhn", "bnn", "snn"],
        )
        return
    widths = args.widths or ([1024] if args.quick else [1024, 4096])
    batches = args.batches or ([1, 64] if args.quick else [1, 64, 1024])
    if args.kernel:
        kernel(widths, batches, args.repeats or 7)
        return
    threads = args.threads or ([1] if args.quick else [1, 2])
    dense(args.nets or DENSE_NETS, widths, batches, threads, args.repeats)


if __name__ == "__main__":
    main()
