"""The sweep end to end: real runner and worker subprocesses, real torch.compile on CPU,
real SQLite. Timings: each frozen nn.Linear max-autotune compile takes ~15-30 s on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import cli, fault_env, run_cli, sweep_env, sweep_json

from inductor_flydsl.sweep.items import SweepItem, shard
from inductor_flydsl.sweep.presets import parse_shapes_csv, preset, write_shapes_csv


def rows(db: Path, sql: str, params: tuple = ()) -> list[dict]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def status_by_item(db: Path) -> dict[str, dict]:
    return {r["item_id"]: r for r in rows(db, "select * from sweep_status")}


def test_cpu_smoke_preset_end_to_end(smoke_sweep: dict) -> None:
    db, summary = smoke_sweep["db"], smoke_sweep["summary"]
    items = preset("cpu-smoke")
    linear = [i for i in items if i.op == "linear"]
    statuses = status_by_item(db)
    assert set(statuses) == {i.item_id for i in items}
    for item in items:
        row = statuses[item.item_id]
        assert SweepItem.from_values(json.loads(row["item"])) == item
        assert row["status"] == ("done" if item.op == "linear" else "skipped"), row
    assert summary["done"] == len(linear) and summary["failed"] == 0
    assert summary["skipped"] == len(items) - len(linear)
    assert summary["problems_tuned"] == len(linear) and summary["problems_per_minute"] > 0
    winners = {r["problem_id"]: r for r in rows(db, "select * from winners")}
    for item in linear:
        (problem_id,) = json.loads(statuses[item.item_id]["problem_ids"])
        problem = rows(db, "select * from problems where id = ?", (problem_id,))[0]
        assert problem["op"] == "packed_linear"
        assert (problem["m"], problem["n"], problem["k"]) == (item.m, item.n, item.k)
        assert problem_id in winners
        results = rows(db, "select * from results where problem_id = ?", (problem_id,))
        assert {r["backend"] for r in results} >= {"aten", "cpp"}  # every candidate stored
        best = min((r for r in results if r["status"] == "ok"), key=lambda r: r["time_ms"])
        assert best["candidate_id"] == winners[problem_id]["candidate_id"]
    assert sum(summary["wins_by_backend"].values()) == len(linear)
    verify = run_cli(["db", "verify", str(db)], sweep_env(smoke_sweep["root"]))
    assert verify.returncode == 0, verify.stdout


def test_list_prints_the_ids_db_show_finds(smoke_sweep: dict, tmp_path: Path) -> None:
    """``sweep --list`` puts before each cpu-smoke item the id of the problem the DB
    records for it (the one ``db show`` and ``db list`` use), not the item's own hash:
    predicted before any run (no DB yet), read from the DB's sweep_status after one."""
    db, env = smoke_sweep["db"], sweep_env(smoke_sweep["root"])
    items = preset("cpu-smoke")
    statuses = status_by_item(db)
    recorded = [json.loads(statuses[i.item_id]["problem_ids"]) for i in items]

    def listed_ids(target: Path) -> list[list[str]]:
        proc = run_cli(["sweep", "--preset", "cpu-smoke", "--list", "--db", str(target)],
                       env)
        assert proc.returncode == 0, proc.stderr
        assert "`db show ID` and `db list`" in proc.stderr  # what the column is
        return [line.split("  ", 1)[0].split(",") for line in proc.stdout.splitlines()]

    with ThreadPoolExecutor(max_workers=2) as pool:  # each is mostly `import torch`
        before, after = pool.map(listed_ids, (tmp_path / "not_yet.db", db))
    assert not (tmp_path / "not_yet.db").exists()  # listing creates no DB
    assert before == recorded and after == recorded
    assert all(i.item_id not in ids for i, ids in zip(items, before, strict=True))
    shown = run_cli(["db", "show", before[0][0], "--db", str(db)], env)
    assert shown.returncode == 0, shown.stderr
    assert f"(id {before[0][0]})" in shown.stdout


