"""A low-confidence result never overrides a confident one (real SQLite files).

The CPU hog test (test_noisy_timings.py) shows the rule end to end, but there the noisy
timings are always the slower ones, so "the faster winner wins" would also keep the quiet
winner. Here the noisy result is the *faster* one: only the confidence rule keeps it out.
"""

from __future__ import annotations

from pathlib import Path

from inductor_flydsl.db.merge import merge_dbs
from inductor_flydsl.db.store import CandidateResult, TuningDB
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.noise import CONFIDENT, LOW, MachineLoad, Spread, decide
from inductor_flydsl.provenance.software import current_software

DEVICE = DeviceInfo(kind="cpu", arch="x86_64-AVX2", name="test", compute_units=2)
PROBLEM = synthetic_problem("mm", 64, 256, 256, dtype="float32", layout="nt")
QUIET = MachineLoad(cpus=2, others_cpu=0.01)
BUSY = MachineLoad(cpus=2, others_cpu=1.9)


def _result(name: str, samples: list[float]) -> CandidateResult:
    spread = Spread.of(samples)
    return CandidateResult(name, "aten" if "mkl" in name else "cpp", name, {},
                           spread.median, spread=spread)


def _record(path: Path, results: list[CandidateResult], machine: MachineLoad) -> str:
    ranked = sorted(results, key=lambda r: r.time_ms)
    confidence = decide(ranked[0].spread, ranked[1].spread, machine)
    db = TuningDB.open(path, writable=True)
    try:
        db.record_selection(DEVICE, current_software(), PROBLEM, results, confidence)
    finally:
        db.close()
    return confidence.level


def _winner(path: Path):
    db = TuningDB.open(path, writable=False)
    try:
        return db.lookup(DEVICE, current_software(), PROBLEM.id)
    finally:
        db.close()


def test_decide() -> None:
    fast, slow = Spread.of([1.0, 1.1, 1.0, 1.05, 0.98]), Spread.of([2.0, 2.1, 1.9, 2.0, 2.2])
    assert decide(fast, slow, QUIET).level == CONFIDENT
    assert decide(fast, slow, BUSY).level == LOW  # tight but taken on a busy machine
    overlapping = Spread.of([1.0, 2.05, 1.2, 2.1, 1.1])  # Q3 2.05 >= slow's Q1 2.0
    verdict = decide(overlapping, slow, QUIET)
    assert verdict.level == LOW and "not separated" in verdict.reason


def test_noisy_faster_result_does_not_replace_a_confident_winner(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    quiet = [_result("cpp", [0.17, 0.18, 0.17, 0.176, 0.171]),
             _result("mkl", [0.42, 0.50, 0.32, 0.51, 0.43])]
    assert _record(db, quiet, QUIET) == CONFIDENT
    # a noisy run in which mkl looks faster than the quiet cpp: it must not win
    noisy = [_result("cpp", [8.0, 10.0, 12.9, 13.5, 14.1]),
             _result("mkl", [0.05, 0.06, 0.05, 0.051, 0.05])]
    assert _record(db, noisy, BUSY) == LOW
    winner = _winner(db)
    assert (winner.candidate_id, winner.confidence) == ("cpp", CONFIDENT)
    assert winner.time_ms == quiet[0].spread.median  # its row was not overwritten either
    # a later confident measurement replaces the confident one by the usual rule
    confident_again = [_result("cpp", [0.30, 0.31, 0.30, 0.29, 0.30]),
                       _result("mkl", [0.10, 0.11, 0.10, 0.10, 0.12])]
    assert _record(db, confident_again, QUIET) == CONFIDENT
    assert (_winner(db).candidate_id, _winner(db).confidence) == ("mkl", CONFIDENT)


def test_confident_result_replaces_a_noisy_winner_even_when_slower(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    assert _record(db, [_result("mkl", [0.05, 0.06, 0.05, 0.05, 0.05]),
                        _result("cpp", [8.0, 9.0, 8.0, 8.1, 8.0])], BUSY) == LOW
    assert _winner(db).confidence == LOW
    assert _record(db, [_result("cpp", [0.17, 0.18, 0.17, 0.17, 0.17]),
                        _result("mkl", [0.42, 0.45, 0.43, 0.41, 0.42])], QUIET) == CONFIDENT
    winner = _winner(db)
    assert (winner.candidate_id, winner.confidence, winner.repeats) == ("cpp", CONFIDENT, 5)


def test_merge_prefers_confident_winners(tmp_path: Path) -> None:
    confident, noisy = tmp_path / "confident.db", tmp_path / "noisy.db"
    _record(confident, [_result("cpp", [0.17, 0.18, 0.17, 0.17, 0.17]),
                        _result("mkl", [0.42, 0.45, 0.43, 0.41, 0.42])], QUIET)
    _record(noisy, [_result("mkl", [0.05, 0.06, 0.05, 0.05, 0.05]),
                    _result("cpp", [8.0, 9.0, 8.0, 8.1, 8.0])], BUSY)
    report = merge_dbs([noisy], confident)
    assert report.winners_kept == 1 and report.winners_replaced == 0
    assert (_winner(confident).candidate_id, _winner(confident).confidence) == (
        "cpp", CONFIDENT)
    report = merge_dbs([confident], noisy)
    assert report.winners_replaced == 1
    winner = _winner(noisy)
    assert (winner.candidate_id, winner.confidence, winner.time_ms) == ("cpp", CONFIDENT, 0.17)
