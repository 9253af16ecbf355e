"""``reproduce --scale small|paper``: the papers' architectures and recipes.

The same code path as the full runs, on shrunken settings: a few hundred
full-MNIST images, one epoch, nets a few channels wide. The full runs and
their tables are in benchmarks/README.md.
"""

from dataclasses import replace
from io import StringIO

import numpy as np
import pytest
import torch
from skorch.callbacks import LRScheduler

from sksign._report import papers
from sksign._report._common import load_split
from sksign._report.fitting import (
    make_classifier,
    recipe_of,
    recipe_params,
    recipes_text,
)
from sksign._report.reproduce import _with_epochs, load_data, run_reproduce
from sksign._report.tables import read_markdown_tables

NetSpec = papers.NetSpec


def _tiny(table):
    """The small scale's settings, shrunk to seconds."""
    cfg = papers.configs(table, "small")
    common = {"max_train": 300, "max_test": 120, "epochs": 1, "batch_size": 64}
    if table == "signcode":
        return replace(
            cfg,
            widths=(16,),
            depth=2,
            n_repeats=1,
            nets=(
                NetSpec("resnet18", (("width", 2),), 2, epochs=1),
                NetSpec(
                    "vit",
                    (("dim", 16), ("depth", 1), ("heads", 2), ("mlp_dim", 32)),
                    16,
                    epochs=1,
                ),
            ),
            **common,
        )
    return replace(
        cfg,
        width=16,
        grad_depth=2,
        grad_steps=2,
        time_steps=2,
        models=(
            ("SNN", NetSpec("sew_resnet", (("width", 2), ("blocks", (1, 1, 1, 1))))),
            ("BNN", NetSpec("bireal", (("width", 2),), 2)),
            ("DHN", NetSpec("wrn", (("depth", 10), ("widen_factor", 1)), 16)),
            ("Step ResNet-18", NetSpec("resnet18", (("width", 2),), 2)),
        ),
        # one candidate per method, one seed: the protocol's code path
        lr_grid=(1e-3,),
        alpha_grid=((2.0, 11.0, 0.1),),
        seeds=1,
        icbm_nets=(NetSpec("resnet18", (("width", 2),), 2),),
        n_concepts=8,
        # 4 rows x 3 methods x (a tuning fit + a refit): fewer, smaller batches
        **{**common, "max_train": 150, "max_test": 60, "batch_size": 32},
    )


def test_scales_name_the_papers_architectures():
    """Check each scale's data set and nets: small and paper run the papers'
    architectures (reduced width on MNIST, full width on CIFAR-10)."""
    assert papers.SCALES == ("quick", "full", "small", "paper")
    small, paper = (
        papers.configs("signcode", "small"),
        papers.configs("signcode", "paper"),
    )
    assert (small.dataset, paper.dataset) == ("mnist", "cifar10")
    assert [s.architecture for s in paper.nets] == ["resnet18", "vit"]
    assert dict(paper.nets[0].params) == {"width": 64}
    assert dict(paper.nets[1].params) == {
        "dim": 256,
        "depth": 6,
        "heads": 8,
        "mlp_dim": 512,
    }
    assert paper.widths == (1024,)
    assert paper.depth == 6
    htaf = papers.configs("htaf", "paper")
    assert [(m[0], m[1].architecture) for m in htaf.models] == [
        ("SNN", "sew_resnet"),
        ("BNN", "bireal"),
        ("DHN", "wrn"),
    ]
    assert dict(htaf.models[2][1].params) == {"depth": 28, "widen_factor": 10}
    assert htaf.seeds == 5
    assert htaf.time_steps == 4
    assert papers.configs("signcode", "small").recipes  # the papers' recipes
    assert not papers.configs("htaf", "small").recipes  # Adam, lr tuned per method
    assert papers.configs("htaf", "paper").recipes
    for table in ("signcode", "htaf"):
        assert not papers.configs(table, "quick").recipes


