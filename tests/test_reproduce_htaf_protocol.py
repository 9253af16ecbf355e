"""The comparison protocol of ``reproduce htaf`` (sksign._report.htaf_protocol).

Per row and method: every candidate is fitted on a part of the training set
and scored on a validation split of it; the best validation accuracy wins
(ties: the first); the winner is refitted per seed on the whole training set
and scored on the test set. Tiny MLP rows, 1 epoch, 2 seeds, 2 candidates.
"""

from dataclasses import replace
from io import StringIO

import numpy as np
import pytest
from sklearn.datasets import load_digits

from sksign._report import htaf_protocol as hp
from sksign._report import papers
from sksign._report._common import load_split
from sksign._report._resume import ResumableRun
from sksign._report.htaf_paper import Model, activations_table, reproduce_htaf

ROW = Model("DHN", "mlp", 1, None)


def _cfg(**kw):
    """The quick settings shrunk to a fraction of a second per net."""
    tiny = {
        "width": 8,
        "models": (("DHN", "mlp", 1),),
        "epochs": 1,
        "batch_size": 32,
        "seeds": 2,
        "lr_grid": (1e-3, 3e-2),
        "alpha_grid": ((2.0, 11.0, 0.1),),
        "grad_depth": 2,
        "grad_steps": 2,
        "icbm_backbones": ("mlp",),
        "icbm_hidden": (8,),
        "n_concepts": 4,
    }
    return replace(papers.HTAF_QUICK, **{**tiny, **kw})


@pytest.fixture(scope="module")
def data():
    """A small random data set: 4 classes of 12 features, 100 train / 40 test."""
    rng = np.random.RandomState(0)
    X = rng.rand(140, 12).astype(np.float32)
    y = (X[:, :2].sum(1) > 1).astype(int) + 2 * (X[:, 2] > 0.5)
    return X[:100], X[100:], y[:100], y[100:]


class Spy:
    """Replace :func:`htaf_protocol.evaluate`: record every scoring call and
    answer `scores(net)` (or the real accuracy when None)."""

    def __init__(self, monkeypatch, scores=None):
        self.calls = []
        self.scores = scores
        real = hp.evaluate

        def evaluate(net, X, y):
            self.calls.append((net.get_params(), np.asarray(X), np.asarray(y)))
            return real(net, X, y) if scores is None else scores(net.get_params())

        monkeypatch.setattr(hp, "evaluate", evaluate)


def test_quick_config_runs_the_four_families_on_padded_digits():
    """Check --quick: SEW-ResNet, Bi-Real, WRN-10-1 and a step ResNet-18 on
    the digits padded to (N, 3, 16, 16), 20 epochs, batch 128, 3 seeds, and
    the grids of the protocol (HTAF 6 candidates, STE and SS 2)."""
    cfg = papers.configs("htaf", "quick")
    assert cfg.dataset == "digits16"
    assert [(m[0], m[1].architecture, dict(m[1].params)) for m in cfg.models] == [
        ("SNN", "sew_resnet", {"width": 8}),
        ("BNN", "bireal", {"width": 8}),
        ("DHN", "wrn", {"depth": 10, "widen_factor": 1}),
        ("Step ResNet-18", "resnet18", {"width": 8}),
    ]
    assert (cfg.epochs, cfg.batch_size, cfg.seeds) == (20, 128, 3)
    assert papers.PAPER_HTAF["Step ResNet-18"]["C10"] == (None, None, None)
    X_train, X_test, y_train, y_test = load_split(cfg.dataset)
    assert X_train.shape == (1400, 3, 16, 16)
    assert X_test.shape == (397, 3, 16, 16)
    X, y = load_digits(return_X_y=True)
    order = np.random.RandomState(0).permutation(1797)
    np.testing.assert_array_equal(y_train, y[order[:1400]])
    np.testing.assert_array_equal(y_test, y[order[1400:]])
    np.testing.assert_allclose(
        X_test[:, 1, 4:12, 4:12], X[order[1400:]].reshape(-1, 8, 8) / 16
    )
    assert X_train[:, :, :4].max() == 0  # the padding
    assert [len(hp.candidates(cfg, a)) for a in cfg.activations] == [6, 2, 2]
    htaf = hp.candidates(cfg, "htaf")
    assert {c.lr for c in htaf} == {1e-3, 3e-3}
    assert sorted(
        {(c.alpha0, c.alpha1, c.alpha0_start) for c in htaf}, key=str
    ) == sorted(
        {(1.0, 22.0, 0.1), (2.0, 11.0, 0.1), (2.0, 11.0, None)},
        key=str,
    )
    assert all(
        (c.alpha0, c.alpha1) == (2.0, 11.0)
        for c in hp.candidates(cfg, "scaled_sigmoid")
    )


