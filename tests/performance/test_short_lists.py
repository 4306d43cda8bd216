"""Predicted short lists: the shipped MI355X DB, how a compile uses it (only as the short
list, only from the running model version, only eligible configs), ``db show`` keeping
it apart from measurements, and the build script; real SQLite files and subprocesses."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_flydsl.db.open import open_db
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT, DEFAULT_GROUPED
from inductor_flydsl.flydsl_backend.offer.offering import offered_configs, ranked_candidates
from inductor_flydsl.performance.config_names import config_key
from inductor_flydsl.performance.ranking import RankedConfig, stored_first
from inductor_flydsl.performance.short_lists import (
    PREDICTED_DB_NAME,
    STORED_RANKS,
    TABLE,
    StoredEntry,
    read_short_list,
    shipped_short_list,
    stored_version,
    write_short_lists,
)
from inductor_flydsl.problems.problem import synthetic_problem

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "tuning_db" / PREDICTED_DB_NAME
DEFAULT_KEYS = {config_key(c.to_json()) for c in (*DEFAULT, *DEFAULT_GROUPED)}


def _rows(path: Path) -> list[dict]:
    with sqlite3.connect(path) as con:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(f"select * from {TABLE}")]


def test_the_shipped_db_was_written_by_this_model() -> None:
    rows = _rows(SHIPPED)
    assert rows, "rebuild: python scripts/build_predicted_db.py --aiter-git AITER/.git"
    # any change to the model's files or the catalog changes it: rebuild the DB then
    assert {r["model_version"] for r in rows} == {stored_version()}, (
        "the model changed: rebuild with python scripts/build_predicted_db.py "
        "--aiter-git AITER/.git")
    assert {r["kind"] for r in rows} == {"predicted"} and {r["device"] for r in rows} == {
        "MI355X"}
    by_problem: dict[str, list[dict]] = {}
    for r in rows:
        by_problem.setdefault(r["problem_id"], []).append(r)
        assert config_key(json.loads(r["config"])) in DEFAULT_KEYS
        assert r["predicted_us"] > 0 and r["bound"]
        assert bool(r["aiter_best_us"]) == bool(r["aiter_source"])
    for lst in by_problem.values():
        ranks = sorted(r["rank"] for r in lst)
        assert ranks == list(range(1, len(ranks) + 1)) and len(ranks) <= STORED_RANKS
        times = [r["predicted_us"] for r in sorted(lst, key=lambda r: r["rank"])]
        assert times == sorted(times)
    assert len(by_problem) >= 60
    db = open_db(SHIPPED, writable=False, immutable=True)
    try:  # measurements and predictions never mix: no timing row in this DB
        assert db["results"].count == 0 and db["winners"].count == 0
        assert {p["id"] for p in db["problems"].rows} == set(by_problem)
    finally:
        db.close()


def test_a_compile_offers_the_stored_short_list() -> None:
    problem = synthetic_problem("mm", 16, 4096, 4096, dtype="bfloat16", layout="nt")
    stored = shipped_short_list(problem.id, "gfx950")
    assert len(stored) == STORED_RANKS
    ranked = ranked_candidates(problem, "gfx950")
    assert [r.stored for r in ranked[:len(stored)]] == [True] * len(stored)
    offered, k = offered_configs(problem, "gfx950")
    assert [config_key(c.to_json()) for c in offered[:k]] == [
        config_key(e.config) for e in stored[:4]]
    assert shipped_short_list(problem.id, "gfx942") == []  # MI300X: none shipped
    other = synthetic_problem("mm", 24, 4096, 4096, dtype="bfloat16", layout="nt")
    assert shipped_short_list(other.id, "gfx950") == []  # not a reference shape: computed
    assert not any(r.stored for r in ranked_candidates(other, "gfx950"))


def _write(path: Path, version: str, configs: list[str]) -> Path:
    open_db(path, writable=True).close()
    write_short_lists(path, [
        {"device": "MI355X", "arch": "gfx950", "problem_id": "p1", "shape": "s", "label": "l",
         "rank": i, "config": c, "predicted_us": 10.0 + i, "tflops": 1.0,
         "roofline_share": 0.5, "bound": "memory", "model_version": version,
         "kind": "predicted", "aiter_best_us": None, "aiter_best_kernel": None,
         "aiter_source": None, "recorded_at": "2026-12-06"}
        for i, c in enumerate(configs, 1)])
    return path


def test_stale_or_malformed_rows_are_never_used(tmp_path: Path) -> None:
    good = json.dumps(DEFAULT[0].to_json())
    stale = _write(tmp_path / "stale.db", "an-older-model", [good])
    assert read_short_list(stale, "p1", "MI355X") == []
    fresh = _write(tmp_path / "fresh.db", stored_version(),
                   ["{not json", json.dumps({"tile_m": "__import__('os')"}), good])
    entries = read_short_list(fresh, "p1", "MI355X")
    assert [e.config for e in entries] == [DEFAULT[0].to_json()]
    assert entries[0].prediction.kind == "predicted"
    # a stored config that is not eligible for the problem is ignored
    not_eligible = DEFAULT[1]
    ranked = [RankedConfig(DEFAULT[2], entries[0].prediction)]
    foreign = [StoredEntry(1, not_eligible.to_json(), entries[0].prediction)]
    assert stored_first(ranked, foreign) == ranked


def test_db_show_keeps_predictions_apart(tmp_path: Path) -> None:
    user_db = tmp_path / "user.db"
    open_db(user_db, writable=True).close()
    proc = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "db", "show", "mm bfloat16 16x4096x4096",
         "--db", str(user_db)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "PREDICTED short list on MI355X" in proc.stdout and "not measured" in proc.stdout
    assert "AITER's published best" in proc.stdout and "ROCm/aiter" in proc.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "db", "show", "mm bfloat16 16x4096x4096",
         "--db", str(user_db), "--json"], capture_output=True, text=True, cwd=ROOT,
        timeout=120)
    detail = json.loads(as_json.stdout)[0]
    assert detail["results"] == [] and len(detail["predicted"]) == STORED_RANKS


@pytest.mark.slow
def test_the_build_script_writes_a_verified_db(tmp_path: Path) -> None:
    out = tmp_path / "predicted.db"
    proc = subprocess.run([sys.executable, "scripts/build_predicted_db.py", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "predicted rows" in proc.stdout
    rows = _rows(out)
    assert rows and {r["model_version"] for r in rows} == {stored_version()}
    # without --aiter-git no published time is stored
    assert all(r["aiter_best_us"] is None for r in rows)
    # the same rankings as the shipped DB (whose AITER columns come from a clone)
    shipped = {(r["problem_id"], r["rank"]): r["config"] for r in _rows(SHIPPED)}
    assert {(r["problem_id"], r["rank"]): r["config"] for r in rows} == shipped
    verify = subprocess.run([sys.executable, "-m", "inductor_flydsl", "db", "verify", str(out)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_the_report_shows_the_shipped_predictions_beside_aiter(tmp_path: Path) -> None:
    from inductor_flydsl.report import load_report, render_markdown

    user_db = tmp_path / "user.db"
    open_db(user_db, writable=True).close()
    report = load_report(user_db)
    table = report.shipped_predictions
    shapes = {r["problem_id"] for r in _rows(SHIPPED)}
    assert len(table) == len(shapes)
    suite = table[table["shape"] == "mm bfloat16 4096x4096x4096 nt"].iloc[0]
    assert suite["aiter_best_us"] > 0 and "ROCm/aiter" in suite["aiter_source"]
    markdown = render_markdown(report)
    assert "## Predicted short lists shipped with the package (PREDICTED, not measured)" \
        in markdown
    assert len(report.summary()["shipped_predictions"]) == len(shapes)
