"""Shared fixtures: isolated environments for real torch.compile subprocesses."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from unittest import mock

import pytest
import torch

from inductor_flydsl.settings import REPEATS

REPO = Path(__file__).resolve().parent.parent
# In-process tests never layer the shipped DBs in unless a test asks for them.
os.environ["INDUCTOR_FLYDSL_SHIPPED"] = "0"
# The suite's compiles re-measure each selection's two finalists once (two samples each),
# not four times (the default, INDUCTOR_FLYDSL_REPEATS=5): on this CPU a round is 100 ms
# per finalist (Inductor's CPU benchmarker), and the four rounds took 4.0 s of a 13.4 s
# compile of compile_model.py's MLP (4 GEMM selections, C++ builds warm; cProfile). The
# tests about confidence, the README's example and the timing-noise test run with the
# default (PRODUCT_DEFAULTS); tests/core/test_confidence_rules.py decides on samples.
SUITE_REPEATS = "2"
os.environ["INDUCTOR_FLYDSL_REPEATS"] = SUITE_REPEATS
PRODUCT_DEFAULTS = {"INDUCTOR_FLYDSL_REPEATS": str(REPEATS.default)}
COMPILE_MODEL = REPO / "scripts" / "compile_model.py"


def _has_rocm() -> bool:
    return torch.version.hip is not None and torch.cuda.is_available()


def _has_cuda() -> bool:
    return torch.version.cuda is not None and torch.cuda.is_available()


# The test files that keep one worker longest (seconds of one worker in a `--durations`
# run of scripts/run_tests.sh on 2 cores, 2026-12-07, after the run's C++ builds were
# shared: the first torch release; then the second's run of tests/core), longest first.
# They are collected first: pytest-xdist's loadfile hands files to workers in collection
# order, and a 300 s file reached last (test_sweep.py sits late in the alphabet) left the
# other worker idle for up to its whole length. The two files that run only under the
# second release (they skip in a blink under the first) lead, as they lead that run.
LONGEST_FIRST = (
    "tests/core/test_upgrade_priors.py",              # -; 99
    "tests/core/test_fusion_replay_cpu.py",           # -; 97
    "tests/sweep/test_sweep.py",                      # 259
    "tests/emulator/test_epilogue.py",                # 168 (two compile workers)
    "tests/core/test_dynamic_shapes.py",              # 138
    "tests/core/test_record_reuse_cpu.py",            # 122; 49
    "tests/core/test_problem_roundtrip.py",           # 93
    "tests/test_newcomer_cli.py",                     # 92
    "tests/core/test_epilogue_agreement_extern.py",   # 79; 81
    "tests/core/test_epilogue_agreement_template.py", # 61; 84
    "tests/grouped/test_grouped_inductor_cpu.py",     # 76
    "tests/core/test_concurrency.py",                 # 70
    "tests/test_wheel.py",                            # 70
    "tests/core/test_newcomer_messages.py",           # 68; 60
    "tests/flydsl/test_template_change.py",           # 62
    "tests/sweep/test_dynamic_misses.py",             # 60
    "tests/test_shipped_catalog.py",                  # 59
    "tests/flydsl/test_epilogue_fusion_cpu.py",       # 57
    "tests/core/test_partial_hits_converge.py",       # 52
    "tests/flydsl/test_build_pool.py",                # 41
    "tests/test_readme_example.py",                   # 41
    "tests/core/test_bad_db_files.py",                # 40
    "tests/core/test_fx_cache_isolation.py",          # 37
)


def _longest_first(items: list[pytest.Item]) -> None:
    """``items`` reordered in place: the files of LONGEST_FIRST first, in its order, then
    every other file in collection order (a file's tests stay together and in order: the
    sort is stable)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _longest_first(items)
    skip_rocm = pytest.mark.skip(reason="needs an AMD GPU with ROCm")
    skip_cuda = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA")
    for item in items:
        if "rocm" in item.keywords and not _has_rocm():
            item.add_marker(skip_rocm)
        if "cuda" in item.keywords and not _has_cuda():
            item.add_marker(skip_cuda)


# isolated_env(builds=...): marks an environment whose compile_model.py run must turn
# Inductor's other caches off (run_compile_model passes --no-inductor-caches)
_SHARED_BUILDS = "_TESTS_SHARED_INDUCTOR_BUILDS"



