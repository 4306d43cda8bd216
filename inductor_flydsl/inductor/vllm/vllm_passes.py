"""The plugin's post-grad pass inside vLLM's compile (``VllmBackend``).

What vLLM does (read in vLLM 0.32.0, ``vllm/compilation/backends.py``): each
``VllmBackend`` deep-copies ``CompilationConfig.inductor_compile_config`` into its own
``inductor_config`` and, in ``configure_post_pass`` (at its first compile), sets that
dict's ``post_grad_custom_post_pass`` to its ``PostGradPassManager``; every piece is then
compiled by Inductor with that dict as per-compile config patches
(``compiler_interface.py``). The global ``config.post_grad_custom_post_pass``, where
``inductor_flydsl.enable()`` chains the epilogue-fusion pass, is replaced for the whole
compile: without this module the pass never runs under vLLM. The plugin's other hooks are
global Inductor state vLLM leaves alone (``inductor_choices_class``, the selector class,
its preprocessing and feedback functions, ``_post_fusion_custom_pass``), so DB recording
and serving work there as in a plain compile.

How the pass joins: vLLM's ``vllm.general_plugins`` entry point (``pyproject.toml``) calls
:func:`register` in every vLLM process; it wraps ``VllmBackend.configure_post_pass`` (a
declared patch of a client library: ``internals.PATCHES``, applied by ``patches.py``) so
that, after vLLM has configured its pass manager, :func:`join` makes the per-compile
``post_grad_custom_post_pass`` the list ``[vLLM's PostGradPassManager, the plugin's
pass]``, which Inductor runs in that order (a list is one of the forms it accepts) and
keys its FX-graph cache by both passes' ``uuid()``. The order is that of a plain compile:
the plugin's pass sees the graph after every other post-grad pass, here after vLLM's
whole pipeline (its fusions, a user's ``inductor_passes``, its clean-up, IR lowering and
``fix_functionalization``). vLLM's own route for custom passes (``inductor_passes``,
``PostGradPassManager.add``) would run the pass before vLLM's dead-code elimination and
``fix_functionalization``: the first drops the pass's ``keep_for_selection`` marker (a
pure op without users) and the second removes nodes the fused-epilogue selection names, so
FlyDSL's fused epilogues would silently never be offered.

The pass joins only a compile that starts while the plugin is on (``INDUCTOR_FLYDSL=1`` or
``enable()`` before vLLM compiles); with the plugin off vLLM's config is left exactly as
vLLM made it. Without vLLM installed nothing here runs (vLLM alone calls
:func:`register`). A failure here never fails vLLM: one warning, and vLLM compiles as
without the plugin.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from ...telemetry.user_warnings import warn_once
from ..adapter import patches, plugin_state, user_passes
from ..fusion.epilogue_pass import EpilogueFusionPass

log = logging.getLogger("inductor_flydsl")

PASS_KEY = "post_grad_custom_post_pass"  # vLLM's platform pass_key on CUDA, ROCm and CPU
_WRAPPED = "_inductor_flydsl_wrapped"
OWNER = "VllmBackend"  # internals.CLIENT_OWNERS


def plugin_pass(captures_graphs: bool = False) -> EpilogueFusionPass:
    """The plugin's post-grad pass as it runs under vLLM: the epilogue fusion alone (a
    user's global ``post_grad_custom_post_pass`` does not run under vLLM with or without
    the plugin; vLLM runs a user's passes from ``CompilationConfig.inductor_passes``).
    ``captures_graphs``: vLLM runs the compiled pieces inside CUDA/HIP graphs of its own
    (with Inductor's cudagraphs off), so the compile's selections are timed as graphs."""
    return EpilogueFusionPass(None, client_captures_graphs=captures_graphs)


def vllm_captures_graphs(backend: Any) -> bool:
    """Whether vLLM captures the graphs it compiles: its ``cudagraph_mode`` is not
    ``NONE`` (``PIECEWISE``, ``FULL`` and their pairs; vLLM 0.32's ``CUDAGraphMode``).
    On a CPU no selection is graph-timed whatever this says."""
    mode = getattr(getattr(backend, "compilation_config", None), "cudagraph_mode", None)
    return mode is not None and getattr(mode, "name", "NONE") != "NONE"


def join(inductor_config: dict[str, Any], pass_key: str = PASS_KEY, *,
         captures_graphs: bool = False) -> bool:
    """Append the plugin's pass to a per-compile Inductor config's post-grad custom pass,
    after what vLLM put there; True if it joined. Nothing changes when the plugin is off
    or the pass is already there. ``captures_graphs``: see :func:`plugin_pass` (the per-
    compile config carries it through the compile, lowering included)."""
    if plugin_state.current() is None:
        return False
    current = inductor_config.get(pass_key)
    passes = list(user_passes.graph_passes(current))
    if any(isinstance(p, EpilogueFusionPass) for p in passes):
        return False
    inductor_config[pass_key] = [*passes, plugin_pass(captures_graphs)]
    return True


def _joining(configure_post_pass: Any) -> Any:
    @functools.wraps(configure_post_pass)
    def configure_post_pass_and_join(backend: Any) -> None:
        configure_post_pass(backend)
        try:
            if join(backend.inductor_config, getattr(backend, "pass_key", PASS_KEY),
                    captures_graphs=vllm_captures_graphs(backend)):
                log.debug("inductor_flydsl: epilogue-fusion pass joined vLLM's compile")
        except Exception as exc:  # never fail vLLM's compile
            plugin_state.report_error("joining vLLM's post-grad passes", exc)

    setattr(configure_post_pass_and_join, _WRAPPED, True)
    return configure_post_pass_and_join


def register() -> None:
    """The ``vllm.general_plugins`` entry point: vLLM calls it in every process it starts
    (possibly several times). Makes every ``VllmBackend`` compile run the plugin's pass
    after vLLM's (:func:`join`)."""
    try:
        from vllm.compilation.backends import VllmBackend
    except Exception as exc:  # a vLLM without this class: the pass cannot join
        warn_once("vllm:register", "inductor_flydsl: its post-grad pass cannot join vLLM's "
                  f"compile (vllm.compilation.backends.VllmBackend: {type(exc).__name__}: "
                  f"{exc}); FlyDSL fused epilogues are off under vLLM, the tuning DB works")
        return
    method = getattr(VllmBackend, "configure_post_pass", None)
    if method is None:
        warn_once("vllm:register", "inductor_flydsl: this vLLM's VllmBackend has no "
                  "configure_post_pass; FlyDSL fused epilogues are off under vLLM, the "
                  "tuning DB works")
        return
    if getattr(method, _WRAPPED, False):
        return
    # a declared patch of a client library (internals.PATCHES, CLIENT_OWNERS), for the
    # process's life; None: vLLM's class inherits the method (nothing is patched then)
    if patches.apply(OWNER, "configure_post_pass", _joining(method)) is None:
        warn_once("vllm:register", "inductor_flydsl: this vLLM's VllmBackend does not "
                  "define configure_post_pass itself; FlyDSL fused epilogues are off under "
                  "vLLM, the tuning DB works")
