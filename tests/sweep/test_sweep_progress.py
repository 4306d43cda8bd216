"""What a sweep shows while it runs: a status line while it waits for a quiet machine
(what for, how long so far and at most, how to skip), a line per item as it starts and
finishes, named as the DB names the problem, nothing cut mid-word; the CPU preset holds
no item a CPU always skips. The machine is made busy by a real CPU-bound process."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlite_utils
from conftest import cli, run_cli, sweep_env

from inductor_flydsl.cli.sweep_progress import clip, wait_text
from inductor_flydsl.sweep.busy import RUN, BusyGate, BusyWait
from inductor_flydsl.sweep.items import SweepItem, always_skipped, db_name
from inductor_flydsl.sweep.presets import preset

HOG = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


@pytest.fixture
def cpu_hog() -> Iterator[subprocess.Popen[bytes]]:
    hog = subprocess.Popen([sys.executable, "-c", HOG.format(s=30)])
    time.sleep(0.3)
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait()


def test_clip_cuts_at_word_boundaries() -> None:
    text = "other processes used 1.33 of 2 CPUs (limit 0.10): python (0.58), cc1plus (0.4)"
    for width in range(20, len(text) + 1):
        short = clip(text, width)
        assert len(short) <= width
        if short != text:
            kept = short.removesuffix(" ...")
            assert text.startswith(kept) and text[len(kept)] in " ,;:", (width, short)


def test_cpu_smoke_holds_nothing_a_cpu_skips() -> None:
    items = preset("cpu-smoke")
    assert items and not [i.summary() for i in items if always_skipped(i, "cpu")]


def test_gate_reports_the_wait_then_its_end(cpu_hog: subprocess.Popen[bytes],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDUCTOR_FLYDSL_BUSY_CPU", "0.01")
    seen: list[BusyWait | None] = []
    gate = BusyGate("wait", max_wait_s=0.6, probe_s=0.2, check_every_s=0.2,
                    on_wait=seen.append)
    deadline = time.monotonic() + 20
    while gate.check("item", set())[0] != RUN:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    waits = [w for w in seen if w is not None]
    assert waits and seen[-1] is None  # told while it waited, then that it ended
    assert waits[-1].waited_s >= waits[0].waited_s and waits[0].max_wait_s == 0.6
    line = wait_text(waits[-1])
    assert "waiting for a quiet machine" in line and "other processes used" in line
    assert re.search(r"waited \d+ s of at most 1 s", line)
    assert "--on-busy record" in line and "Ctrl-C" in line


def test_sweep_prints_the_wait_and_every_item(tmp_path: Path,
                                             cpu_hog: subprocess.Popen[bytes]) -> None:
    """The real CLI: ``--list`` and the started and finished lines name each item as the
    DB names its problem (on CPU a float32 ``linear`` is ``packed_linear ... nn``; a
    bf16 one ``mm ... nt``, or ``linear_unary ...`` where oneDNN has bf16: see
    ``items.db_name``); an item the CPU always skips keeps its own name and says so."""
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("op,M,N,K,batch,dtype,layout\n"
                      "linear,8,64,32,,float32,nt\n"
                      "linear,16,64,32,,bfloat16,nt\n"
                      "mm,32,64,16,,bfloat16,nt\n")
    fp32_name = "packed_linear float32 8x64x32 nn"
    bf16 = SweepItem.from_values({"op": "linear", "m": 16, "n": 64, "k": 32,
                                  "dtype": "bfloat16"})
    bf16_name = db_name(bf16, "cpu")
    assert bf16_name is not None
    db = tmp_path / "t.db"
    env = sweep_env(tmp_path, INDUCTOR_FLYDSL_BUSY_CPU="0.01")
    listed = run_cli(["sweep", "--shapes", str(shapes), "--db", str(db), "--list"], env)
    assert listed.returncode == 0, listed.stderr
    assert [line.split("  ", 1)[1] for line in listed.stdout.splitlines()] == [
        fp32_name, bf16_name,
        "mm bfloat16 32x64x16 nt  (always skipped on cpu)"]
    proc = subprocess.Popen(cli("sweep", "--shapes", str(shapes), "--db", str(db),
                                "--on-busy", "wait", "--busy-max-wait-s", "2"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    assert proc.stderr is not None
    for line in proc.stderr:  # the wait is shown as it happens, not at the end
        lines.append(line.rstrip("\n"))
        if line.startswith("waiting for a quiet machine"):
            cpu_hog.kill()  # the rest need not run beside the hog
    proc.communicate(timeout=600)
    err = "\n".join(lines)
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    waiting = [line for line in lines if line.startswith("waiting for a quiet machine")]
    assert waiting, err
    assert re.search(r"waited \d+ s of at most 2 s", waiting[0])
    assert "--on-busy record" in waiting[0]
    assert any(line.startswith("wait over after") for line in lines), err

    def line_of(status: str, name: str) -> int:
        found = [i for i, line in enumerate(lines)
                 if " ".join(line.split()).startswith(f"{status} {name}")]
        assert found, f"no {status!r} line for {name!r}:\n{err}"
        return found[0]

    started, done = line_of("started", fp32_name), line_of("done", fp32_name)
    assert lines.index(waiting[0]) < started < done
    assert "noisy: machine still busy after" in lines[done]
    recorded = sqlite_utils.Database(db)
    names = {r["summary"] for r in recorded.query("select summary from problems")}
    ids = {r["id"] for r in recorded.query("select id from problems")}
    recorded.close()
    # --list's first column: the ids the DB gave them (`db show` finds them), known
    # before the run; none for the skipped item
    assert [line.split("  ", 1)[0] for line in listed.stdout.splitlines()][2] == "-"
    assert {line.split("  ", 1)[0] for line in listed.stdout.splitlines()[:2]} == ids
    assert line_of("started", bf16_name) < line_of("done", bf16_name)
    assert names == {fp32_name, bf16_name}  # named before they ran as the DB names them
    assert line_of("started", "mm bfloat16 32x64x16 nt") < line_of(
        "skipped", "mm bfloat16 32x64x16 nt")
    for line in lines:  # a shortened note ends at a word boundary
        assert not re.search(r"\w\.\.\.", line), line
