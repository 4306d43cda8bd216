"""``inductor-flydsl report``'s predicted-against-measured section, on real SQLite DBs: the
predictions it shows are the model's (computed here directly from the shipped catalog),
the errors and Spearman's rank correlations are right (recomputed here independently), a
config the catalog lacks says "no prediction", and a DB with no MI300/MI350 FlyDSL time
gets the one-line note."""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from inductor_flydsl.db.store import STATUS_FAILED, CandidateResult, TuningDB
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT, GemmConfig
from inductor_flydsl.performance.comparison import (
    NO_MEASUREMENTS,
    model_device,
    spearman,
)
from inductor_flydsl.performance.devices import DEVICES
from inductor_flydsl.performance.model import predict
from inductor_flydsl.performance.ranking import catalog_profile
from inductor_flydsl.performance.traffic import GemmShape
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import SoftwareInfo, template_source_hash
from inductor_flydsl.report import (
    PREDICTED_TITLE,
    load_report,
    predicted_csv_path,
    render_markdown,
)
from tests.conftest import isolated_env

MI355X = DeviceInfo(kind="rocm", arch="gfx950", name="AMD Instinct MI355X", compute_units=256)
MI250 = DeviceInfo(kind="rocm", arch="gfx90a", name="AMD Instinct MI250X", compute_units=104)
CPU = DeviceInfo(kind="cpu", arch="x86_64-AVX512", name="Some CPU", compute_units=8)
SOFTWARE = SoftwareInfo(torch="2.13.0+rocm7.0", triton="3.7.0", flydsl="0.5.0",
                        templates="v1-x", blas="hipblaslt")
HASH = template_source_hash("gemm_dense")


def _default(*fields: int) -> GemmConfig:
    names = ("tile_m", "tile_n", "tile_k", "waves_m", "waves_n", "stages", "group_m",
             "split_k")
    config = GemmConfig(**dict(zip(names, fields, strict=False)))
    assert config in DEFAULT  # a config the shipped catalog was built from
    return config


# (M, N, K) -> [(config, measured ms)]: DEFAULT configs of the bf16 nt mm catalog rows
PROBLEMS = {
    (512, 4096, 4096): [(_default(64, 128, 64, 2, 2, 2, 8), 0.0512),
                        (_default(128, 128, 64, 2, 2, 3, 8), 0.0391),
                        (_default(256, 64, 64, 4, 1, 2, 8), 0.0448),
                        (_default(64, 64, 64, 2, 2, 2, 8), 0.0705)],
    (16, 4096, 4096): [(_default(16, 64, 256, 1, 1, 2, 1), 0.0101),
                       (_default(16, 64, 256, 1, 1, 2, 1, 4), 0.0079),
                       (_default(32, 64, 256, 1, 2, 2, 1), 0.0123)],
}
# valid for the template, but no catalog row of it (a tile_k the DEFAULT list never uses)
UNCATALOGUED = GemmConfig(tile_m=16, tile_n=16, tile_k=512, waves_m=1, waves_n=1, stages=2,
                          group_m=1, split_k=1)


def _recorded(config: GemmConfig) -> dict:
    return {"template": "gemm_dense", "template_hash": HASH, **config.to_json()}


def _fly(config: GemmConfig, ms: float | None, status: str = "ok") -> CandidateResult:
    name = f"flydsl_mm_{config.tile_m}x{config.tile_n}x{config.tile_k}_sk{config.split_k}"
    return CandidateResult(f"fly-{json.dumps(config.to_json(), sort_keys=True)}", "flydsl",
                           name, _recorded(config), ms, status=status)


def _problem(m: int, n: int, k: int):
    return synthetic_problem("mm", m, n, k, dtype="bfloat16", layout="nt")


