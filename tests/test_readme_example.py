"""The README's first example, as written there, run in a fresh process on this CPU
machine with its own caches: it records every GEMM into the per-user DB (so
``freezing = True`` is in it and works), and a second run is served from that DB.
Also the README's front-page promises that must stay true: the two set-up commands, the
main job's command and the supported torch range as the run-time check states it."""

from __future__ import annotations

import re
import sqlite3
import sys
import tomllib
from pathlib import Path

import pytest

from inductor_flydsl.inductor.adapter.torch_range import SUPPORTED
from tests.conftest import PRODUCT_DEFAULTS, REPO, isolated_env, run_for_result

README = REPO / "README.md"


def first_python_block() -> str:
    match = re.search(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)
    assert match, "the README has no python example"
    return match.group(1)


@pytest.mark.slow  # two max-autotune compiles in fresh processes
def test_first_example_records_then_serves(tmp_path: Path) -> None:
    code = first_python_block()
    assert "torch._inductor.config.freezing = True" in code
    script = tmp_path / "example.py"
    script.write_text(code + "\nimport json\nprint('RESULT ' + json.dumps("
                             "inductor_flydsl.stats().as_dict()))\n")
    runs = []
    for run in ("first", "second"):
        env = isolated_env(tmp_path, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"cache_{run}"),
                           **PRODUCT_DEFAULTS)
        runs.append(run_for_result([sys.executable, str(script)], env, 600,
                                   f"the README example ({run} run)"))
    first, second = runs
    assert (first["misses"], first["benchmarked"], first["recorded"]) == (2, 2, 2), first
    assert (second["hits"], second["misses"], second["benchmarked"]) == (2, 0, 0), second
    db = tmp_path / "xdg_cache" / "inductor_flydsl" / "tuning.db"  # the per-user DB
    con = sqlite3.connect(db)
    assert con.execute("select count(*) from winners").fetchone()[0] == 2
    con.close()


def test_front_page_commands_and_torch_range() -> None:
    text = README.read_text()
    for command in ("    bash scripts/install.sh\n", "    bash scripts/run_tests.sh\n",
                    "    inductor-flydsl sweep && inductor-flydsl report\n"):
        assert command in text, command
    setup = text[text.index("## Set-up"):text.index("## First example")]
    assert " s " not in setup and "CI runs" not in setup  # no timings in the set-up
    # the supported range, checked at run time (the package declares no torch requirement)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("torch")]
    assert SUPPORTED == ((2, 13), (2, 14))
    assert "torch `>=2.13,<2.15`" in text
    assert "[docs/verification.md](docs/verification.md)" in text
    assert "[docs/measurements.md](docs/measurements.md)" in text
