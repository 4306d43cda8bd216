"""Every attribute of torch or of a client library the plugin replaces or wraps is declared
in ``internals.PATCHES``, applied through ``inductor/adapter/patches.py`` and put back: at
``disable()`` (the fusion-replay methods, the selector object's class) and at the sweep
warm-up's end (``warm_up.finish``: ``benchmark_cpu``, ``valid_vec_isa_list``); an
``InductorChoices`` a user's factory makes is layered through ``patches.swap_class``;
vLLM's ``VllmBackend.configure_post_pass`` is wrapped through ``patches.apply`` (checked
where vLLM is installed: ``.venv-vllm``; skipped elsewhere). Checked on the real torch
objects, around a real CPU ``torch.compile`` with the plugin on."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

import inductor_flydsl
from inductor_flydsl.inductor import hooks
from inductor_flydsl.inductor.adapter import internals, internals_check, patches, triton_stream

# every class, object and module of torch the plugin names (modules: the attributes they
# had before; importing submodules adds new ones, which is not a patch)
OWNERS = sorted({entry.name for entry in internals.INTERNALS})
# set by Inductor itself (its selector object, made at its first selection)
INDUCTORS_OWN_STATE = {("select_algorithm", "_ALGORITHM_SELECTOR_CACHE")}
# applied for the process's life where vLLM registered the plugin (not by enable())
LIFELONG = {f"{p.owner}.{p.attr}" for p in internals.PATCHES
            if p.by == internals.VLLM_PASSES}


def _applied() -> list[str]:
    """The patches in place now, but for the lifelong ones."""
    return [name for name in patches.applied() if name not in LIFELONG]


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
    assert internals_check._check_patches() == []
    owners = {entry.name for entry in (*internals.INTERNALS, *internals.CLIENT_OWNERS)}
    assert {p.owner for p in internals.PATCHES} <= owners
    assert {p.kind for p in internals.PATCHES} == {internals.ATTRIBUTE,
                                                  internals.INSTANCE_CLASS}
    assert all(p.attr == "__class__" for p in internals.PATCHES
               if p.kind == internals.INSTANCE_CLASS)


def test_a_client_librarys_patch_is_checked_only_where_it_is_installed() -> None:
    """vLLM's class is no torch internal: problems() (run by enable()) never imports it;
    client_problems() checks it where vLLM is installed and skips it elsewhere."""
    import importlib.util

    vllm = importlib.util.find_spec("vllm") is not None
    assert internals.client_installed("VllmBackend") is vllm
    assert ("VllmBackend", "configure_post_pass") in {
        (p.owner, p.attr) for p in internals.PATCHES}
    assert internals_check.client_problems() == []
    assert not any("vllm" in line.lower() for line in internals_check._check_patches())


def test_a_choices_instance_is_layered_only_through_the_declared_patch(
        tmp_path: Path) -> None:
    """A user's ``inductor_choices_class`` factory: each instance it makes while the
    plugin is on is layered under the plugin's class (``patches.swap_class``); after
    ``disable()`` the user's factory is back and its instances keep their class. A swap
    of an undeclared owner, of a non-instance or to a class not layered over the
    instance's own is refused."""
    from inductor_flydsl.inductor.autotune.choices import PluginChoices

    class UsersChoices(internals.InductorChoices):  # type: ignore[misc, valid-type]
        pass

    def users_factory() -> Any:
        return UsersChoices()

    config = internals.config
    previous = config.inductor_choices_class
    config.inductor_choices_class = users_factory
    try:
        inductor_flydsl.enable(tmp_path / "t.db", "readwrite")
        try:
            made = config.inductor_choices_class()
            assert isinstance(made, PluginChoices) and isinstance(made, UsersChoices)
            assert "inductor_flydsl-" in made.uuid()
        finally:
            inductor_flydsl.disable()
        assert config.inductor_choices_class is users_factory
        assert type(config.inductor_choices_class()) is UsersChoices
    finally:
        config.inductor_choices_class = previous
    plain = UsersChoices()
    with pytest.raises(ValueError, match="not a declared patch"):
        patches.swap_class("Scheduler", plain, UsersChoices)
    with pytest.raises(ValueError, match="kind"):
        patches.apply("InductorChoices", "__class__", UsersChoices)
    with pytest.raises(TypeError, match="not a InductorChoices"):
        patches.swap_class("InductorChoices", object(), UsersChoices)

    class Unrelated(internals.InductorChoices):  # type: ignore[misc, valid-type]
        pass

    with pytest.raises(TypeError, match="not layered over"):
        patches.swap_class("InductorChoices", plain, Unrelated)
    assert type(plain) is UsersChoices


def test_vllms_backend_is_wrapped_through_the_declared_patch() -> None:
    """Where vLLM is installed: ``register()`` (vLLM's entry point) wraps
    ``VllmBackend.configure_post_pass`` through ``patches.apply``, once; ``restore`` puts
    vLLM's method back, and registering again wraps it again."""
    backends = pytest.importorskip("vllm.compilation.backends")
    from inductor_flydsl.inductor.vllm import vllm_passes

    vllm_passes.register()
    assert patches.is_applied("VllmBackend", "configure_post_pass")
    wrapped = vars(backends.VllmBackend)["configure_post_pass"]
    vllm_passes.register()
    assert vars(backends.VllmBackend)["configure_post_pass"] is wrapped
    own = patches.original("VllmBackend", "configure_post_pass")
    assert wrapped.__wrapped__ is own
    assert patches.restore("VllmBackend", "configure_post_pass")
    try:
        assert vars(backends.VllmBackend)["configure_post_pass"] is own
        assert "VllmBackend.configure_post_pass" not in patches.applied()
    finally:
        vllm_passes.register()  # as vLLM left it: wrapped for the process's life
    assert patches.is_applied("VllmBackend", "configure_post_pass")
    assert internals_check.client_problems() == []


def test_a_patch_whose_attribute_is_gone_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(internals_check, "PATCHES", (internals.Patch(
        "Scheduler", "no_such_method", "somewhere", "a replacement", "never"),))
    assert internals_check._check_patches() == [
        "torch._inductor.scheduler.Scheduler.no_such_method is gone; patched for: "
        "a replacement"]
    assert any("no_such_method is gone" in p for p in internals_check.problems())


def test_an_undeclared_patch_is_refused() -> None:
    with pytest.raises(ValueError, match="not a declared patch"):
        patches.apply("Scheduler", "codegen", lambda *a: None)
    assert "codegen" in vars(internals.Scheduler)  # untouched


def test_disable_puts_back_every_method_enable_replaced(tmp_path: Path) -> None:
    assert _applied() == []
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
        assert sorted(_applied()) == sorted(  # attributes (classes: below)
            f"{p.owner}.{p.attr}" for p in internals.PATCHES
            if p.by in by and p.kind == internals.ATTRIBUTE)
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
        assert ("select_algorithm.get_algorithm_selector_cache" in _applied()) is (
            selector is None)
        assert selector is None or isinstance(selector, hooks.PluginSelector)
    finally:
        inductor_flydsl.disable()
        torch._dynamo.reset()
    assert _applied() == []
    # the selector object's class (a declared patch) is Inductor's again
    assert not isinstance(internals.selector_object(), hooks.PluginSelector)
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
    assert _applied() == [] and _changed(before) == []
    assert warm_up.finish() == []  # nothing left to put back
