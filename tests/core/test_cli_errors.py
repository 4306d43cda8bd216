"""Bad command-line arguments, each through a real `python -m inductor_flydsl` subprocess:
a non-zero exit, a message that names the one wrong argument (and what it accepts), no
traceback. The subprocesses run side by side (each one's time is mostly `import torch`)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from inductor_flydsl.db.store import TuningDB

REPO = Path(__file__).resolve().parents[2]

# argv -> the parts the one error line must hold
CASES: dict[str, tuple[list[str], list[str]]] = {
    "shape_not_numbers": (["explain", "--op", "mm", "--shape", "12x"],
                          ["--shape '12x'", "MxNxK"]),
    "unknown_dtype": (["explain", "--op", "mm", "--shape", "8x4096x4096", "--dtype", "int8"],
                      ["--dtype 'int8'", "bf16", "fp16"]),
    "grouped_three_numbers": (["explain", "--op", "grouped_mm", "--shape", "64x128x128"],
                              ["--shape '64x128x128'", "takes 4 sizes, not 3", "GxTxNxK"]),
    "unknown_layout": (["explain", "--op", "mm", "--shape", "8x4096x4096", "--layout", "zz"],
                       ["--layout 'zz'", "nn, nt, tn, tt"]),
    "unknown_mx_dtype": (["explain", "--op", "scaled_mm", "--shape", "128x4096x4096",
                          "--dtype", "mxfp9"], ["--dtype 'mxfp9'", "mxfp8", "e4m3"]),
    "emulate_bad_config": (["emulate", "--isa", os.devnull, "--op", "mm", "--shape",
                            "8x64x64", "--config", "{bad"], ["--config '{bad'"]),
    "db_list_bad_shape": (["db", "list", "--db", "{db}", "--shape", "12x"],
                          ["--shape '12x'", "MxNxK"]),
    "bmm_without_batch": (["explain", "--op", "bmm", "--shape", "16x4096x4096"],
                          ["--shape '16x4096x4096'", "takes 4 sizes, not 3", "BxMxNxK",
                           "e.g. 4x8x4096x4096"]),
    # a short error with the close match, not argparse's whole usage
    "preset_misspelt": (["sweep", "--preset", "cpu_smoke"],
                        ["--preset 'cpu_smoke' is not a preset (did you mean 'cpu-smoke'?); "
                         "presets: dense-bf16-suite, llama3-8b,", ", cpu-smoke"]),
}


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "inductor_flydsl", *argv],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory,
            ) -> dict[str, subprocess.CompletedProcess[str]]:
    db = tmp_path_factory.mktemp("cli_errors") / "tuning.db"
    TuningDB.open(db, writable=True).close()  # a real, empty tuning DB
    argvs = [[a.replace("{db}", str(db)) for a in argv] for argv, _ in CASES.values()]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip(CASES, pool.map(_run, argvs), strict=True))


@pytest.mark.parametrize("case", list(CASES))
def test_bad_argument_is_named(case: str,
                               results: dict[str, subprocess.CompletedProcess[str]]) -> None:
    done = results[case]
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("inductor-flydsl: error: ")
    for part in CASES[case][1]:
        assert part in lines[0], (part, lines[0])
