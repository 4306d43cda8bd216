"""The hooks the plugin puts into TorchInductor's autotuning.

The rule they keep: with the plugin on, the final code uses the kernels plain Inductor
would pick; recorded timings only replace benchmarking (``serving.py``).

``AlgorithmSelectorCache`` (behind every ``autotune_select_algorithm``) is the one place
that sees the op name, the input nodes, the output layout and the final choice list
together, and the one that benchmarks. The plugin extends that class and swaps the class
of Inductor's selector object (its state, feedback savers and preprocessing functions
stay as they are), once Inductor made it (``selector_hooks.py``). The subclass
remembers the call's context, hands Inductor recorded timings in place of benchmarking
(``autotune``) and builds nothing for a served candidate (``make_precompile_fn``);
everything else is Inductor's public registration functions:

- a preprocessing function (runs after Inductor's own filters): adds plugin choices
  (FlyDSL, when its backend token is on and the problem is eligible), then looks the
  problem up in the tuning DB; when an exact record holds (every result still holds for
  this software, ``validity.py``), every candidate it has a result for is served its
  recorded time. The choice list is not narrowed: Inductor decides among all of them as
  it would after benchmarking. Opt-in approximations narrow it instead (a prior's short
  list after an upgrade, ``INDUCTOR_FLYDSL_PRIORS=1``; a dynamic-M bucket's winner,
  ``INDUCTOR_FLYDSL_BUCKETS=1``);
- a feedback saver: after Inductor benchmarked, records every candidate it measured, with
  the time Inductor selected with and the time the benchmark returned; the winner is the
  choice Inductor then made (``PluginSelector.__call__`` sees it), or, when Inductor
  deferred the choice to epilogue-fusion benchmarking, the GEMM-only winner, with what the
  scheduler finally ran recorded by ``fusion_observer.py``;
- on a GPU, the scheduler's deferred epilogue-fusion decision (``speedup_by_fusion``):
  benchmarked by Inductor and recorded once, then replayed from the recorded timings
  (``fusion_replay.py``).

The parts, one job each: ``selector`` (the selector subclass), ``lookup`` (the
preprocessing function: plugin candidates, the DB lookup), ``recording`` (the feedback
saver and Inductor's choice), ``selection`` (a selection's context and DB key),
``plugin_state`` (the active plugin, error reporting); this module installs them.

Every hook swallows its own errors (counted in ``stats()['errors']``, logged once): the
plugin never makes a compile fail that plain Inductor would have completed.
"""

from __future__ import annotations

from typing import Any

from .adapter import internals, plugin_state, triton_stream
from .adapter.plugin_state import PluginState, report_error
from .autotune import compile_end, compile_summary, selector_hooks
from .autotune.lookup import preprocess_choices
from .autotune.recording import record_epilogue, save_feedback
from .autotune.selector import PluginSelector
from .fusion import epilogue_fusion, fusion_observer, fusion_replay

__all__ = ["PluginSelector", "PluginState", "install", "preprocess_choices", "save_feedback",
           "uninstall"]


def _fusion_gate(gemm: Any) -> bool:
    """Whether a GEMM node may become a fused-epilogue selection: the plugin is on, some
    provider fuses epilogues for its device (FlyDSL: the FLYDSL token, a verified runtime)
    and Inductor is autotuning GEMMs."""
    config = internals.config
    state = plugin_state.current()
    if state is None or not (config.max_autotune or config.max_autotune_gemm):
        return False
    val = gemm.meta.get("val")
    device = getattr(val, "device", None)
    return device is not None and any(
        provider.fuses_epilogues(device) for provider in state.providers)


# ---- installation ------------------------------------------------------------------------
def install(state: PluginState) -> None:
    """Activate ``state``: the selector's class swapped, the preprocessing function and
    the feedback saver registered (once per process: they stay, doing nothing while the
    plugin is off), on Inductor's selector object now or, where Inductor has not made it
    yet, when it does (``selector_hooks.py``: making it asks the GPU), the post-fusion
    observer, the fusion-replay patches and, under a torch that binds a Triton call's
    stream early, its backport (``internals.PATCHES``) and the epilogue-fusion pass
    installed; :func:`uninstall` takes out all but the two registered functions."""
    selector_hooks.attach()
    fusion_observer.set_sink(record_epilogue, report_error)
    fusion_observer.install_observer()
    fusion_replay.install()
    triton_stream.install()
    epilogue_fusion.install_pass(_fusion_gate, report_error,
                                 lambda n: state.stats.bump("epilogue_fusions", n))
    compile_summary.install()
    plugin_state.activate(state)


def uninstall() -> PluginState | None:
    """Deactivate: the hooks stay registered but do nothing; Inductor's class is restored."""
    previous = plugin_state.activate(None)
    compile_summary.uninstall()
    compile_end.uninstall()  # the backends' compile-end work too, while the plugin is off
    fusion_observer.set_sink(None)
    fusion_observer.uninstall_observer()
    fusion_replay.uninstall()
    triton_stream.uninstall()
    epilogue_fusion.uninstall_pass()
    selector_hooks.detach()
    return previous