@pytest.mark.parametrize(
    ("dataset", "augment"),
    [("cifar10", "crop_flip"), ("cifar100", "crop_flip"), ("svhn", "crop")],
)
def test_recipes_become_estimator_parameters(dataset, augment):
    """Check the ResNet recipe is SGD + momentum + weight decay + a cosine
    schedule over the net's epochs, with flips only where labels survive
    them; the quick scale keeps Adam at the config's lr."""
    cfg = replace(papers.configs("signcode", "paper"), dataset=dataset)
    spec = cfg.nets[0]
    net = make_classifier(cfg, (), "relu", 3, "cpu", spec=spec)
    p = net.get_params()
    assert p["optimizer"] is torch.optim.SGD
    assert p["lr"] == 0.1
    assert p["optimizer__momentum"] == 0.9
    assert p["optimizer__weight_decay"] == 5e-4
    assert p["max_epochs"] == spec.epochs == 200
    assert p["architecture"] == "resnet18"
    assert p["architecture_params"] == {"width": 64}
    assert p["random_state"] == 3
    ((name, sched),) = p["callbacks"]
    assert name == "cosine"
    assert isinstance(sched, LRScheduler)
    assert sched.kwargs["T_max"] == 200
    if augment == "crop_flip":
        assert p["augment"] == "crop_flip"
    else:  # crops alone: a flipped house number is another number
        assert p["augment"].keywords == {"flip": False}
    vit = make_classifier(cfg, (), "gelu", 0, "cpu", spec=cfg.nets[1]).get_params()
    assert vit["optimizer"] is torch.optim.AdamW
    assert vit["criterion__label_smoothing"] == 0.1
    quick = make_classifier(papers.configs("signcode", "quick"), (8,), "relu", 0, "cpu")
    assert quick.get_params()["optimizer"] is torch.optim.Adam
    assert "augment" not in recipe_params(recipe_of(cfg, "mlp"), 5, "cpu")
    mnist = replace(cfg, dataset="mnist")
    assert recipe_of(mnist, "resnet18").augment is None
    on_cuda = recipe_params(recipe_of(cfg, "resnet18"), 5, "cuda")
    assert on_cuda["mixed_precision"]
    assert on_cuda["channels_last"]
    assert "channels_last" not in recipe_params(recipe_of(cfg, "resnet18"), 5, "cpu")