def test_quick_rows_train_on_padded_digits():
    """Check every quick row's net (its first HTAF candidate) fits and scores
    (N, 3, 16, 16) digits: one epoch on a few images."""
    cfg = replace(papers.configs("htaf", "quick"), batch_size=16)
    X_train, X_test, y_train, y_test = load_split(cfg.dataset)
    for name, spec in cfg.models:
        model = Model(name, spec.architecture, None, spec)
        cand = hp.candidates(cfg, "htaf")[0]
        net = hp.protocol_net(cfg, model, "htaf", cand, 0, "cpu", epochs=1)
        net.fit(X_train[:32], y_train[:32])
        assert 0 <= hp.evaluate(net, X_test[:16], y_test[:16]) <= 1


def test_every_net_gets_the_schedule_lr_and_annealing_explicitly():
    """Check each candidate's net: the cosine schedule, the lr and
    alpha0_start passed explicitly, annealing over the fit's epochs, no
    LRScheduler callback, the same batch size and epochs for every method."""
    cfg = papers.configs("htaf", "quick")
    model = Model("BNN", "bireal", None, cfg.models[1][1])
    for act in cfg.activations:
        for cand in hp.candidates(cfg, act):
            p = hp.protocol_net(cfg, model, act, cand, 1, "cpu").get_params()
            assert p["lr_schedule"] == "cosine"
            assert p["lr"] == cand.lr
            assert p["alpha0_start"] == cand.alpha0_start
            assert p["anneal_epochs"] == p["max_epochs"] == 20
            assert p["batch_size"] == 128
            assert p["random_state"] == 1
            assert p["architecture_params"] == {"width": 8}
            assert not p.get("callbacks")
            assert p.get("augment") is None
    assert hp.Candidate(1e-3, 2.0, 11.0, 0.1).describe("htaf") == (
        "lr 1e-3, (2, 11) annealed from 0.1"
    )
    assert (
        hp.Candidate(3e-4, 2.0, 11.0).describe("htaf")
        == "lr 3e-4, (2, 11) not annealed"
    )
    assert hp.Candidate(3e-3, 2.0, 11.0).describe("ste") == "lr 3e-3"
    paper = papers.configs("htaf", "paper")  # the lr grid scales the recipe's rate
    resnet = Model("SNN", "sew_resnet", None, paper.models[0][1])
    cand = hp.candidates(paper, "ste")[0]
    p = hp.protocol_net(paper, resnet, "ste", cand, 0, "cpu").get_params()
    assert p["lr"] == pytest.approx(0.03)
    assert p["lr_schedule"] == "cosine"
    assert not p.get("callbacks")


def test_tuning_picks_the_best_validation_score_never_the_test_set(monkeypatch, data):
    """Check the winner is the candidate with the best VALIDATION score, the
    candidates are scored on a stratified 20% of the training set only, and
    the refits (the chosen candidate, one per seed) alone see the test set."""
    cfg = _cfg()
    spy = Spy(monkeypatch, lambda p: {1e-3: 0.4, 3e-2: 0.6}[p["lr"]])
    res = hp.fit_row(cfg, data, ROW, "htaf", "cpu")
    assert res.val_scores == [0.4, 0.6]
    assert res.chosen == hp.candidates(cfg, "htaf")[1]
    X_train, X_test, y_train, y_test = data
    fit_idx, val_idx = hp.validation_split(cfg, y_train)
    assert len(val_idx) == 20
    assert not set(fit_idx) & set(val_idx)
    tuning, refits = spy.calls[:2], spy.calls[2:]
    for params, X, y in tuning:
        np.testing.assert_array_equal(X, X_train[val_idx])
        np.testing.assert_array_equal(y, y_train[val_idx])
        assert params["random_state"] == cfg.tune_seed
    assert [p["random_state"] for p, _, _ in refits] == [0, 1]
    for params, X, y in refits:
        assert (params["lr"], params["alpha0_start"]) == (3e-2, 0.1)
        np.testing.assert_array_equal(X, X_test)
        np.testing.assert_array_equal(y, y_test)


def test_permuted_test_labels_do_not_change_the_choice(data):
    """Check the choice and the validation scores (real fits) are the same
    when the test labels are shuffled: only the test scores move."""
    cfg = _cfg()
    X_train, X_test, y_train, y_test = data
    shuffled = np.random.RandomState(1).permutation(y_test)
    a = hp.fit_row(cfg, data, ROW, "ste", "cpu")
    b = hp.fit_row(cfg, (X_train, X_test, y_train, shuffled), ROW, "ste", "cpu")
    assert (a.best, a.val_scores) == (b.best, b.val_scores)
    assert a.test_scores != b.test_scores


def test_ties_go_to_the_first_candidate(monkeypatch, data):
    """Check equal validation scores choose the first candidate in grid order."""
    cfg = _cfg(alpha_grid=((2.0, 11.0, 0.1), (2.0, 11.0, None)), lr_grid=(1e-3,))
    spy = Spy(monkeypatch, lambda p: 0.5)
    res = hp.fit_row(cfg, data, ROW, "htaf", "cpu")
    assert res.best == 0
    assert all(p["alpha0_start"] == 0.1 for p, _, _ in spy.calls[2:])
    assert hp.first_best([0.3, 0.7, 0.7]) == 1


