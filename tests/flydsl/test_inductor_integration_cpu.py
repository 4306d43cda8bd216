"""The FlyDSL backend inside real Inductor autotuning, on this CPU machine.

On CPU no FlyDSL choice is ever offered and nothing is launched. To exercise the choice
caller, the DB recording of failures and eligibility on real IR, one test replaces the
runtime check of the *provider* (not Inductor, not SQLite) so candidates are offered: their
launch is still refused by the custom op's own runtime check, each is recorded as failed,
and ATen wins with a correct result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils
import torch
from torch._inductor.utils import fresh_cache

import inductor_flydsl
from inductor_flydsl.flydsl_backend import direct
from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.builds import prebuild

NO_FLYDSL_ON_CPU = r"""
import json, sys, torch, torch._inductor.config as ic
import inductor_flydsl
inductor_flydsl.enable(sys.argv[1])
ic.max_autotune_gemm_backends = "ATEN,CPP,FLYDSL"
a = torch.randn(64, 128, dtype=torch.bfloat16); b = torch.randn(128, 256, dtype=torch.bfloat16)
y = torch.compile(lambda a, b: torch.mm(a, b), mode="max-autotune")(a, b)
torch.testing.assert_close(y, a @ b)
print(json.dumps({"flydsl_imported": "flydsl" in sys.modules,
                  "stats": inductor_flydsl.stats()}))