def _rocm_db(path: Path) -> None:
    db = TuningDB.open(path, writable=True)
    try:
        for (m, n, k), runs in PROBLEMS.items():
            results = [_fly(c, ms) for c, ms in runs]
            results.append(CandidateResult("aten-mm", "aten", "mm", {}, 0.05))
            if m == 512:
                results += [_fly(UNCATALOGUED, 0.2),
                            _fly(_default(128, 64, 64, 2, 2, 2, 8), None, STATUS_FAILED)]
            db.record_selection(MI355X, SOFTWARE, _problem(m, n, k), results)
        # an arch the model does not know: left out
        db.record_selection(MI250, SOFTWARE, _problem(512, 4096, 4096),
                            [_fly(_default(64, 128, 64, 2, 2, 2, 8), 0.09)])
    finally:
        db.close()


def _predicted_us(config: GemmConfig, m: int, n: int, k: int) -> tuple[float, str]:
    """The model's time, straight from the catalog row and ``predict``."""
    found = catalog_profile(config, arch="gfx950", template="gemm_dense", op="mm",
                            dtype="bf16", layout="nt")
    assert found is not None and found[1] is None  # its own variant's row
    prediction = predict(found[0], GemmShape(m=m, n=n, k=k), DEVICES["MI355X"])
    return prediction.us, prediction.bound


def _rank_correlation(x: list[float], y: list[float]) -> float:
    """Spearman's rho by pandas' own implementation (ties get their mean rank: two of the
    512-row configs are predicted the same memory-bound time)."""
    return float(pd.DataFrame({"x": x, "y": y}).corr(method="spearman").loc["x", "y"])


def _expected() -> dict:
    rows, rhos = {}, {}
    for (m, n, k), runs in PROBLEMS.items():
        summary = _problem(m, n, k).summary()
        measured, predicted = [], []
        for config, ms in runs:
            us, bound = _predicted_us(config, m, n, k)
            rows[(summary, json.dumps(config.to_json(), sort_keys=True))] = {
                "measured_us": ms * 1e3, "predicted_us": us, "error": us / (ms * 1e3) - 1,
                "bound": bound}
            measured.append(ms * 1e3)
            predicted.append(us)
        rhos[summary] = _rank_correlation(measured, predicted)
    return {"rows": rows, "rhos": rhos}


@pytest.fixture(scope="module")
def rocm_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("predicted") / "mi355x.db"
    _rocm_db(path)
    return path


def _check_rows(rows: list[dict], expected: dict) -> None:
    by_key = {}
    for row in rows:
        by_key.setdefault(row["problem"], []).append(row)
        assert row["model_device"] == "MI355X"
        assert row["device"] == "gfx950 AMD Instinct MI355X (256)"
    seen = 0
    for (summary, key), e in expected["rows"].items():
        fields = json.loads(key)
        label = (f"t{fields['tile_m']}x{fields['tile_n']}x{fields['tile_k']} "
                 f"w{fields['waves_m']}x{fields['waves_n']} s{fields['stages']} "
                 f"g{fields['group_m']}"
                 + (f" sk{fields['split_k']}" if fields["split_k"] > 1 else ""))
        match = [r for r in by_key[summary] if r["config"] == label]
        assert len(match) == 1, (summary, label)
        row = match[0]
        assert float(row["measured_us"]) == pytest.approx(e["measured_us"], rel=1e-12)
        assert float(row["predicted_us"]) == pytest.approx(e["predicted_us"], rel=1e-9)
        assert float(row["error"]) == pytest.approx(e["error"], rel=1e-9, abs=1e-12)
        assert row["bound"] == e["bound"]
        seen += 1
    assert seen == len(expected["rows"]) == 7
    big = _problem(512, 4096, 4096).summary()
    unpredicted = [r for r in by_key[big] if r["predicted_us"] in (None, "")]
    assert len(unpredicted) == 1 and "no prediction" in unpredicted[0]["note"]
    assert len(by_key[big]) == 5  # 4 predicted, 1 without; the failed one is left out
    assert set(by_key) == {big, _problem(16, 4096, 4096).summary()}


