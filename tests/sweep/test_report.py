"""``inductor-flydsl report`` on a DB the sweep produced: its numbers match the DB rows."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli, sweep_env

from inductor_flydsl.db.store import TuningDB
from inductor_flydsl.problems.problem import Problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import SoftwareInfo

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _expected(db: Path) -> dict[str, dict]:
    """Winner time, baseline and speedup per problem, straight from SQL."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        out = {}
        for w in conn.execute("select * from winners"):
            ok = conn.execute(
                "select backend, candidate_id, time_ms from results where device_id = ? and"
                " software_id = ? and problem_id = ? and status = 'ok' and time_ms is not null",
                (w["device_id"], w["software_id"], w["problem_id"])).fetchall()
            if any(r["backend"] in ("aten", "triton") for r in ok):
                pool = [r for r in ok if r["backend"] in ("aten", "triton")]
                kind = "aten/triton"
            else:
                pool = [r for r in ok if r["candidate_id"] != w["candidate_id"]]
                kind = "best non-winner"
            base = min(r["time_ms"] for r in pool)
            out[w["problem_id"]] = {"winner_ms": w["time_ms"], "backend": w["backend"],
                                    "baseline": kind, "baseline_ms": base,
                                    "speedup": base / w["time_ms"],
                                    "confidence": w["confidence"]}
        return out
    finally:
        conn.close()


def test_report_matches_the_db(smoke_sweep: dict, tmp_path: Path) -> None:
    db = smoke_sweep["db"]
    out, csv, png = tmp_path / "report.md", tmp_path / "report.csv", tmp_path / "speedup.png"
    proc = run_cli(["report", "--db", str(db), "--out", str(out), "--csv", str(csv),
                    "--plot", str(png), "--json"], sweep_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    expected = _expected(db)
    table = pd.read_csv(csv).set_index("problem_id")
    assert set(table.index) == set(expected)
    for problem_id, e in expected.items():
        row = table.loc[problem_id]
        assert row["winner_ms"] == pytest.approx(e["winner_ms"], rel=1e-12)
        assert row["baseline_ms"] == pytest.approx(e["baseline_ms"], rel=1e-12)
        assert row["speedup"] == pytest.approx(e["speedup"], rel=1e-12)
        assert row["baseline"] == e["baseline"] == "aten/triton"  # CPU: ATen's _mkl_linear
        assert row["winner_backend"] == e["backend"]
    counted = [e for e in expected.values() if e["confidence"] != "low"]  # noisy: left out
    geo = math.exp(sum(math.log(e["speedup"]) for e in counted) / len(counted)) \
        if counted else None
    assert summary["geomean_speedup"] == (pytest.approx(geo, rel=1e-9) if geo else None)
    assert summary["problems"] == len(expected)
    backends = pd.Series([e["backend"] for e in expected.values()]).value_counts()
    assert {k.split("|")[1]: v for k, v in summary["wins"].items()} == backends.to_dict()
    assert (summary["missed_problems"], summary["missed_untuned"]) == (len(expected), 0)

    text = out.read_text()
    assert (f"**{geo:.3f}x**" if geo else "none: every winner is low-confidence") in text
    winners, noisy = text.split("## Low-confidence winners (noisy)") if \
        "## Low-confidence winners (noisy)" in text else (text, "")
    for e in expected.values():
        if e["confidence"] == "low":  # measured while busy: listed apart, with its time
            assert f"{e['winner_ms']:.4g}" in noisy.split("## Wins per backend")[0]
        else:
            assert f"{e['speedup']:.4g}" in winners.split("## Wins per backend")[0]
    assert "![speedup per problem](speedup.png)" in text
    assert "## Coverage" in text and "## Sweep status" in text

    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC)
    import matplotlib.image

    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    from PIL import Image

    with Image.open(png) as im:
        im.verify()


def test_report_lists_missed_problems_without_a_winner(smoke_sweep: dict,
                                                       tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    shutil.copy(smoke_sweep["db"], db)
    device = DeviceInfo(**{k: v for k, v in smoke_sweep["summary"]["device"].items()
                           if k != "id"})
    software = SoftwareInfo(**{k: v for k, v in smoke_sweep["summary"]["software"].items()
                               if k != "id"})
    missed = Problem.from_spec({
        "op": "packed_linear", "epilogue": {},
        "inputs": [{"dtype": "float32", "size": [24, 40], "stride": [40, 1]},
                   {"dtype": "float32", "size": [999, 1], "stride": [1, 0]},
                   {"dtype": "float32", "size": [56, 40], "stride": [40, 1]}],
        "output": {"dtype": "float32", "size": [24, 56]}})
    store = TuningDB.open(db, writable=True)
    try:
        store.record_miss(device, software, missed)
        store.record_miss(device, software, missed)
    finally:
        store.close()
    env = sweep_env(tmp_path)
    proc = run_cli(["report", "--db", str(db), "--json"], env)
    summary = json.loads(proc.stdout)
    assert summary["missed_untuned"] == 1
    proc = run_cli(["report", "--db", str(db)], env)
    assert "packed_linear float32 24x56x40 nn" in proc.stdout.split("## Coverage")[1]
    # ... and the sweep turns exactly that miss back into an item, listed by the name
    # the DB gives its problem
    proc = run_cli(["sweep", "--from-misses", "--db", str(db), "--list"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("  packed_linear float32 24x56x40 nn")
    assert len(proc.stdout.strip().splitlines()) == 1
