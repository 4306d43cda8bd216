"""What the command line tells a new user (issue 44), each through a real
``python -m inductor_flydsl`` subprocess: ``emulate`` refuses arguments that do not
describe the ISA file, with the reason; ``predict --isa`` refuses a tile the ISA cannot
hold; errors name what the user gave, not a default; output folders are created;
``explain`` lists configs in the order it states and does not promise a CPU autotune;
``sweep --no-progress`` keeps its lines; ``doctor`` says why a DB file is unusable.

The ISA files are real cross-compiles of one small config (gfx950, three variants)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, isolated_env

CONFIG = {"tile_m": 32, "tile_n": 32, "tile_k": 64, "waves_m": 1, "waves_n": 1, "stages": 2,
          "group_m": 1}
CONFIG_JSON = json.dumps(CONFIG)
# the ISA of (dtype, layout, op), its checks on the arguments of another variant
VARIANTS = (("bf16", "nt", "mm"), ("fp16", "nt", "mm"), ("bf16", "nn", "bmm"))


def _cli(*argv: str, env: dict[str, str] | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = env or {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "inductor_flydsl", *argv], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def _error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one error line; no traceback."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().removeprefix("inductor-flydsl: error: ")


@dataclass(frozen=True)
class Isa:
    path: Path  # where FlyDSL wrote it, 00_origin.mlir beside it
    copy: Path  # the same file alone elsewhere (an edited copy, say)


@pytest.fixture(scope="module")
def isas(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Isa]:
    from inductor_flydsl.flydsl_backend.builds.cross_compile import compile_config

    root = tmp_path_factory.mktemp("isa")
    found = {}
    for dtype, layout, op in VARIANTS:
        result = compile_config("gemm_dense", CONFIG, arch="gfx950", dtype=dtype,
                                layout=layout, op=op, dump_dir=root / f"{dtype}_{layout}_{op}",
                                analyze_loop=False)
        assert result.ok and result.isa_path, result.error
        copy = root / "copies" / f"{dtype}_{layout}_{op}.s"
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(result.isa_path, copy)
        found[dtype, layout, op] = Isa(Path(result.isa_path), copy)
    return found


def _emulate(isa: Path, *extra: str, config: str = CONFIG_JSON, op: str = "mm",
             shape: str = "64x64x128") -> subprocess.CompletedProcess[str]:
    return _cli("emulate", "--isa", str(isa), "--config", config, "--op", op, "--shape", shape,
                "--arch", "gfx950", *extra)


def test_emulate_refuses_arguments_that_do_not_describe_the_isa(isas: dict) -> None:
    bf16 = isas["bf16", "nt", "mm"].path
    cases = {  # arguments -> the reason's parts
        ("--dtype", "fp16"): ["--dtype fp16: the ISA's MFMAs are v_mfma_f32_16x16x32_bf16: it "
                              "was built for --dtype bf16 (--dtype fp16 on gfx950 uses "
                              "v_mfma_f32_16x16x32_f16)"],
        ("--layout", "tn"): ["--layout tn: the kernel was built for layout nt (operand strides "
                             f"in {bf16.parent / '00_origin.mlir'})"],
        ("--op", "bmm"): ["--op bmm: the ISA's kernel takes 22 argument slots", "--op bmm "
                          "passes 22 of sizes [8, 28,", "the ISA's are those of --op mm"],
        ("--op", "addmm"): ["--op addmm:", "the ISA's are those of --op mm"],
        ("--config", json.dumps({**CONFIG, "tile_m": 64, "waves_m": 2})): [
            "--config: the ISA's workgroup has 64 threads (1 wave(s) of 64), the config's "
            "waves_m=2 x waves_n=1 make 128",
            "--config: the ISA allocates 16384 bytes of LDS, the config (tile_m=64, tile_n=32, "
            "tile_k=64, stages=2) 24576 on gfx950: its tile or stages differ"],
    }

    def run(case: tuple[str, str]) -> subprocess.CompletedProcess[str]:
        option, value = case
        if option == "--config":
            return _emulate(bf16, config=value)
        if option == "--op":
            return _emulate(bf16, op=value, shape="2x64x64x128" if value == "bmm" else
                            "64x64x128")
        return _emulate(bf16, option, value)

    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = dict(zip(cases, pool.map(run, cases), strict=True))
    for case, parts in cases.items():
        message = _error(procs[case])
        assert message.startswith(f"{bf16} is not the kernel these arguments describe"), case
        for part in parts:
            assert part in message, (case, message)
    # the other variants' files against their own arguments and against another's
    fp16 = _error(_emulate(isas["fp16", "nt", "mm"].path))  # --dtype bf16 is the default
    assert "it was built for --dtype fp16" in fp16
    nn_bmm = _error(_emulate(isas["bf16", "nn", "bmm"].path, "--layout", "nn"))
    assert "--op mm:" in nn_bmm and "the ISA's are those of --op bmm" in nn_bmm


def test_emulate_runs_a_matching_isa_and_says_what_it_could_not_check(isas: dict) -> None:
    bf16 = isas["bf16", "nt", "mm"]
    ok = _emulate(bf16.path, "--json")
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    result = json.loads(ok.stdout)
    assert result["ok"] and result["not_checked"] == []
    # a copy without FlyDSL's dump beside it: the layout cannot be checked; run with the
    # wrong one, the result is wrong, and the output says the layout was not checked
    wrong = _emulate(bf16.copy, "--layout", "nn")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert wrong.stdout.startswith("WRONG: mm bf16 nn 64x64x128")
    assert ("  not checked: --layout nn: the ISA does not record its operands' layout, and "
            "FlyDSL's 00_origin.mlir (which does) is not beside it; a kernel built for other "
            "arguments gives wrong results") in wrong.stdout.splitlines()
    assert _emulate(bf16.copy, "--layout", "nt").returncode == 0


def test_predict_isa_refuses_a_tile_the_isa_cannot_hold(isas: dict) -> None:
    isa = isas["bf16", "nt", "mm"].path
    args = ["predict", "--isa", str(isa), "--shape", "256x256x1024", "--json"]
    right = _cli(*args, "--tile", "32x32x64")
    assert right.returncode == 0, right.stderr
    assert json.loads(right.stdout)["predictions"][0]["predicted_us"] > 0
    message = _error(_cli(*args, "--tile", "64x64x64"))
    assert message.startswith(f"--tile '64x64x64': {isa} does not hold this tile: one trip of "
                              "its main loop issues 16 v_mfma_f32_16x16x32_bf16 per wave, "
                              "with 1 wave(s) (its metadata's workgroup size): 131072 "
                              "multiply-adds per workgroup, which is 0.5 K steps of a "
                              "64x64x64 tile (262144 each)"), message
    assert "which is 1.33 K steps of a 48x32x64 tile" in _error(_cli(*args, "--tile",
                                                                       "48x32x64"))
    assert _error(_cli(*args, "--tile", "32x32x64", "--waves", "2")) == (
        f"--waves '2': {isa}'s kernel metadata gives its workgroups 64 threads (1 wave(s) of "
        "64); leave --waves out to take it from there")


def test_errors_name_what_the_user_gave() -> None:
    cases = {
        ("predict", "--op", "mm", "--shape", "16x4096x4096", "--config", '{"tile_m":16}'):
            "--config '{\"tile_m\":16}': not a valid config: tile_m=16 is not a multiple of "
            "16 * waves_m=2; waves_m=2 is the default, not in --config: give it to fit your "
            "values",
        ("predict", "--op", "scaled_mm", "--shape", "128x4096x4096"):
            "--dtype is not given: --op scaled_mm needs the MX formats: use mxfp8, mxfp4 or "
            "<a>x<b> with formats e4m3, e5m2, e2m1 (e.g. e4m3xe2m1)",
        ("explain", "--op", "scaled_mm", "--shape", "128x4096x4096"):
            "--dtype is not given: --op scaled_mm needs the MX formats: use mxfp8, mxfp4 or "
            "<a>x<b> with formats e4m3, e5m2, e2m1 (e.g. e4m3xe2m1)",
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = dict(zip(cases, pool.map(lambda argv: _cli(*argv), cases), strict=True))
    for argv, expected in cases.items():
        assert _error(procs[argv]) == expected, argv
    # a value the user gave is still named as given
    given = _error(_cli("predict", "--op", "mm", "--shape", "16x4096x4096", "--config",
                        '{"tile_m":16,"waves_m":2}'))
    assert given.endswith("tile_m=16 is not a multiple of 16 * waves_m=2"), given


def test_db_export_creates_its_folder(tmp_path: Path) -> None:
    from inductor_flydsl.db.store import TuningDB

    db = tmp_path / "t.db"
    TuningDB.open(db, writable=True).close()
    target = tmp_path / "not" / "there" / "yet" / "x.csv"
    proc = _cli("db", "export", "--db", str(db), "--csv", str(target))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote 0 rows to {target}"
    assert target.read_text().splitlines()[0] == "summary"  # the header of an empty DB
    blocked = _error(_cli("db", "export", "--db", str(db), "--csv", str(db / "x.csv")))
    assert blocked == f"--csv '{db / 'x.csv'}': '{db}' is a file, not a folder"


def test_explain_lists_in_the_order_it_states_and_names_the_cpu_case(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    from inductor_flydsl.db.store import TuningDB

    TuningDB.open(db, writable=True).close()
    shape = "8x4096x4096"
    text = _cli("explain", "--op", "mm", "--shape", shape, "--db", str(db))
    assert text.returncode == 0, text.stderr
    data = json.loads(_cli("explain", "--op", "mm", "--shape", shape, "--json").stdout)
    configs = data["configs"]
    benchmarked = [c for c in configs if c["offered"] is True]
    others = [c for c in configs if c["offered"] is False]
    assert benchmarked and others and len(benchmarked) + len(others) == len(configs)
    # the headline and the legend say the same of offered True and False
    true = "benchmarked by a compile with no record (the model's top-k, INDUCTOR_FLYDSL_TOP_K)"
    false = ("never benchmarked by a compile with no record, offered only so that a record "
             "of it is served (`inductor-flydsl sweep` measures every config)")
    assert (f"FlyDSL is eligible for mm bfloat16 {shape} nt on gfx950: {len(configs)} DEFAULT "
            f"configs, offered True (the first {len(benchmarked)}): {true}; offered False "
            f"(the other {len(others)}): {false}; each part fastest predicted "
            "first") in text.stdout
    assert f"offered True: {true}; False: {false}" in text.stdout
    assert data["model"]["offered"] == f"True: {true}; False: {false}"
    # the table's predicted times, read back from the text: sorted within each part
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in text.stdout.splitlines() if line.startswith("│")]
    header = [line for line in text.stdout.splitlines() if line.startswith("┃")]
    names = ["".join(parts).strip() for parts in zip(*[[c.strip() for c in h.split("┃")[1:-1]]
                                                        for h in header], strict=True)]
    column, offered = names.index("predicted_us"), names.index("offered")
    listed = [(row[offered], float(row[column])) for row in rows if row[column]]
    assert [o for o, _ in listed] == ["True"] * len(benchmarked) + ["False"] * len(others)
    for part in ("True", "False"):
        times = [t for o, t in listed if o == part]
        assert times == sorted(times), (part, times)
    from inductor_flydsl.sweep.items import cpu_linear_op

    assert (f"tuning DB {db}: no winner for this problem or its bucket (M=8); a max-autotune "
            "compile on a gfx950 GPU autotunes it and records every candidate (on CPU, "
            "Inductor autotunes an mm only when its weight is a constant, with "
            "torch._inductor.config.freezing = True, and it is recorded as the op oneDNN "
            "makes of a bfloat16 linear layer: "
            f"{cpu_linear_op('bfloat16')} on this machine)") in text.stdout
    assert "will be autotuned" not in text.stdout


def test_explain_says_what_a_cpu_records_of_a_grouped_gemm(tmp_path: Path) -> None:
    """A grouped GEMM on CPU is not recorded at all (ATen's one choice:
    tests/grouped/test_grouped_inductor_cpu.py), not as packed_linear. (A bmm shape
    without its batch: tests/core/test_cli_errors.py.)"""
    db = tmp_path / "empty.db"
    from inductor_flydsl.db.store import TuningDB

    TuningDB.open(db, writable=True).close()
    grouped = _cli("explain", "--op", "grouped_mm", "--shape", "8x512x4096x4096", "--db",
                   str(db))
    assert grouped.returncode == 0, grouped.stderr
    assert ("(on CPU, Inductor's lowering of a grouped GEMM offers one choice, ATen's: "
            "nothing is compared, so nothing is recorded)") in grouped.stdout
    assert "packed_linear" not in grouped.stdout


NO_FLYDSL = ("import sys; sys.modules['flydsl'] = None  # `import flydsl` fails\n"
             "from inductor_flydsl.cli.main import main; sys.exit(main(sys.argv[1:]))")


def test_explain_without_flydsl_says_it_is_not_installed(tmp_path: Path) -> None:
    """Whatever the shape, FlyDSL serves nothing where `import flydsl` fails: explain
    says so and how to install it (the runtime check's own line is not repeated)."""
    env = isolated_env(tmp_path)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", NO_FLYDSL, "explain", *argv], env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    with ThreadPoolExecutor(max_workers=2) as pool:
        text, data = pool.map(lambda argv: run(*argv), (
            ("--op", "mm", "--shape", "4096x4096x4096", "--check-runtime"),
            ("--op", "mm", "--shape", "4096x4096x4096", "--json")))
    assert text.returncode == 0 and data.returncode == 0, text.stderr + data.stderr
    reason = ("the flydsl package is not installed in this Python (import of flydsl halted; "
              "None in sys.modules): install it with pip install 'flydsl>=0.5,<0.6' (wheels "
              "for x86-64 Linux)")
    lines = text.stdout.splitlines()
    assert lines[0] == "FlyDSL is NOT eligible for mm bfloat16 4096x4096x4096 nt on gfx950:"
    assert f"  - {reason}" in lines
    assert sum("flydsl package" in line for line in lines) == 1
    result = json.loads(data.stdout)
    assert result["eligible"] is False and result["configs"] == []
    assert result["reasons"] == [reason]


def test_a_new_user_is_told_how_a_tuning_db_is_made(tmp_path: Path) -> None:
    """`db stats` and `report` before any DB exists (a fresh per-user cache dir): the
    reason, and how one is made."""
    env = isolated_env(tmp_path)
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = list(pool.map(lambda argv: _cli(*argv, env=env), (("db", "stats"),
                                                                    ("report",))))
    for proc in procs:
        path, reason = _error(proc).split(" does not exist: ", 1)
        assert Path(path).is_relative_to(tmp_path) and not Path(path).exists()  # the default
        assert reason == (
            "there is no tuning DB there yet. A max-autotune compile with the plugin on "
            "(INDUCTOR_FLYDSL=1, or inductor_flydsl.enable()) creates it, and so does "
            "`inductor-flydsl sweep`; for another file, give --db PATH")


def test_report_without_pandas_names_an_install_that_works(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['pandas'] = None  # `import pandas` fails\n"
            "from inductor_flydsl.cli.main import main; sys.exit(main(['report']))")
    proc = subprocess.run([sys.executable, "-c", code], env=isolated_env(tmp_path),
                          capture_output=True, text=True, timeout=300, check=False)
    assert _error(proc) == ("`inductor-flydsl report` needs pandas and matplotlib (pandas is "
                            "missing): pip install pandas matplotlib (or, in a checkout of "
                            "inductor-flydsl: pip install '.[report]')")


def test_sweep_no_progress_keeps_the_header_and_item_lines(tmp_path: Path) -> None:
    """An item a CPU always skips: the sweep's lines without running a compile."""
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("op,M,N,K,batch,dtype,layout\nmm,32,64,16,,bfloat16,nt\n")
    db = tmp_path / "t.db"
    env = isolated_env(tmp_path, INDUCTOR_FLYDSL_ON_BUSY="record")
    proc = _cli("sweep", "--shapes", str(shapes), "--db", str(db), "--no-progress", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [" ".join(line.split()) for line in proc.stderr.splitlines()]
    assert f"sweep: 1 items into {db}" in lines, proc.stderr
    assert "started mm bfloat16 32x64x16 nt" in lines, proc.stderr
    assert any(line.startswith("skipped mm bfloat16 32x64x16 nt") for line in lines), lines
    assert not any("━" in line for line in proc.stderr.splitlines())  # no bar


def test_doctor_says_why_a_db_file_is_unusable(tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("my notes, not a database\n")
    proc = _cli("doctor", env=isolated_env(tmp_path, INDUCTOR_FLYDSL_DB=str(text)))
    assert proc.returncode == 1, proc.stdout
    reason = f"{text} is not an SQLite database (bad header)"
    file_lines = [line.split() for line in proc.stdout.splitlines()
                  if line.strip().startswith("! file")]
    assert file_lines == [["!", "file", "unusable:", *reason.split()]], proc.stdout
    assert f"  - {reason}: compiles will not use it" in proc.stdout.splitlines()


def test_db_commands_name_where_an_unusable_path_came_from(tmp_path: Path) -> None:
    """Issue 52, point 8 for the command line: a text file given to ``db stats`` or
    ``report`` is named with where its path came from (``--db`` or
    ``INDUCTOR_FLYDSL_DB``) and the fix; the file is left as it was."""
    text = tmp_path / "notes.db"
    text.write_text("my notes, not a database\n")
    env = isolated_env(tmp_path)
    given = _cli("db", "stats", "--db", str(text), env=env)
    from_env = _cli("report", "--out", str(tmp_path / "r.md"),
                    env={**env, "INDUCTOR_FLYDSL_DB": str(text)})
    reason = f"{text} is not an SQLite database (bad header)"
    assert given.returncode == 2 and reason in given.stderr, given.stderr
    assert "The path is --db's: give --db a tuning DB file" in given.stderr
    assert from_env.returncode == 2 and reason in from_env.stderr, from_env.stderr
    assert "point INDUCTOR_FLYDSL_DB at a tuning DB" in " ".join(from_env.stderr.split())
    assert text.read_text() == "my notes, not a database\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("notes")) == [
        "notes.db"]  # no journal or side file either


def test_the_rocm_scripts_are_commands_of_the_package(tmp_path: Path) -> None:
    """``validate-rocm`` and ``vllm-serving`` run from the installed package (issue 52),
    through its ``inductor-flydsl`` script where installed: their help, and on a machine
    without ROCm validate-rocm's preflight message and exit 2, before any launch."""
    script = shutil.which("inductor-flydsl")
    head = [script] if script else [sys.executable, "-m", "inductor_flydsl"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argvs = [["validate-rocm", "--help"], ["vllm-serving", "--help"], ["validate-rocm"]]

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*head, *argv], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, check=False)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        rocm_help, vllm_help, rocm = pool.map(run, argvs)
    assert rocm_help.returncode == 0, rocm_help.stderr
    assert rocm_help.stdout.startswith("usage: inductor-flydsl validate-rocm")
    assert "--skip-graphs" in rocm_help.stdout and "--timing" in rocm_help.stdout
    assert vllm_help.returncode == 0, vllm_help.stderr
    assert vllm_help.stdout.startswith("usage: inductor-flydsl vllm-serving")
    assert "--model MODEL" in vllm_help.stdout
    if _torch_is_rocm():
        return
    assert rocm.returncode == 2, rocm.stdout + rocm.stderr  # not 134 (an abort)
    assert "Traceback" not in rocm.stderr
    assert rocm.stderr.strip().startswith("validate_rocm: no ROCm: this torch"), rocm.stderr
    assert "torch.version.hip is None" in rocm.stderr


def _torch_is_rocm() -> bool:
    import torch

    return torch.version.hip is not None