def _check_overall(overall: dict, problems: list[dict], expected: dict) -> None:
    errors = [e["error"] for e in expected["rows"].values()]
    ratios = [e + 1 for e in errors]
    assert overall["points"] == 7 and overall["no_prediction"] == 1
    assert overall["median_abs_error"] == pytest.approx(
        statistics.median(abs(e) for e in errors), rel=1e-9)
    worst = max(ratios, key=lambda r: max(r, 1 / r))
    assert overall["worst_ratio"] == pytest.approx(worst, rel=1e-9)
    assert overall["median_rank_correlation"] == pytest.approx(
        statistics.median(expected["rhos"].values()), rel=1e-9, abs=1e-12)
    rhos = {p["problem"]: p["rank_correlation"] for p in problems}
    assert rhos == pytest.approx(expected["rhos"], rel=1e-9, abs=1e-12)


def test_report_shows_predicted_against_measured(rocm_db: Path) -> None:
    expected = _expected()
    report = load_report(rocm_db)
    comparison = report.comparison
    _check_rows(comparison.rows, expected)
    _check_overall(comparison.overall, comparison.problems, expected)
    text = render_markdown(report)
    section = text.split(PREDICTED_TITLE)[1].split("\n## ")[0]
    assert "**predictions**" in section and "predicted us (model)" in section
    assert "no prediction" in section
    for e in expected["rows"].values():
        assert f"{e['predicted_us']:.4g}" in section
    for rho in expected["rhos"].values():
        assert f"{rho:.4g}" in section
    assert "gfx90a" not in section  # an arch the model does not know
    summary = report.summary()["predicted_vs_measured"]
    assert summary["kind"] == "predicted" and summary["points"] == 7


def test_report_cli_json_and_csv(rocm_db: Path, tmp_path: Path) -> None:
    expected = _expected()
    out, table = tmp_path / "report.md", tmp_path / "report.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "report", "--db", str(rocm_db), "--out",
         str(out), "--csv", str(table), "--json"], env=isolated_env(tmp_path),
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["predicted_vs_measured"]
    _check_rows(data["rows"], expected)
    _check_overall(data, data["problems"], expected)
    assert PREDICTED_TITLE in out.read_text()
    predicted = predicted_csv_path(table)
    assert predicted.name == "report.predicted.csv"
    with predicted.open(newline="") as f:
        _check_rows(list(csv.DictReader(f)), expected)


def test_a_db_without_rocm_measurements_says_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cpu.db"
    db = TuningDB.open(path, writable=True)
    try:
        db.record_selection(CPU, SOFTWARE, synthetic_problem(
            "mm", 64, 64, 64, dtype="float32", layout="nn"),
            [CandidateResult("aten-mm", "aten", "mm", {}, 0.01),
             CandidateResult("tri", "triton", "triton_mm", {"BLOCK_M": 32}, 0.02)])
    finally:
        db.close()
    report = load_report(path)
    assert report.comparison.empty
    section = render_markdown(report).split(PREDICTED_TITLE)[1].split("\n## ")[0]
    assert [line for line in section.splitlines() if line.strip()] == [NO_MEASUREMENTS]
    assert report.summary()["predicted_vs_measured"] == {
        "kind": "predicted", "points": 0, "note": NO_MEASUREMENTS}
    from inductor_flydsl.report import write_csv

    assert write_csv(report, tmp_path / "r.csv") == [tmp_path / "r.csv"]


def test_the_model_device_follows_the_recorded_device() -> None:
    assert model_device("gfx950", "AMD Instinct MI350X", 256)[0].name == "MI350X"
    assert model_device("gfx942:sramecc+:xnack-", "AMD Instinct MI325X", 304)[0].name \
        == "MI325X"
    spec, note = model_device("gfx950", "AMD Radeon Graphics", 256)
    assert (spec.name, note) == ("MI355X", None)  # the arch's reference product
    spec, note = model_device("gfx942", "AMD Instinct MI300X", 38)  # a CPX partition
    assert spec.name == "MI300X" and "38 CUs" in note
    assert model_device("gfx90a", "AMD Instinct MI250X", 104) is None


def test_spearman_with_ties_and_constants() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert spearman([1, 2], [1, 2]) is None
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    # ties share their mean rank: ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)