def load_script(name: str) -> ModuleType:
    """A script of ``scripts/`` imported as the module ``name`` (registered in
    ``sys.modules``: dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def builds_only_vars(builds: Path | None = None) -> dict[str, str]:
    """A child's environment variables that make ``builds`` (default: the test run's,
    ``run_builds``) its Inductor cache dir with the FX graph and AOTAutograd caches off.
    The autotune-timing cache has no variable: the child must turn it off itself
    (compile_model.py's ``--no-inductor-caches``, a sweep worker always), or patch
    ``lookup`` as a steered child does."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(builds or run_builds()),
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
            "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}


def isolated_env(tmp: Path, builds: Path | None = None, **extra: str) -> dict[str, str]:
    """Environment for a child process: its own Inductor cache and per-user cache dir,
    no shipped DB layered in, no plugin auto-enable, the suite's re-measure rounds
    (``SUITE_REPEATS``; ``**PRODUCT_DEFAULTS`` in ``extra`` for the default).

    With ``builds`` (the ``shared_builds`` fixture), for scripts/compile_model.py through
    :func:`run_compile_model`: Inductor's cache dir is ``builds``, shared, with every
    cache that could answer in place of lowering or benchmarking off (the FX graph and
    AOTAutograd caches here, the autotune-timing cache by ``--no-inductor-caches``), so
    the process lowers and benchmarks as with a cache of its own and only reuses the C++
    builds of identical kernel sources (the code cache is keyed by the source)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTOR_FLYDSL")}
    env.update({"TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor_cache"),
                "XDG_CACHE_HOME": str(tmp / "xdg_cache"),
                "INDUCTOR_FLYDSL_SHIPPED": "0", "INDUCTOR_FLYDSL_REPEATS": SUITE_REPEATS})
    if builds is not None:
        env.update({**builds_only_vars(builds), _SHARED_BUILDS: "1"})
    env.update(extra)
    return env


def compile_model_command(args: list[str], env: dict[str, str],
                          ) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run scripts/compile_model.py with ``args``
    in ``env`` (an ``isolated_env``; with its ``builds``: ``--no-inductor-caches``)."""
    env = dict(env)
    if env.pop(_SHARED_BUILDS, None):
        args = [*args, "--no-inductor-caches"]
    return [sys.executable, str(COMPILE_MODEL), *args], env


def result_of(stdout: str, stderr: str, returncode: int | None, what: str) -> dict:
    """A finished child's ``RESULT <json>`` line (with its stderr under ``"stderr"``), or
    an AssertionError naming ``what`` with its output."""
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line.removeprefix("RESULT "))
            result["stderr"] = stderr
            return result
    raise AssertionError(f"{what} failed (exit {returncode}):\n"
                         f"{stdout[-2000:]}\n{stderr[-4000:]}")


def run_for_result(command: list[str], env: dict[str, str], timeout: float,
                   what: str) -> dict:
    """Run ``command`` in a fresh process; its ``RESULT <json>`` line (:func:`result_of`)."""
    proc = subprocess.run(command, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return result_of(proc.stdout, proc.stderr, proc.returncode, what)


def run_compile_model(args: list[str], env: dict[str, str], timeout: float = 600) -> dict:
    """Run scripts/compile_model.py in a fresh process; return its RESULT JSON."""
    command, env = compile_model_command(args, env)
    return run_for_result(command, env, timeout, "compile_model.py")


# the shared_builds dir of this test run, for helpers that take no fixtures (the sweep
# tests' sweep_env): set by the session fixture below, before any test's own fixtures
_RUN_BUILDS_DIR = "_TESTS_RUN_INDUCTOR_BUILDS_DIR"


@pytest.fixture(scope="session", autouse=True)
def shared_builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Inductor cache dir for the compile_model.py processes and the sweeps of the
    whole test run, every xdist worker's (their base temp dirs' common parent): see
    ``isolated_env``. Also named by ``run_builds()``."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "shared_inductor_builds"
    path.mkdir(exist_ok=True)
    os.environ[_RUN_BUILDS_DIR] = str(path)
    return path


def run_builds() -> Path:
    """The ``shared_builds`` dir of this test run (set once the session has started)."""
    value = os.environ.get(_RUN_BUILDS_DIR)
    assert value, "run_builds() before the session fixture shared_builds ran"
    return Path(value)


@contextlib.contextmanager
def builds_only_cache() -> Iterator[None]:
    """In this process, what ``isolated_env(builds=...)`` is for a child: Inductor's
    cache dir is the run's ``shared_builds`` and every cache that could answer in place
    of lowering or benchmarking is off (the FX graph, AOTAutograd and autotune-timing
    caches), so a compile lowers and benchmarks as in a fresh cache and reuses only the
    C++ builds of identical kernel sources (in memory once this process loaded them).
    Where a test needs nothing more of ``torch._inductor.utils.fresh_cache``, this saves
    the cold C++ builds of every compile after the first."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with mock.patch.dict(os.environ, {"TORCHINDUCTOR_CACHE_DIR": str(run_builds())}), \
            inductor_config.patch(fx_graph_cache=False, autotune_local_cache=False), \
            functorch_config.patch(enable_autograd_cache=False):
        yield


@pytest.fixture
def fresh_env(tmp_path: Path):
    def make(name: str = "run", **extra: str) -> dict[str, str]:
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        return isolated_env(root, **extra)

    return make
