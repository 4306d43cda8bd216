"""Every torch attribute the plugin replaces is declared in ``internals.PATCHES``,
applied through ``inductor/patches.py`` and put back: at ``disable()`` (the fusion-replay
methods) and at the sweep warm-up's end (``warm_up.finish``: ``benchmark_cpu``,
``valid_vec_isa_list``). Checked on the real torch objects, around a real CPU
``torch.compile`` with the plugin on."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

import inductor_flydsl
from inductor_flydsl.inductor import hooks, internals, patches, triton_stream

# every class, object and module of torch the plugin names (modules: the attributes they
# had before; importing submodules adds new ones, which is not a patch)
OWNERS = sorted({entry.name for entry in internals.INTERNALS})
# set by Inductor itself (its selector object, made at its first selection)
INDUCTORS_OWN_STATE = {("select_algorithm", "_ALGORITHM_SELECTOR_CACHE")}


def _snapshot() -> dict[str, dict[str, Any]]:
    out = {}
    for name in OWNERS:
        obj = getattr(internals, name)
        out[name] = dict(getattr(obj, "__dict__", {}))
    return out


def _changed(before: dict[str, dict[str, Any]]) -> list[str]:
    changed = []
    for name, attrs in before.items():
        now = getattr(getattr(internals, name), "__dict__", {})
        changed += [f"{name}.{attr}" for attr, value in attrs.items()
                    if (attr not in now or now[attr] is not value)
                    and (name, attr) not in INDUCTORS_OWN_STATE]
        if not isinstance(getattr(internals, name), types.ModuleType):
            # a function set on a class or an object (torch's own state may appear
            # lazily, like a compile's counters: not a replacement)
            changed += [f"{name}.{attr} (added)" for attr, value in now.items()
                        if attr not in attrs and callable(value)]
    return changed


def test_every_declared_patch_names_a_torch_attribute_that_exists() -> None:
    assert internals._check_patches() == []
    owners = {entry.name for entry in internals.INTERNALS}
    assert {p.owner for p in internals.PATCHES} <= owners


def test_a_patch_whose_attribute_is_gone_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(internals, "PATCHES", (internals.Patch(
        "Scheduler", "no_such_method", "somewhere", "a replacement", "never"),))
    assert internals._check_patches() == [
        "torch._inductor.scheduler.Scheduler.no_such_method is gone; patched for: "
        "a replacement"]
    assert any("no_such_method is gone" in p for p in internals.problems())


def test_an_undeclared_patch_is_refused() -> None:
    with pytest.raises(ValueError, match="not a declared patch"):
        patches.apply("Scheduler", "codegen", lambda *a: None)
    assert "codegen" in vars(internals.Scheduler)  # untouched


def test_disable_puts_back_every_method_enable_replaced(tmp_path: Path) -> None:
    assert patches.applied() == []
    own = {name: vars(internals.Scheduler)[name] for name in
           ("speedup_by_fusion", "benchmark_fused_nodes", "benchmark_codegened_module")}
    swap = vars(internals.MultiTemplateBuffer)["swap_as_triton_caller"]
    before = _snapshot()
    made = internals.selector_object() is not None  # by an earlier test's compile
    inductor_flydsl.enable(tmp_path / "t.db", "readwrite")
    try:
        # the Triton stream backport only under a torch that needs it (2.13, not 2.14.1);
        # the selector's maker wrapped until Inductor makes it (then put back)
        by = {internals.FUSION_REPLAY} | (
            {internals.TRITON_STREAM} if triton_stream.binds_stream_early() else set()) | (
            set() if made else {internals.SELECTOR_HOOKS})
        assert sorted(patches.applied()) == sorted(
            f"{p.owner}.{p.attr}" for p in internals.PATCHES if p.by in by)
        assert vars(internals.Scheduler)["speedup_by_fusion"] is not own["speedup_by_fusion"]
        assert patches.original("Scheduler", "speedup_by_fusion") is own["speedup_by_fusion"]

        def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.relu(a @ b)

        torch._dynamo.reset()
        compiled = torch.compile(f, mode="max-autotune-no-cudagraphs")
        a, b = torch.randn(16, 32), torch.randn(32, 8)
        torch.testing.assert_close(compiled(a, b), f(a, b))
        # wrapped exactly as long as Inductor has not made its selector object; once
        # made, it is the plugin's
        selector = internals.selector_object()
        assert ("select_algorithm.get_algorithm_selector_cache" in patches.applied()) is (
            selector is None)
        assert selector is None or isinstance(selector, hooks.PluginSelector)
    finally:
        inductor_flydsl.disable()
        torch._dynamo.reset()
    assert patches.applied() == []
    for name, method in own.items():
        assert vars(internals.Scheduler)[name] is method
    assert vars(internals.MultiTemplateBuffer)["swap_as_triton_caller"] is swap
    assert _changed(before) == []


@pytest.mark.skipif(sys.platform != "linux", reason="the warm-up's CPU set-up is Linux's")
def test_the_warm_ups_end_puts_back_what_it_replaced() -> None:
    """The persistent sweep worker's warm-up wraps Inductor's CPU benchmarker and its
    vector-ISA list (nothing started in the background here); ``finish`` undoes both."""
    import platform

    from inductor_flydsl.sweep import warm_up

    benchmarker, cpu_vec_isa = internals.benchmarker, internals.cpu_vec_isa
    isa_list = cpu_vec_isa.valid_vec_isa_list
    assert "benchmark_cpu" not in vars(benchmarker)  # the class's method
    before = _snapshot()
    assert warm_up._gate_cpu_benchmarks()
    warm_up._first_valid_isa_only()
    try:
        assert "benchmark_cpu" in vars(benchmarker)
        x86 = platform.machine() == "x86_64"
        assert (cpu_vec_isa.valid_vec_isa_list is not isa_list) == x86
        assert patches.is_applied("cpu_vec_isa", "valid_vec_isa_list") == x86
        assert benchmarker.benchmark_cpu(lambda: None, warmup=0, rep=1) >= 0  # still times
        assert _changed(before) == ["benchmarker.benchmark_cpu (added)"] + (
            ["cpu_vec_isa.valid_vec_isa_list"] if x86 else [])
    finally:
        restored = warm_up.finish()
    assert "benchmarker.benchmark_cpu" in restored
    assert "benchmark_cpu" not in vars(benchmarker)
    assert cpu_vec_isa.valid_vec_isa_list is isa_list
    assert patches.applied() == [] and _changed(before) == []
    assert warm_up.finish() == []  # nothing left to put back
