"""``inductor-flydsl report`` with low-confidence winners: shown flagged in the winners
table, left out of the geomean with a note (also when every winner is low); output folders
that do not exist are created; the plot's legend covers no bar and no label. Real SQLite
files written through TuningDB, the report through a real CLI subprocess."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import run_cli, sweep_env

from inductor_flydsl.db.store import CandidateResult, TuningDB
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.noise import CONFIDENT, LOW, Confidence
from inductor_flydsl.provenance.software import current_software
from inductor_flydsl.report import LOW_FLAG, load_report, speedup_figure

DEVICE = DeviceInfo(kind="cpu", arch="x86_64-AVX2", name="test cpu", compute_units=2)


def _db(path: Path, winners: list[tuple[int, float, str]]) -> dict[str, float]:
    """One mm problem per (M, ATen time over the winner's, confidence); the C++ candidate
    wins at 1.0 ms. Returns each problem's speedup by summary."""
    db = TuningDB.open(path, writable=True)
    speedups = {}
    try:
        for m, aten_ms, level in winners:
            problem = synthetic_problem("mm", m, 64, 64, dtype="float32", layout="nn")
            results = [CandidateResult("cpp-a", "cpp", "cpp-a", {}, 1.0),
                       CandidateResult("aten-mm", "aten", "mm", {}, aten_ms)]
            db.record_selection(DEVICE, current_software(), problem, results,
                                Confidence(level, "machine busy: test" if level == LOW
                                           else "separated", runner_up_ms=aten_ms))
            speedups[problem.summary()] = aten_ms
    finally:
        db.close()
    return speedups


def _flagged_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|") and LOW_FLAG in line]


def test_low_winners_flagged_and_left_out_of_geomean(tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    speedups = _db(db, [(16, 2.0, CONFIDENT), (32, 8.0, CONFIDENT), (48, 50.0, LOW)])
    out = tmp_path / "new" / "folder" / "report.md"
    plot = tmp_path / "plots" / "deep" / "speedup.png"
    csv = tmp_path / "tables" / "report.csv"
    proc = run_cli(["report", "--db", str(db), "--out", str(out), "--plot", str(plot),
                    "--csv", str(csv), "--json"], sweep_env(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert out.is_file() and plot.is_file() and csv.is_file()
    summary = json.loads(proc.stdout)
    assert summary["low_confidence_winners"] == 1
    assert summary["geomean_speedup"] == pytest.approx(math.sqrt(2.0 * 8.0), rel=1e-9)
    assert summary["geomeans"][0]["problems"] == 2
    text = out.read_text()
    winners = text.split("## Winners per problem")[1].split("## Low-confidence winners")[0]
    low_rows = _flagged_rows(winners)
    assert len(low_rows) == 1 and "mm float32 48x64x64" in low_rows[0]
    assert all(f"mm float32 {m}x64x64" in winners for m in (16, 32))
    assert "1 of 3 winners are low-confidence" in text
    assert "Left out of the geomean: 1 low-confidence winner(s)." in text
    assert f"**{math.sqrt(16.0):.3f}x**" in text
    assert set(speedups) <= set(csv.read_text().replace('"', "").split(","))


def test_every_winner_low(tmp_path: Path) -> None:
    db = tmp_path / "noisy.db"
    _db(db, [(16, 2.0, LOW), (32, 3.0, LOW)])
    proc = run_cli(["report", "--db", str(db)], sweep_env(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "none: every winner is low-confidence" in text
    assert "No geomean: every winner is low-confidence" in text
    winners = text.split("## Winners per problem")[1].split("## Low-confidence winners")[0]
    assert len(_flagged_rows(winners)) == 2


def test_plot_legend_covers_no_bar_and_no_label(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    db = tmp_path / "plot.db"
    # many problems with speedups near the top of the axis, where a legend used to sit
    _db(db, [(16 * i, 1.5 + 0.1 * i, LOW if i % 3 == 0 else CONFIDENT) for i in range(1, 13)])
    fig = speedup_figure(load_report(db))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent(renderer)
        labels = [t for t in ax.texts if t.get_text().strip()] + [
            t for t in ax.get_yticklabels() if t.get_text()]
        assert len(labels) == 24
        for item in [*labels, *ax.patches]:
            box = item.get_window_extent(renderer)
            assert not legend.overlaps(box), (item, box, legend)
        # every value label lies inside the axes (not cut off at the right edge)
        frame = ax.get_window_extent(renderer)
        for text in ax.texts:
            assert text.get_window_extent(renderer).x1 <= frame.x1 + 1, text.get_text()
    finally:
        plt.close(fig)
