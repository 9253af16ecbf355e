"""benchmarks/check_targets.py: the speed targets judged from the tables' rows."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_knn  # benchmarks/bench_knn.py
import bench_packed  # benchmarks/bench_packed.py
import check_targets  # benchmarks/check_targets.py


def _image(net, batch, speed, threads=1):
    return {"net": net, "threads": threads, "batch": batch, "torch": speed, "packed": 1}


def test_image_nets_need_2x_at_batch_1_4x_for_bireal_and_1_5x_at_64():
    """Check each bound and that it holds at equality; other batches are not judged."""
    rows = [
        _image("bireal", 1, 3.99),
        _image("bireal", 1, 4.0, threads=2),
        _image("wrn", 1, 2.0),
        _image("wrn", 1, 1.99, threads=2),
        _image("resnet18", 64, 1.5),
        _image("sew_resnet", 64, 1.49),
        _image("wrn", 8, 0.5),
    ]
    verdicts = check_targets.judge_images(rows)
    assert [v.met for v in verdicts] == [False, True, True, False, True, False]
    assert verdicts[0].bound == ">= 4.0x"
    assert verdicts[2].bound == ">= 2.0x"
    assert verdicts[3].where == "wrn, batch 1, 2 thread(s)"


def test_knn_bounds_by_width_and_the_peak_for_every_row():
    """Check 0.33x faiss from d = 1024, 0.6x at d = 256, none at d = 64, 50% of
    the peak everywhere, and a row without faiss as not measured."""
    base = {"n_train": 10_000, "threads": 1, "faiss": 1.0}
    rows = [
        base | {"d": 1024, "ours": 0.33, "of_peak": 0.5},
        base | {"d": 4096, "ours": 0.34, "of_peak": 0.7},
        base | {"d": 256, "ours": 0.6, "of_peak": 0.49},
        base | {"d": 64, "ours": 5.0, "of_peak": 0.9},
        base | {"d": 1024, "ours": 0.1, "of_peak": 0.9, "faiss": None},
    ]
    verdicts = check_targets.judge_knn(rows)
    assert [(v.target.split(",")[0], v.met) for v in verdicts] == [
        ("k-NN time / faiss", True),
        ("k-NN search", True),
        ("k-NN time / faiss", False),
        ("k-NN search", True),
        ("k-NN time / faiss", True),
        ("k-NN search", False),
        ("k-NN search", True),
        ("k-NN time / faiss", None),
        ("k-NN search", True),
    ]


def test_kernel_dense_and_summary_judge_only_their_grid():
    """Check the kernel is judged at width >= 1024 and batch >= 64 (80% of the
    peak), the DHN hidden layer at batch >= 64 (1.5x), the digits MLP at
    batches 1 and 256 (1x); other rows are left out."""
    kernel = [
        {"width": w, "batch": b, "of_peak": p}
        for w, b, p in [
            (1024, 64, 0.8),
            (4096, 1024, 0.79),
            (512, 64, 0.1),
            (1024, 1, 0.1),
        ]
    ]
    assert [v.met for v in check_targets.judge_kernel(kernel)] == [True, False]
    dense = [
        {"net": n, "width": 1024, "threads": 2, "batch": b, "part": part}
        | {"torch": t, "packed": 1.0}
        for n, b, part, t in [
            ("dhn", 64, "hidden", 1.5),
            ("dhn", 1024, "hidden", 1.4),
            ("dhn", 64, "model", 0.1),
            ("dhn", 1, "hidden", 0.1),
            ("bnn", 64, "hidden", 0.1),
        ]
    ]
    assert [v.met for v in check_targets.judge_dense(dense)] == [True, False]
    summary = [
        {"net": n, "width": w, "threads": 1, "batch": b, "torch": t, "predict": 1.0}
        for n, w, b, t in [
            ("dhn", 256, 1, 1.0),
            ("dhn", 256, 256, 0.9),
            ("dhn", 256, 64, 0.1),
            ("bnn", 256, 1, 0.1),
            ("dhn", 1024, 1, 0.1),
        ]
    ]
    assert [v.met for v in check_targets.judge_summary(summary)] == [True, False]


def test_verdicts_count_misses_and_skip_the_unmeasured(capsys):
    """Check the printed count and the returned number of misses."""
    verdicts = [
        check_targets.Verdict("a", "x", "1x", ">= 1x", True),
        check_targets.Verdict("b", "x", "0.5x", ">= 1x", False),
        check_targets.Verdict("c", "x", "-", "", None),
    ]
    assert check_targets.print_verdicts(verdicts) == 1
    out = capsys.readouterr().out
    assert "1 of 2 targets met (1 not measured)" in out
    assert "| b | x | 0.5x | >= 1x | **missed** |" in out


@pytest.fixture
def no_peak(monkeypatch):
    """The machine's header without measuring its popcount peak (seconds)."""
    peaks = {1: 1e15, 2: 1e15}
    monkeypatch.setattr(bench_packed, "print_machine", lambda *a, **k: peaks)
    return peaks


def test_the_tables_return_the_rows_the_judges_read(no_peak, capsys):
    """Check each benchmark table, run on a tiny grid, returns one row per
    point with the figures the judges read (a renamed key fails here, not
    after a 15-minute run)."""
    kernel = bench_packed.kernel([1024], [64], 1)
    assert len(check_targets.judge_kernel(kernel)) == 1
    assert 0 < kernel[0]["of_peak"] < 1  # against a peak of 1e15 bit-ops/s
    dense = bench_packed.dense(["dhn"], [64], [64], [1], 1)
    assert [r["part"] for r in dense] == ["hidden", "model"]
    assert len(check_targets.judge_dense(dense)) == 1
    summary = bench_packed.summary([256], [1], [1], 1, ["dhn"])
    assert len(check_targets.judge_summary(summary)) == 1
    images = bench_packed.images([1], 1, ["bireal"], [1])
    assert [v.bound for v in check_targets.judge_images(images)] == [">= 4.0x"]
    rng = bench_packed.np.random.default_rng(0)
    knn = bench_knn.search(rng, [300], [256], 20, 1, no_peak)
    assert [r["threads"] for r in knn] == [1, 2]
    assert len(check_targets.judge_knn(knn)) == 4
    assert "| bireal | 1 | 1 |" in capsys.readouterr().out


def test_best_of_runs_short_calls_until_min_seconds():
    """Check that best_of adds rounds, interleaved, until every function's
    timed runs add up to min_seconds, at most MAX_ROUNDS, and no more than
    `repeats` without it."""
    import time

    import _timing  # benchmarks/_timing.py

    calls = {"fast": 0, "slow": 0}

    def fast():
        calls["fast"] += 1

    def slow():
        calls["slow"] += 1
        time.sleep(0.002)

    best_of = _timing.best_of
    best_of([fast, slow], 3)
    assert calls == {"fast": 4, "slow": 4}  # a warm-up and 3 rounds
    calls.update(fast=0, slow=0)
    (t_fast, _), (t_slow, _) = best_of([fast, slow], 3, min_seconds=0.02)
    assert calls["fast"] == calls["slow"]  # rounds run every function
    # the fast one never reaches 20 ms: the rounds stop at the cap
    assert calls["fast"] == _timing.MAX_ROUNDS + 1
    assert t_slow >= 0.002 > t_fast
    calls.update(slow=0)
    best_of([slow], 1, min_seconds=0.02)
    assert 1 < calls["slow"] - 1 <= 10  # 2 ms or more a run: at most 10 rounds
