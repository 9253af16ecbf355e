"""benchmarks/bench_cuda.py, the GPU script, at a CPU's size (slow)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_cuda_script_runs_its_small_setting_on_the_cpu():
    """Check the script's CPU setting trains both nets, reads the codes, runs
    the device test files and prints its table with exit status 0."""
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench_cuda.py", "--small", "--device", "cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    table = {}
    for line in proc.stdout.splitlines():
        if line.startswith("| ") and not line.startswith("| quantity"):
            key, value = line.strip("| ").split(" | ", 1)
            table[key] = value
    assert float(table["HTAF / ReLU"]) > 0
    assert 0.0 <= float(table["test accuracy HTAF (exact step)"]) <= 1.0
    assert "passed" in table["device test files"]
    assert "failed" not in table["device test files"]
