"""The Inductor internals the plugin relies on (``inductor/adapter/internals.py``) hold in the
installed torch. scripts/run_tests.sh runs tests/core under each torch release CI installs
(2.13 and 2.14), so this file is the per-release check: a release that moves, removes or
changes one of them fails here by name."""

from __future__ import annotations

import warnings

import pytest
import torch

import inductor_flydsl
from inductor_flydsl.inductor.adapter import internals, internals_check, patches


def test_every_internal_the_plugin_relies_on_holds_in_this_torch() -> None:
    found = internals_check.problems()
    assert not found, f"torch {torch.__version__}:\n" + "\n".join(found)


def test_every_name_resolves_to_the_object_torch_has() -> None:
    import torch._inductor.select_algorithm as select_algorithm

    assert internals.AlgorithmSelectorCache is select_algorithm.AlgorithmSelectorCache
    assert internals.config is torch._inductor.config
    for entry in internals.INTERNALS:
        assert getattr(internals, entry.name) is internals.resolve(entry)
    with pytest.raises(AttributeError):
        internals.NoSuchInternal  # noqa: B018


def test_a_changed_internal_is_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = (
        internals.Internal("gone", "torch._inductor.select_algorithm", "NoSuchSelector",
                           "the selector"),
        internals.Internal("moved", "torch._inductor.no_such_module", "X", "something"),
        internals.Internal("params", "torch._inductor.ir", "FixedLayout", "a layout",
                           params=("dtype", "device")),
        internals.Internal("member", "torch._inductor.select_algorithm",
                           "AlgorithmSelectorCache", "the selector",
                           members=("autotune(choices, name)", "no_such_method")),
    )
    monkeypatch.setattr(internals_check, "INTERNALS", changed)
    monkeypatch.setattr(internals_check, "CONFIG_KEYS", ("max_autotune", "no_such_key"))
    found = "\n".join(internals_check.problems())
    assert "select_algorithm.NoSuchSelector is gone" in found
    assert "torch._inductor.no_such_module.X is gone" in found
    assert "FixedLayout: parameters changed: expected ['dtype', 'device']" in found
    assert "AlgorithmSelectorCache.autotune: parameters changed" in found
    assert "AlgorithmSelectorCache.no_such_method is gone" in found
    assert "torch._inductor.config.no_such_key is gone" in found
    assert "max_autotune is gone" not in found


def test_enable_leaves_inductor_untouched_when_an_internal_changed(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The plugin stays off, with a warning naming the change; Inductor's selector class
    and choices class are as they were."""
    monkeypatch.setattr(inductor_flydsl, "_checked",
                        ["torch._inductor.select_algorithm.X is gone"])
    selector = internals.get_algorithm_selector_cache()
    before = (type(selector), internals.config.inductor_choices_class,
              list(selector.preprocessing_fns))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = inductor_flydsl.enable(tmp_path / "t.db")
    assert settings.mode is inductor_flydsl.Mode.OFF
    assert inductor_flydsl.active_settings() is None
    assert any("select_algorithm.X is gone" in str(w.message) for w in caught)
    assert (type(selector), internals.config.inductor_choices_class,
            list(selector.preprocessing_fns)) == before
    assert not (tmp_path / "t.db").exists()


def test_swapping_the_selector_keeps_a_user_subclass(monkeypatch: pytest.MonkeyPatch) -> None:
    base = internals.AlgorithmSelectorCache

    class UsersSelector(base):  # type: ignore[misc, valid-type]
        pass

    class Plugin(base):  # type: ignore[misc, valid-type]
        pass

    def swap(cache):  # as selector_hooks does it: a declared patch of the object's class
        return patches.swap_class("AlgorithmSelectorCache", cache,
                                  internals.selector_class_over(type(cache), Plugin))

    plain, users = base(), UsersSelector()
    assert swap(plain) is base
    assert type(plain) is Plugin
    assert swap(users) is UsersSelector
    assert isinstance(users, Plugin) and isinstance(users, UsersSelector)
    patches.restore_class("AlgorithmSelectorCache", users, UsersSelector)
    assert type(users) is UsersSelector


def test_a_changed_call_shape_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """problems() reads how the selector calls its methods and the plugin's hooks, not
    only names: a release that stops benchmarking through ``autotune`` or calls the
    feedback saver with another argument list is reported by name."""
    from collections.abc import Callable
    from typing import Any

    import torch._inductor.select_algorithm as select_algorithm

    monkeypatch.setattr(internals_check, "CALL_SHAPES", (
        ("do_autotuning", "self.no_such_benchmark(", "serving would stop"),
        ("do_autotuning", "self.autotune(", "unused: still holds")))
    monkeypatch.setattr(select_algorithm, "FeedbackFunction",
                        Callable[[Any, Any, Any, Any, Any, Any, Any], None])
    found = "\n".join(internals_check.problems())
    assert "do_autotuning no longer calls self.no_such_benchmark: serving would stop" in found
    assert "unused: still holds" not in found
    assert "FeedbackFunction changed" in found and "expected 6 arguments" in found


def test_the_scheduler_fusion_decision_is_read_from_its_source(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The replayed fusion decision (fusion_replay.py) relies on what speedup_by_fusion
    calls and on its rule; a release that changes either is reported by name, also while
    the plugin's wrapper is installed (its source is Inductor's, read through it)."""
    from inductor_flydsl.inductor.fusion import fusion_replay

    was_installed = fusion_replay.installed()
    fusion_replay.install()
    try:
        assert not [p for p in internals_check.problems() if "Scheduler" in p]
        monkeypatch.setattr(internals_check, "SCHEDULER_CALL_SHAPES", (
            ("speedup_by_fusion", "ms_fused < ms1 * 0.5", "the rule would differ"),
            ("_try_fusion_pairs", "self.speedup_by_fusion(", "unused: still holds")))
        found = "\n".join(internals_check.problems())
        assert ("Scheduler.speedup_by_fusion no longer holds ms_fused < ms1 * 0.5: "
                "the rule would differ") in found
        assert "unused: still holds" not in found
    finally:
        if not was_installed:
            fusion_replay.uninstall()


def test_feedback_saver_accepts_more_arguments_than_today() -> None:
    from inductor_flydsl.inductor import hooks

    # the plugin is off here: the call must simply not raise, whatever torch passes
    hooks.save_feedback({}, "mm", [], [], None, {}, "a seventh", extra="named")


def test_warm_compile_benchmarks_and_precompiles_nothing(tmp_path) -> None:
    """Inductor's own counters (not the plugin's): a cold compile benchmarks, the warm
    one (same DB, Inductor's caches off) benchmarks and precompiles nothing."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(),
                                torch.nn.Linear(96, 32)).eval()
    x = torch.randn(24, 64)
    runs = []
    try:
        inductor_flydsl.enable(tmp_path / "t.db", "readwrite")
        with torch.no_grad(), torch._inductor.config.patch(
                freezing=True, fx_graph_cache=False, autotune_local_cache=False,
                max_autotune_gemm_backends="ATEN,CPP"):
            for _ in range(2):
                torch._dynamo.reset()
                counters.clear()
                y = torch.compile(model, mode="max-autotune")(x)
                torch.testing.assert_close(y, model(x))
                runs.append({k: int(counters["inductor"].get(k, 0)) for k in
                             ("select_algorithm_autotune", "select_algorithm_precompile")})
    finally:
        inductor_flydsl.disable()
        torch._dynamo.reset()
    assert runs[0]["select_algorithm_autotune"] > 0, runs
    assert runs[1] == {"select_algorithm_autotune": 0, "select_algorithm_precompile": 0}