def test_htaf_small_scale_keeps_the_protocol_within_two_hours():
    """Check --scale small for htaf: its rows (ResNet-18 and Bi-Real among
    them) on MNIST padded to 32x32, 3 seeds, the cosine schedule over at least
    100 optimiser steps (annealing needs them), and the smaller grid that
    keeps the tuning fits affordable."""
    small = papers.configs("htaf", "small")
    assert small.dataset == "mnist"
    assert {"bireal", "resnet18"} <= {m[1].architecture for m in small.models}
    assert small.seeds >= 3
    steps = small.epochs * -(-small.max_train // small.batch_size)
    assert steps >= 100
    assert small.epochs * small.max_train <= 20_000
    assert small.lr_schedule == "cosine"
    assert small.lr_grid == (1e-3, 3e-3)
    assert small.alpha_grid == ((2.0, 11.0, 0.1), (2.0, 11.0, None))


def test_recipes_text_names_a_shared_recipe_once():
    """Check the captions name one shared recipe once and mixed ones per net."""
    quick = papers.configs("htaf", "quick")
    shared = recipe_of(quick, "mlp").describe()
    nets = [("SNN", "snn"), ("BNN", "bnn"), ("DHN", "mlp")]
    assert recipes_text(quick, nets) == shared
    paper = papers.configs("signcode", "paper")
    mixed = [("FFNN", "mlp"), ("ResNet-18", "resnet18"), ("ViT", "vit")]
    texts = {label: recipe_of(paper, arch).describe() for label, arch in mixed}
    assert len(set(texts.values())) > 1
    assert recipes_text(paper, mixed) == "; ".join(
        sorted(f"{label}: {text}" for label, text in texts.items())
    )


def test_epochs_override_every_net():
    """Check --epochs sets the image nets' own epochs too."""
    for table in ("signcode", "htaf"):
        cfg = _with_epochs(papers.configs(table, "paper"), 2)
        specs = cfg.nets if table == "signcode" else [m[1] for m in cfg.models]
        assert all(s.epochs == 2 for s in specs)


def test_full_mnist_split_is_the_published_one():
    """Check the small scale trains on MNIST's 60,000 images and tests on its
    10,000, padded to 32x32 for the CIFAR architectures."""
    X_train, X_test, _y_train, y_test = load_split("mnist")
    assert X_train.shape == (60000, 1, 32, 32)
    assert X_test.shape == (10000, 1, 32, 32)
    assert np.bincount(y_test).tolist()[:3] == [980, 1135, 1032]
    assert X_train[:, :, :2].max() == 0  # the padding
    X_small, _, y_small, _ = load_split("mnist", max_train=500)
    assert len(X_small) == 500
    assert np.bincount(y_small).min() >= 40  # stratified


@pytest.mark.parametrize("table", ["signcode", "htaf"])
def test_small_scale_code_path(tmp_path, table):
    """Check the small scale's tables on tiny settings: every image net gets
    its row, the papers' numbers stand beside the ResNet-18 and ViT rows,
    the ViT's gate dominance is n/a (a LayerNorm precedes its readout), and
    a second run reads every cell back."""
    cfg = _tiny(table)
    data = load_split("mnist", max_train=cfg.max_train, max_test=cfg.max_test)
    out = StringIO()
    assert (
        run_reproduce(
            table,
            scale="small",
            out=tmp_path,
            progress=False,
            stream=out,
            loaded=(cfg, data),
        )
        == 0
    )
    md = (tmp_path / f"{table}_table.md").read_text(encoding="utf-8")
    assert "(small scale)" in md
    assert "python -m sksign reproduce " + table + " --scale small" in md
    tables = read_markdown_tables(md)
    if table == "signcode":
        acc, _, gate = tables
        nets = [r[-1] for r in acc[1:]]
        assert nets == ["FFNN d=2", "ResNet-18", "ViT"] * 4
        silu_resnet = next(
            r for r in acc[1:] if r[:1] == ["SiLU"] and r[-1] == "ResNet-18"
        )
        assert "95.12" in silu_resnet
        vit_gate = [r for r in gate[1:] if r[-1] == "ViT"]
        assert all(r[1] == "n/a" for r in vit_gate)
        resnet_gate = [r for r in gate[1:] if r[-1] == "ResNet-18"]
        assert all(r[1] != "n/a" for r in resnet_gate)
    else:
        first, _, icbm = tables
        assert [r[0] for r in first[1:]] == ["SNN", "BNN", "DHN", "Step ResNet-18"]
        assert first[4][first[0].index("Paper C10 HTAF / STE / SS")] == "-"
        assert first[1][first[0].index("STE: chosen")] == "lr 1e-3"
        assert "SEW-ResNet" in first[1][1]
        assert "T=2" in first[1][1]
        assert icbm[1][0].startswith("ResNet-18 (width=2)")
    again = StringIO()
    run_reproduce(
        table, scale="small", out=tmp_path, progress=False, stream=again,
        loaded=(cfg, data),
    )  # fmt: skip
    assert "Resumed:" in again.getvalue()
    assert (
        read_markdown_tables(
            (tmp_path / f"{table}_table.md").read_text(encoding="utf-8")
        )
        == tables
    )


def test_load_data_names_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match="--data-dir"):
        load_data("signcode", scale="paper")
    with pytest.raises(FileNotFoundError, match="data_batch_1"):
        load_data("htaf", scale="paper", data_dir=tmp_path)