"""


RUN_GENERATED = r"""
import importlib.util, sys, torch
print(f"before:{'inductor_flydsl' in sys.modules}")
spec = importlib.util.spec_from_file_location("generated", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(f"after:{'inductor_flydsl.flydsl_backend.direct' in sys.modules}")
print(f"torch:{hasattr(torch, '_inductor_flydsl')}")
x, b, expected = torch.load(sys.argv[2])
(y,) = module.call([x, b])
torch.testing.assert_close(y, expected)
print("ok")
"""


def test_cpu_offers_no_flydsl_choice_and_launches_nothing(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", NO_FLYDSL_ON_CPU, str(tmp_path / "t.db")],
                          capture_output=True, text=True, check=True,
                          env={**__import__("os").environ,
                               "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "c"),
                               "INDUCTOR_FLYDSL_SHIPPED": "0"})
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["flydsl_imported"] is False
    assert data["stats"]["errors"] == 0 and data["stats"]["benchmarked"] == 0


@pytest.fixture
def offered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(provider, "runtime_target", lambda device: ("gfx950", []))
    # parallel builds are off here (each test would cross-compile every candidate);
    # test_parallel_builds_* turns them on
    monkeypatch.setenv(prebuild.ENV_BUILD_JOBS, "0")
    db = tmp_path / "t.db"
    inductor_flydsl.enable(db, "readwrite")
    import torch._inductor.config as inductor_config

    with inductor_config.patch(max_autotune_gemm_backends="ATEN,FLYDSL"):
        yield db
    inductor_flydsl.disable()
    torch._dynamo.reset()


def _compile(fn, *args, dynamic: bool = False):
    with fresh_cache():
        torch._dynamo.reset()
        return torch.compile(fn, mode="max-autotune", dynamic=dynamic)(*args)


def _flydsl_rows(db: Path) -> list[dict]:
    inductor_flydsl.disable()  # checkpoint and close before reading
    if not db.exists():  # nothing was autotuned (a single ATen choice): no FlyDSL rows
        return []
    return list(sqlite_utils.Database(db).query(
        "select r.*, p.summary from results r join problems p on p.id = r.problem_id"
        " where r.backend = 'flydsl'"))


# Inductor treats every CPU graph input as unaligned (it only tracks GPU alignment), so
# the GEMM operands below are produced inside the graph (relu), as intermediates are.


def test_offered_candidates_fail_safely_and_aten_wins(offered: Path) -> None:
    a = torch.randn(64, 256, dtype=torch.bfloat16)
    w = torch.randn(128, 256, dtype=torch.bfloat16)
    bias = torch.randn(128, dtype=torch.bfloat16)

    def fn(a, w, c):
        return torch.addmm(c.relu(), a.relu(), w.relu().t(), beta=0.5, alpha=2.0)

    y = _compile(fn, a, w, bias)
    torch.testing.assert_close(y, fn(a, w, bias))
    rows = _flydsl_rows(offered)
    assert rows, "FlyDSL candidates were offered for an eligible addmm"
    assert all(r["status"] == "failed" and "not launched" in r["error"] for r in rows)
    assert all(r["candidate_id"].startswith("flydsl-gemm_dense-") for r in rows)
    assert len({r["candidate_id"] for r in rows}) == len(rows)
    assert {r["summary"] for r in rows} == {"addmm bfloat16 64x128x256 nt alpha=2.0 beta=0.5"}
    configs = [json.loads(r["config"]) for r in rows]
    assert all(c["template"] == "gemm_dense" and "tile_m" in c for c in configs)
    winner = next(iter(sqlite_utils.Database(offered).query("select * from winners")))
    assert winner["backend"] == "aten"


VIEWS = {
    "misaligned": lambda x: x.reshape(-1)[3:3 + 64 * 512].view(64, 512),  # 6-byte offset
    "odd_k": lambda x: x[:64, :500],  # K=500 and a leading stride of 1024
}


# (A view with no unit stride never reaches the provider: the mm lowerings make operands
# stride-1 first; test_eligibility.py covers that rule on problem descriptions.)
@pytest.mark.parametrize("case", ["misaligned", "odd_k", "fp32", "dynamic"])
def test_ineligible_inputs_get_no_flydsl_choice(offered: Path, case: str) -> None:
    dtype = torch.float32 if case == "fp32" else torch.bfloat16
    x = torch.randn(65, 1024, dtype=dtype)
    b = torch.randn(1024, 256, dtype=dtype)
    view = VIEWS.get(case, lambda t: t[:64, :512])

    def fn(x, b):
        a = view(x.relu())
        return torch.mm(a, b.relu()[: a.shape[1]])

    y = _compile(fn, x, b, dynamic=case == "dynamic")
    torch.testing.assert_close(y, fn(x, b))
    assert _flydsl_rows(offered) == []


def test_eligible_control_gets_flydsl_choices(offered: Path) -> None:
    """The same graph as above with an eligible view: candidates appear (so the rejections
    above are due to the inputs, not to the test set-up)."""
    x = torch.randn(65, 1024, dtype=torch.bfloat16)
    b = torch.randn(1024, 256, dtype=torch.bfloat16)

    def fn(x, b):
        return torch.mm(x.relu()[:64, :512], b.relu()[:512])

    _compile(fn, x, b)
    assert _flydsl_rows(offered)


def test_hip_version_parsing() -> None:
    from inductor_flydsl.flydsl_backend.offer.eligibility import hip_major

    assert hip_major("7.0.51831") == 7 and hip_major("6.4.1") == 6 and hip_major("x") == 0


def test_flydsl_winner_codegen_calls_the_custom_op(offered: Path) -> None:
    """When the DB names a FlyDSL candidate as the winner, Inductor's generated code calls
    the op (inductor_flydsl_direct.mm_out, no dispatcher, from the plugin's own module the
    generated module imports; nothing on torch) with out=; on this CPU it refuses to
    launch (it never launches without a verified ROCm runtime), and, called from the
    user's forward, computes the call with ATen instead: one warning naming the kernel
    and the reason, the right result, counted and recorded (issue 42: a run-time failure
    never raises in the forward)."""
    from inductor_flydsl.telemetry.user_warnings import TuningDBWarning

    x = torch.randn(64, 512, dtype=torch.bfloat16)
    b = torch.randn(512, 256, dtype=torch.bfloat16)

    def fn(x, b):
        return torch.mm(x.relu(), b.relu())

    _compile(fn, x, b)
    rows = _flydsl_rows(offered)  # disables the plugin and closes the DB
    assert rows
    db = sqlite_utils.Database(offered)
    chosen = rows[0]
    db.execute("update results set status = 'ok', time_ms = 0.001, error = ''"
               " where candidate_id = ?", [chosen["candidate_id"]])
    db.execute("update winners set candidate_id = ?, backend = 'flydsl', name = ?",
               [chosen["candidate_id"], chosen["name"]])
    db.conn.commit()
    db.close()
    inductor_flydsl.enable(offered, "readonly")
    cache = offered.parent / "inductor_cache"
    cache.mkdir()
    with fresh_cache(dir=str(cache), delete=False), \
            pytest.warns(TuningDBWarning, match="computed with ATen instead.*not launched"):
        torch._dynamo.reset()
        y = torch.compile(fn, mode="max-autotune")(x, b)
    torch.testing.assert_close(y, fn(x, b))
    stats = inductor_flydsl.stats()
    assert stats["hits"] >= 1 and stats["runtime_fallbacks"] == 1, stats
    wrappers = []
    for path in cache.rglob("*.py"):
        try:
            text = path.read_text()
        except OSError:  # a temporary file of Inductor's, gone already
            continue
        if "inductor_flydsl_direct." in text:
            wrappers.append(text)
    assert wrappers, "the generated wrapper calls the plugin's op"
    lines = [line.strip() for line in wrappers[0].splitlines()]
    call = next(line for line in lines if "inductor_flydsl_direct.mm_out(" in line)
    assert "out=" in call and "config=" in call and chosen["config"] != ""
    assert lines.count(direct.IMPORT) == 1, "the module imports the ops' namespace once"
    assert not hasattr(torch, "_inductor_flydsl")  # nothing of the plugin's on torch
    # the module runs in a fresh process that never imported the package (the entry
    # point off, the plugin off): it imports the ops' namespace itself
    module = next(p for p in cache.rglob("*.py") if "inductor_flydsl_direct." in p.read_text())
    inputs = offered.parent / "inputs.pt"
    torch.save([x, b, fn(x, b)], inputs)
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "TORCHINDUCTOR_CACHE_DIR":
           str(cache)}
    env.pop("INDUCTOR_FLYDSL", None)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", RUN_GENERATED, str(module),
                           str(inputs)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["before:False", "after:True", "torch:False", "ok"], \
        proc.stdout


def test_dynamic_m_gets_flydsl_choices_keyed_as_dynamic(offered: Path) -> None:
    """Only M symbolic (row-major A): FlyDSL candidates are offered (one launcher serves
    every M) and the selection is recorded under the dynamic problem's own key; K or N
    symbolic as well (the "dynamic" case above) gets none."""
    x = torch.randn(48, 512, dtype=torch.bfloat16)
    b = torch.randn(512, 256, dtype=torch.bfloat16)

    def fn(x, b):
        return torch.mm(x.relu(), b.relu())

    torch._dynamo.mark_dynamic(x, 0)
    y = _compile(fn, x, b)
    torch.testing.assert_close(y, fn(x, b))
    rows = _flydsl_rows(offered)
    assert rows and all(r["status"] == "failed" and "not launched" in r["error"]
                        for r in rows)
    # keyed at M's hint (48), M named symbolic
    assert {r["summary"] for r in rows} == {"mm bfloat16 48x256x512 nn dynamic[M]"}
    spec = json.loads(next(iter(sqlite_utils.Database(offered).query(
        "select spec from problems")))["spec"])
    assert spec["symbolic"] == {"inputs": [[0], []], "output": [0], "exprs": ["a", "a"]}
    from inductor_flydsl.problems.buckets import dynamic_m_problem
    from inductor_flydsl.problems.problem import synthetic_problem

    key = dynamic_m_problem(synthetic_problem("mm", 48, 256, 512, dtype="bfloat16",
                                              layout="nn"))
    assert key.spec() == spec, "explain --dynamic-m and the sweep look up this key"
    assert spec["inputs"][0] == {"dtype": "bfloat16", "size": [48, 512], "stride": [512, 1]}


def test_dynamic_validation_sizes_and_inputs() -> None:
    from inductor_flydsl.flydsl_backend.autotune.choices import dynamic_validation_m, resized_inputs

    assert dynamic_validation_m(64) == (1, 101)
    assert dynamic_validation_m(1) == (38,)
    for m in dynamic_validation_m(64):
        for tile_m in (16, 32, 64, 128, 256):
            assert m % tile_m, "each extra size ends in a partial tile"
    bias = torch.randn(256, dtype=torch.bfloat16)
    a = torch.randn(64, 512, dtype=torch.bfloat16)
    b = torch.randn(512, 256, dtype=torch.bfloat16).t().contiguous().t()
    out = torch.empty(64, 256, dtype=torch.bfloat16)
    (bias2, a2, b2), out2 = resized_inputs("addmm", (bias.expand(64, 256), a, b), out, 101)
    assert a2.shape == (101, 512) and a2.stride() == (512, 1) and a2.dtype == a.dtype
    assert bias2.shape == (101, 256) and bias2.stride() == (0, 1) and b2 is b
    assert out2.shape == (101, 256)
    (a3, b3), out3 = resized_inputs("mm", (a, b), out, 1)
    assert a3.shape == (1, 512) and out3.shape == (1, 256) and b3 is b


def _crash_one_build(monkeypatch: pytest.MonkeyPatch, crash_id: str) -> None:
    """The build pool runs tests/faults/builds.py, which aborts the worker building
    ``crash_id`` (forwarded with the build settings); builds never run in-process. A
    fresh pool starts with that function."""
    from inductor_flydsl.flydsl_backend.builds import catalog
    from tests.faults import builds

    prebuild.shutdown_pool()
    monkeypatch.setenv(builds.ENV_CRASH, crash_id)
    monkeypatch.setattr(catalog, "BUILD_FN", builds.BUILD_FN)
    forwarded = prebuild._is_build_setting
    monkeypatch.setattr(prebuild, "_is_build_setting",
                        lambda key: forwarded(key) or key == builds.ENV_CRASH)


def test_parallel_builds_before_benchmarking_isolate_a_crashing_build(
        offered: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Builds on: the candidates of one shape are cross-compiled for gfx950 in 2 worker
    processes into FlyDSL's disk cache before Inductor benchmarks them. One build aborts
    its worker (tests/faults/builds.py): only that candidate is failed with the crash; the
    others are built (one cache entry each) and then refused at launch (no ROCm here)."""
    from inductor_flydsl.flydsl_backend.offer.offering import offered_configs
    from inductor_flydsl.problems.keys import stable_id
    from inductor_flydsl.problems.problem import synthetic_problem

    offered_list, k = offered_configs(
        synthetic_problem("mm", 256, 1024, 512, dtype="bfloat16", layout="nt"), "gfx950")
    configs = offered_list[:k] if k else offered_list  # what a miss builds (top-k)
    crash_id = stable_id(configs[1].to_json())
    cache = tmp_path / "flydsl_cache"
    monkeypatch.setenv(prebuild.ENV_BUILD_JOBS, "2")
    _crash_one_build(monkeypatch, crash_id)
    monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", str(cache))
    prebuild.forget_builds()
    a = torch.randn(256, 512, dtype=torch.bfloat16)
    w = torch.randn(1024, 512, dtype=torch.bfloat16)

    def fn(a, w):
        return torch.mm(a.relu(), w.relu().t())

    y = _compile(fn, a, w)
    torch.testing.assert_close(y, fn(a, w))
    (run,) = prebuild.runs
    assert run.workers == 2 and run.jobs == len(configs) and run.wall_s is not None
    def config_id(row: dict) -> str:
        config = json.loads(row["config"])
        return stable_id({k: v for k, v in config.items()
                          if k not in ("template", "template_hash")})

    rows = {config_id(r): r for r in _flydsl_rows(offered)}
    assert len(rows) == len(configs)
    crashed = rows.pop(crash_id)
    assert crashed["status"] == "failed" and "build crashed" in crashed["error"]
    assert all("not launched" in r["error"] for r in rows.values())  # built, then refused
    entries = list(cache.rglob("*.pkl"))
    assert len(entries) == len(configs) - 1  # one disk-cache entry per built candidate
    prebuild.forget_builds()
    prebuild.shutdown_pool()  # its workers run the crashing build function