def _result(cfg, test, best=0):
    grid = hp.candidates(cfg, "htaf")
    return hp.RowResult(grid, [0.5] * len(grid), best, test)


def test_winner_column_and_note():
    """Check "Best (ours)" names a method only when its mean beats the
    runner-up's by more than the larger std, the chosen-candidate columns,
    and the note's count of rows HTAF loses to STE."""
    cfg = _cfg()
    models = [ROW, Model("BNN", "bnn", 2, None)]
    results = {
        # within std: 0.80 +- 0.028 vs 0.79 +- 0.0
        (0, "htaf"): _result(cfg, [0.78, 0.82], best=1),
        (0, "ste"): _result(cfg, [0.79, 0.79]),
        (0, "scaled_sigmoid"): _result(cfg, [0.60, 0.62]),
        # STE clearly ahead
        (1, "htaf"): _result(cfg, [0.70, 0.71]),
        (1, "ste"): _result(cfg, [0.90, 0.91]),
        (1, "scaled_sigmoid"): _result(cfg, [0.60, 0.61]),
    }
    table = activations_table(cfg, models, results, "Protocol.")
    best = table.cols.index("Best (ours)")
    assert table.rows[0][best] == "no clear winner (within std)"
    assert table.rows[1][best] == "STE"
    chosen = table.cols.index("HTAF: chosen")
    assert table.rows[0][chosen] == "lr 3e-2, (2, 11) annealed from 0.1"
    assert table.rows[0][chosen + 1] == "lr 1e-3"  # STE
    assert "HTAF loses to STE (a lower mean) in 1 of 2 rows" in table.note
    assert "by more than the larger std in 1 of them" in table.note
    csv = dict(zip(table.csv_cols, table.csv_rows[0]))
    assert (csv["htaf_lr"], csv["htaf_alpha0_start"], csv["best"]) == (3e-2, 0.1, None)
    assert csv["ste_chosen"] == "lr 1e-3"
    assert (
        hp.winner_text(["htaf", "ste"], [[0.9], [0.8]]) == "no clear winner (one seed)"
    )


def test_reproduce_htaf_states_the_protocol_and_resumes(tmp_path, data):
    """Check the whole run on tiny settings: the caption states the protocol,
    the tuning fits and refits are resumable cells with unique keys, and the
    run-time estimate counts the tuning fits."""
    cfg = _cfg()
    run = ResumableRun(tmp_path, "htaf", cfg)
    out = StringIO()
    first, grads, icbm = reproduce_htaf(
        cfg, show_progress=False, stream=out, run=run, data=data
    )
    assert "Expected training time" in out.getvalue()
    assert "(16 nets x 1 epochs" in out.getvalue()  # 6 tuning, 6 refits, 4 ICBM
    cells = sorted(p.stem for p in run.root.glob("cells/*.json"))
    assert len(cells) == len(set(cells)) == 6 + 6 + 2 * 2
    assert sum("-tune-" in c for c in cells) == 6
    for words in ("validation split of the training set", "cosine", "batch 32",
                  "mean ± std over 2 seed(s)", "exact step", "1 epochs",
                  "lr in {1e-3, 3e-2}"):  # fmt: skip
        assert words in first.caption, words
    assert [r[0] for r in first.rows] == ["DHN"]
    assert [r[0] for r in grads.rows] == ["HTAF", "STE", "SS"]
    assert icbm.rows[0][0].startswith("MLP (8,) + 4 concepts")
    again = ResumableRun(tmp_path, "htaf", cfg)
    tables = reproduce_htaf(
        cfg, show_progress=False, stream=StringIO(), run=again, data=data
    )
    assert again.reused == len(cells)
    assert tables[0].rows == first.rows


def test_gradient_norm_run_is_seeded_and_leaves_torch_global_stream_alone():
    """Check the figure's plain training loop: the same seed gives the same
    gradient norms, another seed others, and torch's global generator is
    where the caller left it."""
    import types

    import torch

    from sksign._report.htaf_paper import first_layer_grad_norms

    X, y = load_digits(return_X_y=True)
    data = ((X[:300] / 16).astype(np.float32), None, y[:300], None)
    cfg = types.SimpleNamespace(
        width=16, grad_depth=2, alpha0=2.0, alpha1=11.0, lr=1e-3, grad_steps=5,
        batch_size=32,
    )  # fmt: skip
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = first_layer_grad_norms(data, cfg, "htaf", 0, "cpu")
    assert torch.equal(torch.get_rng_state(), before)
    b = first_layer_grad_norms(data, cfg, "htaf", 0, "cpu")
    c = first_layer_grad_norms(data, cfg, "htaf", 1, "cpu")
    assert len(a) == 5
    assert a == b
    assert a != c
