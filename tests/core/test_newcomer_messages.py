"""What a new user is told (issue 44): a DB path that is a directory gives one warning
and the plugin is off; ``enable(strict=True)`` raises on a misspelt ``INDUCTOR_FLYDSL_*``
name and on an unusable DB; a DB problem is one warning, not two;
``INDUCTOR_FLYDSL_LOG=summary`` prints one line per compile with what the plugin did,
and why nothing was autotuned; a DB path problem names where the path came from and the
fix, and an explicit path's missing folder is never created (issue 52).

Each runs where the user would see it: in a fresh process, its stderr read whole."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import inductor_flydsl
from inductor_flydsl import PluginUnavailable
from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.settings import (
    ENV_SETTINGS,
    SCRIPT_VARIABLES,
    SettingError,
    Settings,
    UnknownSetting,
    settings_from_env,
)
from inductor_flydsl.telemetry.user_warnings import TuningDBWarning
from tests.conftest import REPO, builds_only_vars, isolated_env, run_compile_model

# the MLP scripts/compile_model.py compiles: 4 linears of distinct shapes, so 4 GEMM
# selections (Inductor would reuse the selection of a repeated shape)
DIMS = "64,96,32"  # two frozen linears: two GEMMs, each its own problem
GEMMS = 2


def _python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300, check=False)


def _plugin_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "inductor_flydsl" in line]


def test_db_directory_is_one_warning_and_the_plugin_off(tmp_path: Path) -> None:
    env = isolated_env(tmp_path, INDUCTOR_FLYDSL="1", INDUCTOR_FLYDSL_DB=str(tmp_path))
    proc = _python("import torch, inductor_flydsl; print(inductor_flydsl.active_settings())",
                   env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "None"  # off, as the warning says
    warned = [line for line in _plugin_lines(proc.stderr) if "Warning" in line]
    assert len(warned) == 1, proc.stderr
    assert "stays off" in warned[0] and f"INDUCTOR_FLYDSL_DB={str(tmp_path)!r}" in warned[0]
    assert "this is a directory" in warned[0]
    assert "using the default" not in proc.stderr


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    for name in list(os.environ):
        if name.startswith("INDUCTOR_FLYDSL"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("INDUCTOR_FLYDSL_SHIPPED", "0")
    yield
    inductor_flydsl.disable()


def test_strict_raises_on_a_misspelt_name(clean_env: None, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDUCTOR_FLYDSL_TOPK", "3")
    with pytest.raises(UnknownSetting) as raised:
        inductor_flydsl.enable(tmp_path / "t.db", strict=True)
    assert isinstance(raised.value, SettingError)
    assert str(raised.value) == ("INDUCTOR_FLYDSL_TOPK='3': not a setting of inductor_flydsl, "
                                 "so it does nothing; did you mean INDUCTOR_FLYDSL_TOP_K?")
    assert inductor_flydsl.active_settings() is None
    # two at once, one error naming both; a name with no near one points to `doctor`
    monkeypatch.setenv("INDUCTOR_FLYDSL_XYZZY", "1")
    with pytest.raises(SettingError) as raised:
        inductor_flydsl.enable(tmp_path / "t.db", strict=True)
    assert raised.value.names == ["INDUCTOR_FLYDSL_TOPK", "INDUCTOR_FLYDSL_XYZZY"]
    assert "listed by `inductor-flydsl doctor`" in str(raised.value)
    # the scripts' own variables are no typos; not strict, a typo does not stop the plugin
    monkeypatch.delenv("INDUCTOR_FLYDSL_XYZZY")
    monkeypatch.setenv("INDUCTOR_FLYDSL_SKIP_NEXT_TORCH", "1")
    monkeypatch.delenv("INDUCTOR_FLYDSL_TOPK")
    assert inductor_flydsl.enable(tmp_path / "t.db", strict=True).mode.value == "readwrite"
    monkeypatch.setenv("INDUCTOR_FLYDSL_TOPK", "3")
    assert inductor_flydsl.enable(tmp_path / "t.db").mode.value == "readwrite"


def test_strict_raises_on_an_unusable_db(clean_env: None, tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("not a database\n")
    with pytest.raises(PluginUnavailable) as raised:
        inductor_flydsl.enable(text, strict=True)
    assert str(raised.value) == (
        f"tuning DB not used: {text} is not an SQLite database (bad header) (give db_path or "
        "INDUCTOR_FLYDSL_DB a usable, writable file, or mode readonly to serve a read-only "
        "one)")
    assert inductor_flydsl.active_settings() is None
    assert text.read_text() == "not a database\n"  # never touched
    with pytest.raises(PluginUnavailable, match="does not exist"):
        inductor_flydsl.enable(tmp_path / "missing.db", "readonly", strict=True)
    # not strict: on, and the DB problem is left to the first compile's one warning
    assert inductor_flydsl.enable(text).mode.value == "readwrite"


def _summary_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if line.startswith("inductor_flydsl: compile ")]


@pytest.mark.slow  # three max-autotune compiles in fresh processes
def test_log_summary_and_one_warning_per_db_problem(tmp_path: Path,
                                                   shared_builds: Path) -> None:
    """Cold (benchmarked and recorded), warm (served), and over a text file in place of a
    DB (benchmarked, nothing recorded, one warning): one summary line per compile. (The
    three processes lower and benchmark as with caches of their own and reuse only the
    run's C++ builds: conftest ``isolated_env``.)"""
    db = tmp_path / "t.db"
    args = ["--plugin", "--dims", DIMS, "--mode", "max-autotune"]
    lines = {}
    for run, path in (("cold", db), ("warm", db), ("text", tmp_path / "notes.db")):
        if run == "text":
            path.write_text("not a database\n")
        env = isolated_env(tmp_path / run, shared_builds, INDUCTOR_FLYDSL_LOG="summary")
        result = run_compile_model([*args, "--db", str(path)], env, timeout=300)
        summary = _summary_lines(result["stderr"])
        assert len(summary) == 1, result["stderr"]
        lines[run] = (summary[0], result)
    expected = {
        "cold": f"0 hits, {GEMMS} misses, {GEMMS} benchmarked, {GEMMS} recorded",
        "warm": f"{GEMMS} hits, 0 misses, 0 benchmarked, 0 recorded",
        "text": f"0 hits, {GEMMS} misses, {GEMMS} benchmarked, 0 recorded",
    }
    for run, (line, result) in lines.items():
        assert re.fullmatch(r"inductor_flydsl: compile \d+/\d+: " + expected[run], line), line
        stats = result["stats"]
        assert [stats[k] for k in ("hits", "misses", "benchmarked", "recorded")] == [
            int(n) for n in re.findall(r"(\d+) \w+", expected[run])]
    stderr = lines["text"][1]["stderr"]
    told = [line for line in stderr.splitlines() if "tuning DB not used" in line]
    assert len(told) == 1, stderr  # a TuningDBWarning, no log line beside it
    assert "TuningDBWarning" in told[0] and "not an SQLite database" in told[0]
    assert (tmp_path / "notes.db").read_text() == "not a database\n"


def test_log_summary_off_by_default_and_explains_an_empty_compile(tmp_path: Path,
                                                                 shared_builds: Path) -> None:
    """No setting: no line. With it, a CPU compile without freezing autotunes nothing, and
    the line says why. (Both processes reuse the run's C++ builds, nothing else: the FX
    graph cache would otherwise serve the second compile.)"""
    code = ("import torch, inductor_flydsl\n"
            "m = torch.nn.Linear(16, 8).eval()\n"
            "with torch.no_grad():\n"
            "    torch.compile(m, mode='max-autotune')(torch.randn(4, 16))\n")
    base = isolated_env(tmp_path, INDUCTOR_FLYDSL="1", INDUCTOR_FLYDSL_DB=str(tmp_path / "t.db"),
                        **builds_only_vars(shared_builds))
    quiet = _python(code, base, tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert not _summary_lines(quiet.stderr)
    told = _python(code, {**base, "INDUCTOR_FLYDSL_LOG": "summary"}, tmp_path)
    assert told.returncode == 0, told.stderr
    assert _summary_lines(told.stderr) == [
        "inductor_flydsl: compile 0/0: 0 hits, 0 misses, 0 benchmarked, 0 recorded (no GEMM "
        "was autotuned: is mode='max-autotune' set? On CPU Inductor autotunes only with "
        "torch._inductor.config.freezing = True)"]


def test_log_summary_names_a_backend_list_that_leaves_one_choice(tmp_path: Path,
                                                                 shared_builds: Path) -> None:
    """mode='max-autotune' and freezing set, but no CPP in the GEMM backends: on CPU
    ATen is a GEMM's only choice, never autotuned, and the line says so instead of
    asking about the mode (issue 52). (The process reuses the run's C++ builds.)"""
    code = ("import torch, inductor_flydsl\n"
            "import torch._inductor.config as ic\n"
            "ic.freezing = True\n"
            "m = torch.nn.Linear(16, 8).eval()\n"
            "with torch.no_grad():\n"
            "    torch.compile(m, mode='max-autotune')(torch.randn(4, 16))\n")
    env = isolated_env(tmp_path, INDUCTOR_FLYDSL="1", INDUCTOR_FLYDSL_LOG="summary",
                       INDUCTOR_FLYDSL_DB=str(tmp_path / "t.db"),
                       TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS="ATEN,TRITON,FLYDSL",
                       **builds_only_vars(shared_builds))
    done = _python(code, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert _summary_lines(done.stderr) == [
        "inductor_flydsl: compile 0/0: 0 hits, 0 misses, 0 benchmarked, 0 recorded (no GEMM "
        "was autotuned: on CPU, the GEMM backends asked for "
        "(TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS=ATEN,TRITON,FLYDSL) have no CPP, so ATen "
        "is a GEMM's only choice and a single choice is never autotuned: add CPP)"]


def _db_warnings(settings: Settings) -> list[str]:
    """What the first compile would warn about the user's DB (the same object opens it)."""
    layered = LayeredTuningDB(settings)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            layered.user_db()
    finally:
        layered.close()
    return [str(w.message) for w in caught if issubclass(w.category, TuningDBWarning)]


def test_a_db_path_problem_names_where_the_path_came_from(
        clean_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text file as the DB: the warning names INDUCTOR_FLYDSL_DB (or enable's db_path)
    and the fix; the file is never written (issue 52)."""
    text = tmp_path / "notes.txt"
    text.write_text("my notes\n")
    monkeypatch.setenv("INDUCTOR_FLYDSL_DB", str(text))
    assert _db_warnings(settings_from_env()) == [
        f"inductor_flydsl: tuning DB not used: {text} is not an SQLite database (bad "
        "header). Compilation continues as plain max-autotune; the file was not modified. "
        "The path is INDUCTOR_FLYDSL_DB's: point INDUCTOR_FLYDSL_DB at a tuning DB, or at a "
        "new file name (the first compile creates it)."]
    monkeypatch.delenv("INDUCTOR_FLYDSL_DB")
    other = tmp_path / "more_notes.txt"  # one warning per file and process: another file
    other.write_text("more notes\n")
    told = _db_warnings(settings_from_env(other, "readonly"))
    assert len(told) == 1 and told[0].endswith(
        f"The path is enable(db_path={str(other)!r}): give db_path a tuning DB."), told
    assert (text.read_text(), other.read_text()) == ("my notes\n", "more notes\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["more_notes.txt", "notes.txt"]


def test_an_explicit_db_folder_is_never_created(clean_env: None, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """INDUCTOR_FLYDSL_DB or enable(db_path=) under a folder that does not exist (a typo):
    one warning naming it, the folder and the fix, nothing recorded or created;
    enable(strict=True) raises. The default per-user path's folders are created
    (docs/decisions.md, issue 52)."""
    path = tmp_path / "experiments_typo" / "run1" / "tuning.db"
    monkeypatch.setenv("INDUCTOR_FLYDSL_DB", str(path))
    folder = path.parent
    fix = f"create it (mkdir -p {folder}) or correct the path"
    assert _db_warnings(settings_from_env()) == [
        f"inductor_flydsl: tuning DB not used: the folder {folder} of "
        f"INDUCTOR_FLYDSL_DB={str(path)!r} does not exist (a folder you give is never "
        f"created): {fix}. Compilation continues as plain max-autotune; nothing is "
        "recorded."]
    with pytest.raises(PluginUnavailable, match=re.escape(fix)):
        inductor_flydsl.enable(strict=True)
    monkeypatch.delenv("INDUCTOR_FLYDSL_DB")
    other = folder / "other.db"  # one warning per path and process: another path
    told = _db_warnings(settings_from_env(other))
    assert len(told) == 1 and f"of enable(db_path={str(other)!r}) does not exist" in told[0]
    assert not (tmp_path / "experiments_typo").exists()
    # the default per-user DB: its folders are created, the DB with them
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fresh_cache"))
    default = settings_from_env()
    assert _db_warnings(default) == []
    assert default.db_path == tmp_path / "fresh_cache" / "inductor_flydsl" / "tuning.db"
    assert default.db_path.is_file()


def test_log_summary_outlives_a_dynamo_reset(tmp_path: Path) -> None:
    """``torch._dynamo.reset()`` clears Dynamo's compile callbacks; the plugin puts its own
    back in the next compile (``compile_end``), so that compile still gets its line:
    served from the FX-graph cache (the plugin's ``uuid()`` puts them back), and with that
    cache off (its post-grad pass does, as in a sweep worker)."""
    code = ("import torch, inductor_flydsl\n"
            "import torch._inductor.config as ic\n"
            "m = torch.nn.Linear(16, 8).eval()\n"
            "with torch.no_grad():\n"
            "    torch.compile(m, mode='max-autotune')(torch.randn(4, 16))\n"
            "    torch._dynamo.reset()\n"
            "    torch.compile(m, mode='max-autotune')(torch.randn(4, 16))\n"
            "    ic.fx_graph_cache = False\n"
            "    torch._dynamo.reset()\n"
            "    torch.compile(m, mode='max-autotune')(torch.randn(4, 16))\n"
            "from torch._dynamo.utils import counters\n"
            "print('FX_CACHE_HITS', counters['inductor']['fxgraph_cache_hit'])\n")
    env = isolated_env(tmp_path, INDUCTOR_FLYDSL="1", INDUCTOR_FLYDSL_LOG="summary",
                       INDUCTOR_FLYDSL_DB=str(tmp_path / "t.db"))
    done = _python(code, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "FX_CACHE_HITS 1" in done.stdout, done.stdout  # the second compile: a cache hit
    assert len(_summary_lines(done.stderr)) == 3, done.stderr


def test_the_scripts_variables_are_known() -> None:
    """Every ``INDUCTOR_FLYDSL_*`` name the set-up and test scripts read is known (a
    setting or :data:`settings.SCRIPT_VARIABLES`), so ``doctor`` and ``strict`` never call
    it a typo; and no script variable shadows a setting."""
    used = set()
    for script in (*(REPO / "scripts").glob("*.sh"), *(REPO / ".ci").glob("*")):
        if script.is_file():
            used |= set(re.findall(r"INDUCTOR_FLYDSL_[A-Z0-9_]*[A-Z0-9]", script.read_text()))
    settings_names = {s.name for s in ENV_SETTINGS}
    assert used - settings_names <= set(SCRIPT_VARIABLES), sorted(
        used - settings_names - set(SCRIPT_VARIABLES))
    assert not set(SCRIPT_VARIABLES) & settings_names