@pytest.mark.slow  # > 20 s on 2 cores
def test_slurm_array_shards_merge_to_the_unsharded_result(smoke_sweep: dict,
                                                          tmp_path: Path) -> None:
    """Three shards started as a SLURM job array would start them (--shard auto, task ids
    1..3), each into its own DB through the {shard} placeholder, one process per item
    (--isolate item), merged: the same items, problems and winners as the unsharded
    persistent-worker sweep."""
    procs = []
    for task in (1, 2, 3):
        env = sweep_env(tmp_path, SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_MIN="1",
                        SLURM_ARRAY_TASK_COUNT="3")
        procs.append(subprocess.Popen(cli("sweep", "--preset", "cpu-smoke", "--shard", "auto",
                                          "--isolate", "item", "--db",
                                          str(tmp_path / "shard{shard}.db"), "--json"),
                                      env=env, text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    outs = [p.communicate(timeout=900) for p in procs]
    for proc, (_out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-3000:]
    assert [json.loads(out)["shard"] for out, _ in outs] == ["1/3", "2/3", "3/3"]
    dbs = [tmp_path / f"shard{k}.db" for k in (1, 2, 3)]
    items = preset("cpu-smoke")
    assert [set(status_by_item(db)) for db in dbs] == [
        {i.item_id for i in shard(items, k, 3)} for k in (1, 2, 3)]
    env = sweep_env(tmp_path)
    merged = tmp_path / "merged.db"
    proc = run_cli(["db", "merge", *map(str, dbs), "--into", str(merged)], env)
    assert proc.returncode == 0, proc.stderr
    full = smoke_sweep["db"]

    def outcome(db: Path) -> set[tuple[str, str]]:
        return {(r["item_id"], r["status"]) for r in rows(db, "select * from sweep_status")}

    def problems(db: Path, table: str) -> set[str]:
        return {r["problem_id"] for r in rows(db, f"select problem_id from {table}")}

    assert outcome(merged) == outcome(full)
    assert problems(merged, "winners") == problems(full, "winners")
    assert {r["id"] for r in rows(merged, "select id from problems")} == \
        {r["id"] for r in rows(full, "select id from problems")}


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if text in cmdline and int(entry.name) != os.getpid():
                found.append(int(entry.name))
    return found


@pytest.mark.slow  # > 20 s on 2 cores
def test_resume_after_runner_sigkill(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.csv"
    write_shapes_csv([SweepItem.from_values({"op": "linear", "m": m, "n": n, "k": k,
                                             "dtype": "float32"})
                      for m, n, k in ((8, 64, 32), (16, 32, 64))], shapes)
    items = parse_shapes_csv(shapes)
    db = tmp_path / "resume.db"
    env = sweep_env(tmp_path)
    # one item per compile, so the kill lands between the two items' commits
    runner = subprocess.Popen(cli("sweep", "--shapes", str(shapes), "--db", str(db),
                                  "--batch-items", "1", "--json"), env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: db.exists() and any(
            r["status"] == "done" for r in status_by_item(db).values()), 300,
            "the first item to finish")
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    # The running worker dies with its runner (PR_SET_PDEATHSIG): no orphan keeps writing.
    _wait_for(lambda: not _processes_mentioning(str(db)), 20, "the worker to die")
    before_status = status_by_item(db)
    before_results = rows(db, "select * from results")
    before_winners = rows(db, "select * from winners")
    (finished,) = [i for i, r in before_status.items() if r["status"] == "done"]
    assert before_results and before_winners

    proc = run_cli(["sweep", "--shapes", str(shapes), "--db", str(db), "--resume", "--json"],
                   env)
    summary = sweep_json(proc)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary["already_finished"] == 1 and summary["run"] == 1
    assert [i["item_id"] for i in summary["items"]] == [
        i.item_id for i in items if i.item_id != finished]
    after_status = status_by_item(db)
    assert after_status[finished] == before_status[finished]  # same run_id and updated_at
    assert all(r["status"] == "done" for r in after_status.values())
    assert len(after_status) == 2
    after_results = {(r["problem_id"], r["candidate_id"]): r
                     for r in rows(db, "select * from results")}
    for r in before_results:  # nothing committed was lost or rewritten
        assert after_results[(r["problem_id"], r["candidate_id"])] == r
    after_winners = {r["problem_id"]: r for r in rows(db, "select * from winners")}
    for w in before_winners:
        assert after_winners[w["problem_id"]] == w


@pytest.mark.slow  # > 20 s on 2 cores
@pytest.mark.parametrize("isolate", ["worker", "item"])
def test_crashing_and_hanging_workers_are_recorded_and_the_sweep_goes_on(
        tmp_path: Path, isolate: str) -> None:
    """In both modes a crash or a hang costs its item only. With a persistent worker the
    crash takes down the batch [crash, hang], whose items are retried one per worker."""
    crash = SweepItem.from_values({"op": "linear", "m": 8, "n": 8, "k": 8,
                                   "dtype": "float32"})
    hang = SweepItem.from_values({"op": "bmm", "m": 8, "n": 8, "k": 8, "batch": 2,
                                  "dtype": "float32", "layout": "nn"})
    skip = SweepItem.from_values({"op": "mm", "m": 8, "n": 8, "k": 8, "dtype": "float32"})
    shapes = tmp_path / "shapes.csv"
    write_shapes_csv([crash, hang, skip], shapes)
    db = tmp_path / "faults.db"
    env = fault_env(tmp_path, INDUCTOR_FLYDSL_SWEEP_TEST_CRASH=crash.item_id,
                    INDUCTOR_FLYDSL_SWEEP_TEST_HANG="bmm")
    mode = ["--isolate", isolate]
    proc = run_cli(["sweep", "--shapes", str(shapes), "--db", str(db), "--timeout-s", "8",
                    *mode, "--json"], env)
    summary = sweep_json(proc)
    assert proc.returncode == 1  # failures make the exit status 1, after the whole list
    assert (summary["failed"], summary["skipped"], summary["done"]) == (2, 1, 0)
    status = status_by_item(db)
    assert status[crash.item_id]["status"] == "failed"
    assert "SIGABRT (exit 134)" in status[crash.item_id]["error"]
    assert "aborting on purpose" in status[crash.item_id]["error"]  # the stderr tail
    assert status[hang.item_id]["status"] == "failed"
    assert "timed out after 8 s" in status[hang.item_id]["error"]
    assert status[skip.item_id]["status"] == "skipped"
    assert "frozen-weight linear" in status[skip.item_id]["error"]

    # --resume leaves failed items alone unless --retry-failed.
    proc = run_cli(["sweep", "--shapes", str(shapes), "--db", str(db), "--resume", *mode,
                    "--json"], env)
    assert sweep_json(proc)["run"] == 0 and proc.returncode == 0
    env.pop("INDUCTOR_FLYDSL_SWEEP_TEST_HANG")  # the bmm item is now skipped on CPU
    proc = run_cli(["sweep", "--shapes", str(shapes), "--db", str(db), "--resume",
                    "--retry-failed", *mode, "--json"], env)
    summary = sweep_json(proc)
    assert (summary["run"], summary["failed"], summary["skipped"]) == (2, 1, 1)
    assert status_by_item(db)[hang.item_id]["status"] == "skipped"


@pytest.mark.slow  # > 20 s on 2 cores
def test_a_crash_in_a_persistent_batch_costs_one_item(tmp_path: Path) -> None:
    """[crash, good] share a batch; the crash kills the worker, both are retried alone in
    new workers: the crashing item is failed, the good one tuned and recorded."""
    crash = SweepItem.from_values({"op": "linear", "m": 8, "n": 8, "k": 8,
                                   "dtype": "float32"})
    good = SweepItem.from_values({"op": "linear", "m": 16, "n": 32, "k": 64,
                                  "dtype": "float32"})
    shapes = tmp_path / "shapes.csv"
    write_shapes_csv([crash, good], shapes)
    db = tmp_path / "crash.db"
    env = fault_env(tmp_path, INDUCTOR_FLYDSL_SWEEP_TEST_CRASH=crash.item_id)
    proc = run_cli(["sweep", "--shapes", str(shapes), "--db", str(db), "--json"], env)
    summary = sweep_json(proc)
    assert proc.returncode == 1
    assert (summary["failed"], summary["done"]) == (1, 1)
    status = status_by_item(db)
    assert status[crash.item_id]["status"] == "failed"
    assert "SIGABRT (exit 134)" in status[crash.item_id]["error"]
    assert status[good.item_id]["status"] == "done"
    (problem_id,) = json.loads(status[good.item_id]["problem_ids"])
    assert [r["problem_id"] for r in rows(db, "select problem_id from winners")] == [
        problem_id]


@pytest.mark.slow  # > 20 s on 2 cores
def test_a_batch_whose_compile_raises_is_tuned_item_by_item(tmp_path: Path) -> None:
    """Every multi-item batch's compile raises (tests/faults): the worker tunes the batch's
    items one by one, in the same process, and both are recorded."""
    items = [SweepItem.from_values({"op": "linear", "m": m, "n": 32, "k": 64,
                                    "dtype": "float32"}) for m in (8, 16)]
    shapes = tmp_path / "shapes.csv"
    write_shapes_csv(items, shapes)
    db = tmp_path / "fallback.db"
    env = fault_env(tmp_path, INDUCTOR_FLYDSL_SWEEP_TEST_BATCH_FAIL="1")
    proc = run_cli(["sweep", "--shapes", str(shapes), "--db", str(db), "--json"], env)
    summary = sweep_json(proc)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (summary["done"], summary["failed"]) == (2, 0)
    assert all(i["error"].startswith("tuned alone: its batch's compile failed")
               for i in summary["items"]), summary["items"]  # not a worker crash + retry
    assert len(rows(db, "select * from winners")) == 2


def test_budget_and_sigterm_stop_cleanly(tmp_path: Path) -> None:
    hang = SweepItem.from_values({"op": "mm", "m": 8, "n": 8, "k": 8, "dtype": "float32"})
    other = SweepItem.from_values({"op": "addmm", "m": 8, "n": 8, "k": 8,
                                   "dtype": "float32"})
    shapes = tmp_path / "shapes.csv"
    write_shapes_csv([hang, other], shapes)
    env = fault_env(tmp_path, INDUCTOR_FLYDSL_SWEEP_TEST_HANG="mm")
    db = tmp_path / "stop.db"
    proc = run_cli(["sweep", "--shapes", str(shapes), "--db", str(db), "--budget-s", "0",
                    "--json"], env)
    summary = sweep_json(proc)
    assert proc.returncode == 0
    assert (summary["run"], summary["not_started"], summary["stopped"]) == (0, 2, "budget")

    runner = subprocess.Popen(cli("sweep", "--shapes", str(shapes), "--db", str(db),
                                  "--json"), env=env, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    # the persistent worker gets its batch on stdin as soon as it starts
    _wait_for(lambda: _processes_mentioning("--serve"), 60, "the worker to start")
    time.sleep(3)
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 143, err[-2000:]
    summary = json.loads(out)
    assert summary["stopped"] == "SIGTERM" and summary["not_started"] == 1
    assert status_by_item(db)[hang.item_id]["status"] == "interrupted"
    _wait_for(lambda: not _processes_mentioning(str(db)), 20, "the worker to be killed")
