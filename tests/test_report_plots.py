"""The demo's figures can be read: distinct legend handles, plain tick labels."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import pytest

pytest.importorskip("matplotlib")

import matplotlib.pyplot as plt

from sksign._report import plots


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _labels(axis, minor=False):
    axis.figure.canvas.draw()
    return [t.get_text() for t in axis.get_ticklabels(minor=minor) if t.get_text()]


def _style(handle):
    return handle.get_color(), handle.get_linestyle(), handle.get_marker()


def test_interventions_legend_tells_the_definitions_apart():
    alphas = [0.0, 0.1, 0.5, 1.0]
    curves = {
        (act, kind, d): [1.0, 0.9, 0.6, 0.3]
        for act in ("relu", "tanh")
        for kind, defs in (
            ("sign_flip", ("literal", "gate")),
            ("magnitude", ("standard", "matched")),
        )
        for d in defs
    }
    fig = plots.plot_interventions(curves, alphas)
    axes = fig.axes
    # the panels in the order the caption names them: sign flip first
    assert [ax.get_title() for ax in axes] == [
        "intervention: sign flip",
        "intervention: magnitude",
    ]
    for ax in axes:
        handles = ax.get_legend().legend_handles
        assert len(handles) == 4
        styles = [_style(h) for h in handles]
        assert len(set(styles)) == len(styles)
        # the two definitions of one activation share the colour, so they
        # must differ in both line style and marker (a marker hides short dashes)
        by_act = {}
        for h in handles:
            by_act.setdefault(h.get_color(), []).append(h)
        for pair in by_act.values():
            first, second = pair
            assert first.get_linestyle() != second.get_linestyle()
            assert first.get_marker() != second.get_marker()


def test_gate_dominance_width_ticks_at_the_widths_used():
    rows = {"relu": ([16, 64, 256], [3.0, 5.0, 9.0]), "tanh": ([16, 64], [30, 40])}
    fig = plots.plot_gate_dominance_width(rows)
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [16, 64, 256]
    assert _labels(ax.xaxis) == ["16", "64", "256"]
    assert _labels(ax.xaxis, minor=True) == []
    y_labels = _labels(ax.yaxis) + _labels(ax.yaxis, minor=True)
    assert y_labels
    for text in y_labels:
        float(text)  # plain numbers, no 3x10^1


def test_gate_dominance_width_small_z1_plain():
    """Z1 below 1: 0.1, not 1e-01 or 10^-1."""
    fig = plots.plot_gate_dominance_width({"silu": ([16, 512], [0.1, 0.5])})
    ax = fig.axes[0]
    labels = _labels(ax.yaxis) + _labels(ax.yaxis, minor=True)
    assert "0.1" in labels
    assert all("e" not in t and "$" not in t for t in labels), labels


def test_gate_dominance_width_narrow_range():
    """Two close widths: before, the minor labels overlapped (3x10^1 4x10^1)."""
    fig = plots.plot_gate_dominance_width({"relu": ([32, 40], [30.0, 40.0])})
    ax = fig.axes[0]
    assert _labels(ax.xaxis) == ["32", "40"]
    assert _labels(ax.xaxis, minor=True) == []


def test_grid_search_plain_alpha0_labels():
    fig = plots.plot_grid_search([1.0, 2.0, 3.0], [0.9, 0.92, 0.91], [0.01] * 3)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert list(ax.get_xticks()) == [1.0, 2.0, 3.0]
    assert _labels(ax.xaxis) == ["1", "2", "3"]
    assert _labels(ax.xaxis, minor=True) == []


def test_grid_search_fractional_alpha0():
    fig = plots.plot_grid_search([0.5, 1.0, 5.0], [0.9, 0.92, 0.91], [0.01] * 3)
    assert _labels(fig.axes[0].xaxis) == ["0.5", "1", "5"]
