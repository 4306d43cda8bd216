"""The adapter: every name of TorchInductor (and TorchDynamo) the plugin touches.

No other module of the package imports ``torch._inductor`` or ``torch._dynamo``
(``tests/test_import_layers.py`` checks it); they write ``internals.<name>``. Each entry
below says where the name lives, what the plugin uses it for, and which of its parameters
and members the plugin relies on. ``internals_check.problems`` checks all of that against
the torch installed; ``tests/core/test_inductor_internals.py`` runs it under every torch release CI
installs (2.13 and 2.14), so a release that moves or changes one of them fails there,
loudly and by name, instead of in some compile. :func:`inductor_flydsl.enable` runs the
same check and leaves Inductor untouched (a warning, the plugin off) when it fails.

Which of these are extension points and which are internals (torch 2.13 and 2.14):

- extension points Inductor offers for this: ``config.inductor_choices_class`` and
  ``V.set_choices_handler`` (the plugin's ``InductorChoices``: its ``uuid()`` enters the
  FX-graph-cache key), ``add_preprocessing_fn`` / ``add_feedback_saver`` (choices in,
  timings out), ``config.post_grad_custom_post_pass`` (a ``CustomGraphPass``),
  ``config._post_fusion_custom_pass`` (a ``CustomSchedulerPass``), ``user_lowerings`` (the
  hook ``register_custom_op_autotuning`` uses), ``ExternKernelChoice`` /
  ``ExternKernelCaller`` (extern choices), ``SubgraphTemplate``;
- internals, for want of an extension point: the selector's class
  (``AlgorithmSelectorCache``): no hook hands Inductor timings in place of benchmarking, or
  tells a saver which choice Inductor then made, so the plugin extends the class and swaps
  it on Inductor's selector object (``selector_class_over``, a declared patch of the
  object's class). The lookup-table choices
  class (``torch/_inductor/lookup_table``) is the documented place for a database source,
  but it narrows the choices to the table's configs instead of serving timings, which is
  what made the served kernel differ from Inductor's own pick (issue 26), so it is not
  used;
- internals replaced for a while, for want of an extension point: four methods of the
  scheduler's deferred epilogue-fusion decision (``fusion_replay.py``, while the plugin is
  on), two functions of the sweep worker's CPU set-up (``sweep/warm_up.py``, until its
  end) and the function that makes Inductor's selector object (``selector_hooks.py``,
  until Inductor first calls it: the plugin never makes the object, which asks the
  GPU). Two objects' classes are swapped for a class layered over theirs: Inductor's
  selector object (above) and an ``InductorChoices`` a user's factory makes
  (``choices.py``). One attribute of a client library is wrapped: vLLM's
  ``VllmBackend.configure_post_pass`` (``vllm_passes.py``; :data:`CLIENT_OWNERS`). Each is
  declared in :data:`PATCHES` and installed and put back only through the sibling
  ``patches.py``; ``internals_check.problems`` checks the declared attributes of torch too,
  ``internals_check.client_problems`` those of a client library where it is installed.

One IR class is subclassed: ``ExternKernelOut``, so a FlyDSL call's code generation also
imports the plugin's op namespace into the generated module (``flydsl_backend/direct.py``;
``CODEGEN_SHAPES``); nothing is set on ``torch``.

The rest are read, never changed: IR classes, size hints, counters, the benchmarker and
the CPU vector-ISA module (apart from the patches above), the code caches.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Internal:
    """One name the plugin takes from torch: ``internals.<name>`` is ``<module>.<attr>``."""

    name: str
    module: str
    attr: str
    use: str  # what the plugin does with it
    params: tuple[str, ...] = ()  # parameters the plugin passes or overrides, in order
    # attributes or methods of it the plugin uses; "method(a, b; c)": and its parameters,
    # a and b first and in order (passed by position), c anywhere (passed by keyword)
    members: tuple[str, ...] = ()


_SA = "torch._inductor.select_algorithm"
INTERNALS: tuple[Internal, ...] = (
    # -- the selector: extended and swapped (no extension point serves timings)
    Internal("AlgorithmSelectorCache", _SA, "AlgorithmSelectorCache",
             "subclassed: serve recorded timings, see Inductor's choice (selector.PluginSelector)",
             members=("__call__(name, choices, input_nodes, layout, input_gen_fns)",
                      "autotune(name, input_nodes, layout, input_gen_fns, choices)",
                      "make_precompile_fn(choices)",
                      "do_autotuning(name, input_nodes, layout, input_gen_fns, inputs_key,"
                      " choices, precompile_fn; hint_override)",
                      "benchmark_in_current_process(choices, input_nodes, layout, "
                      "input_gen_fns)",
                      # Inductor's local autotune cache (PersistentCache): keyed by the
                      # timing mode too (timing_parity.cache_inputs_key)
                      "lookup(choices, op, inputs, benchmark)")),
    Internal("get_algorithm_selector_cache", _SA, "get_algorithm_selector_cache",
             "the process's selector object, whose class is swapped"),
    Internal("select_algorithm", "torch._inductor", "select_algorithm",
             "its _ALGORITHM_SELECTOR_CACHE: Inductor's selector object, or None before "
             "Inductor made it (selector_object); its get_algorithm_selector_cache wrapped "
             "until then (selector_hooks.py)",
             members=("_ALGORITHM_SELECTOR_CACHE", "get_algorithm_selector_cache")),
    Internal("add_preprocessing_fn", _SA, "add_preprocessing_fn",
             "adds plugin choices and looks the problem up", params=("fn",)),
    Internal("add_feedback_saver", _SA, "add_feedback_saver",
             "records the timings Inductor selected with", params=("fn",)),
    Internal("autotune_select_algorithm", _SA, "autotune_select_algorithm",
             "the fused-epilogue selection (epilogue_fusion.lower_gemm_epilogue) and vLLM's "
             "MXFP8 GEMM's (vllm_choices.lower_mxfp8_block32); "
             "it forwards its arguments to AlgorithmSelectorCache.__call__"),
    Internal("realize_inputs", _SA, "realize_inputs",
             "the inputs of vLLM's MXFP8 GEMM selection as buffers (vllm_choices.py)"),
    # -- choices: extern kernels (FlyDSL candidates), what a choice is
    Internal("ExternKernelChoice", _SA, "ExternKernelChoice",
             "subclassed: one per FlyDSL op (flydsl_backend/autotune/choices.py); vLLM's op as a "
             "choice, lowered by its kernel_creator (vllm_choices.py)",
             params=("kernel", "cpp_kernel", "name", "has_out_variant"),
             members=("lookup", "call_name", "__init__(; kernel_creator)")),
    Internal("ExternKernelCaller", _SA, "ExternKernelCaller",
             "subclassed: a FlyDSL candidate; also how ATen choices are recognised",
             params=("choice", "input_nodes", "layout", "kwargs"),
             members=("benchmark", "hash_key", "info_dict", "to_callable", "output_node")),
    Internal("ExternKernelOut", "torch._inductor.ir", "ExternKernelOut",
             "subclassed: a FlyDSL call's IR node, whose code generation also imports the "
             "plugin's op namespace into the generated module (choices.DirectKernelOut; "
             "see CODEGEN_SHAPES)",
             members=("__init__(; layout, inputs, kwargs, python_kernel_name)",
                      "codegen(wrapper)")),
    Internal("ChoiceCaller", "torch._inductor.ir", "ChoiceCaller",
             "every choice: its _benchmark_with_cudagraphs flag is set to time it by graph "
             "replay when the compile will capture graphs (timing_parity.py; see "
             "TIMING_SHAPES)", members=("benchmark",)),
    Internal("TritonTemplateCaller", _SA, "TritonTemplateCaller",
             "recognises Triton choices (candidates.backend_of)"),
    Internal("TritonBenchmarkRequest", "torch._inductor.autotune_process",
             "TritonBenchmarkRequest",
             "make_run_fn wrapped where torch binds the stream before a graph capture opens "
             "(torch 2.13): the call reads its stream when it runs (triton_stream.py)",
             members=("make_run_fn",)),
    Internal("get_interface_for_device", "torch._dynamo.device_interface",
             "get_interface_for_device",
             "the raw stream a backported Triton call reads when it runs (triton_stream.py)",
             params=("device",)),
    Internal("InductorChoices", "torch._inductor.choices", "InductorChoices",
             "subclassed: the plugin's uuid() in the FX-graph-cache key"),
    Internal("V", "torch._inductor.virtualized", "V",
             "the graph being lowered (size hints, epilogue notes; its current_node: the FX "
             "node a selection lowers, vllm_choices.marked_op), set_choices_handler; "
             "aot_compilation: FlyDSL is not offered to an AOT compile",
             members=("set_choices_handler", "graph", "aot_compilation",
                      "set_aot_compilation")),
    # -- IR and scheduler
    Internal("MultiTemplateBuffer", "torch._inductor.ir", "MultiTemplateBuffer",
             "a selection deferred to epilogue-fusion benchmarking (fusion_outcome.py); "
             "finalized to a recorded fused template (fusion_replay.py)",
             members=("choices", "choice_timings", "finalize_as_triton_caller(caller)",
                      "swap_as_triton_caller(caller)")),
    Internal("Scheduler", "torch._inductor.scheduler", "Scheduler",
             "speedup_by_fusion wrapped: a deferred GEMM's epilogue-fusion decision "
             "replayed from recorded timings, or Inductor's benchmark of it captured "
             "(fusion_replay.py)",
             members=("speedup_by_fusion(node1, node2)", "benchmark_fused_nodes(nodes)",
                      "benchmark_codegened_module(module, device)", "_any_atomic_add",
                      "_has_layout_conflict_for_template")),
    Internal("FusionResult", "torch._inductor.scheduler", "FusionResult",
             "what speedup_by_fusion returns (a decision, or a benchmark to run later)",
             members=("fuse(should_fuse)", "from_callable(callable_fn, future)")),
    Internal("FixedLayout", "torch._inductor.ir", "FixedLayout",
             "the GEMM's own layout inside a fused-epilogue selection",
             params=("device", "dtype", "size")),
    Internal("FallbackKernel", "torch._inductor.ir", "FallbackKernel",
             "vLLM's op, as generated code calls it when it wins its selection "
             "(vllm_choices.py)", members=("create",)),
    Internal("TensorBox", "torch._inductor.ir", "TensorBox",
             "the IR value Inductor's view lowerings take (vllm_choices.py)",
             members=("create",)),
    Internal("BaseView", "torch._inductor.ir", "BaseView",
             "a view of a buffer, boxed as a TensorBox as it is (vllm_choices.py)"),
    Internal("is_unaligned", "torch._inductor.ir", "is_unaligned",
             "an input's offset, for FlyDSL's alignment check", params=("node",)),
    Internal("CustomGraphPass", "torch._inductor.custom_graph_pass", "CustomGraphPass",
             "subclassed: the post-grad pass making fused-epilogue regions",
             members=("__call__", "uuid")),
    Internal("get_custom_graph_passes", "torch._inductor.custom_graph_pass",
             "get_custom_graph_passes",
             "the passes a post_grad_custom_post_pass value holds, in Inductor's order "
             "(user_passes.py)", params=("custom_pass",)),
    Internal("CustomInferenceAwareGraphPass", "torch._inductor.custom_graph_pass",
             "CustomInferenceAwareGraphPass",
             "a user's post-grad pass that takes is_inference (user_passes.py)",
             members=("__call__(graph, is_inference)", "uuid")),
    Internal("CustomSchedulerPass", "torch._inductor.custom_graph_pass",
             "CustomSchedulerPass",
             "subclassed: observes what the scheduler fused (fusion_observer.py)",
             members=("__call__",)),
    Internal("lowerings", "torch._inductor.lowering", "lowerings",
             "Inductor's clone lowering: realized copies a fused-epilogue selection is "
             "benchmarked on (epilogue_fusion.py); permute and select: the views vLLM's "
             "op is called on (vllm_choices.py)"),
    Internal("is_storage_and_layout", "torch._inductor.ir", "is_storage_and_layout",
             "whether a value is a buffer already (epilogue_fusion.py)", params=("x",)),
    Internal("user_lowerings", "torch._inductor.lowering", "user_lowerings",
             "the lowering of inductor_flydsl::gemm_epilogue"),
    Internal("SubgraphTemplate", "torch._inductor.codegen.subgraph", "SubgraphTemplate",
             "Inductor's own handling of a GEMM + epilogue region, as a choice",
             params=("name",),
             members=("generate_custom_op_choices(; name, decompositions, input_nodes, "
                      "non_tensor_args, config_patches_list)",)),
    Internal("config", "torch._inductor", "config", "Inductor's configuration"),
    Internal("counters", "torch._dynamo.utils", "counters",
             "Inductor's counters (the sweep's autotune_runs)"),
    Internal("compile_callbacks", "torch._dynamo.callback", "callback_handler",
             "where each compile ends: INDUCTOR_FLYDSL_LOG=summary's line per "
             "compile (compile_summary.py); the loaded graphs' FlyDSL builds started at "
             "its end (compile_end.py)",
             members=("register_end_callback(callback)", "remove_end_callback(callback)",
                      "end_callbacks")),
    Internal("PyCodeCache", "torch._inductor.codecache", "PyCodeCache",
             "the modules of compiled or loaded graphs, read (never changed) for the FlyDSL "
             "variants they launch (flydsl_backend/run/loaded_variants.py)",
             members=("modules",)),
    Internal("mark_dynamic", "torch._dynamo", "mark_dynamic",
             "a sweep item's dynamic M", params=("t", "index")),
    Internal("dynamo_reset", "torch._dynamo", "reset",
             "a sweep worker's fresh compile state"),
    # -- the sweep worker's set-up
    Internal("compile_fx", "torch._inductor", "compile_fx",
             "imported ahead by a sweep worker (warm-up)"),
    Internal("benchmarker", "torch._inductor.runtime.benchmarking", "benchmarker",
             "Inductor's benchmarker (the sweep worker's warm-up wraps benchmark_cpu until "
             "its end: PATCHES)",
             members=("benchmark_cpu",)),
    Internal("cpu_vec_isa", "torch._inductor", "cpu_vec_isa",
             "the CPU vector ISA a sweep worker compiles for (its warm-up replaces "
             "valid_vec_isa_list until its end: PATCHES)",
             members=("valid_vec_isa_list", "x86_isa_checker", "supported_vec_isa_list",
                      "pick_vec_isa")),
    Internal("is_mkldnn_bf16_supported", "torch._inductor.utils", "is_mkldnn_bf16_supported",
             "whether freezing packs a CPU bf16 linear for oneDNN (sweep items' DB names)",
             params=("device_type",)),
    Internal("is_mkldnn_fp16_supported", "torch._inductor.utils", "is_mkldnn_fp16_supported",
             "whether freezing packs a CPU fp16 linear for oneDNN (sweep items' DB names)",
             params=("device_type",)),
    Internal("CppPythonBindingsCodeCache", "torch._inductor.codecache",
             "CppPythonBindingsCodeCache", "warms the C++ precompiled header",
             members=("load_pybinding",)),
)


# Classes of client libraries the plugin patches (not torch's): resolved only where the
# library is installed, by the code that patches them (never by problems(), so enable()
# imports none of them); checked by client_problems(), which skips an absent library.
CLIENT_OWNERS: tuple[Internal, ...] = (
    Internal("VllmBackend", "vllm.compilation.backends", "VllmBackend",
             "configure_post_pass wrapped: the plugin's post-grad pass joins vLLM's compile "
             "(vllm_passes.py; read in vLLM 0.32)",
             members=("configure_post_pass",)),
)

ATTRIBUTE = "attribute"  # Patch.kind: the owner's attribute replaced (patches.apply)
# Patch.kind: an instance of the owner class made an instance of a class layered over its
# own (the instance keeps its state; patches.swap_class)
INSTANCE_CLASS = "class of an instance"


@dataclass(frozen=True)
class Patch:
    """``internals.<owner>.<attr>`` replaced for a while by ``by`` (``patches.py`` applies
    and restores it); ``kind`` :data:`INSTANCE_CLASS`: ``attr`` is ``__class__`` of an
    instance of the owner class (``patches.swap_class`` / ``restore_class``)."""

    owner: str  # an INTERNALS entry (a class, an object or a module of torch) or a
    # CLIENT_OWNERS one (a client library's class)
    attr: str
    by: str  # the package's module that installs it
    use: str  # what the replacement does
    until: str  # when the original is put back
    kind: str = ATTRIBUTE


FUSION_REPLAY = "inductor.fusion.fusion_replay"
SELECTOR_HOOKS = "inductor.autotune.selector_hooks"
TRITON_STREAM = "inductor.adapter.triton_stream"
WARM_UP = "sweep.warm_up"
CHOICES = "inductor.autotune.choices"
VLLM_PASSES = "inductor.vllm.vllm_passes"
_WHILE_ON = "inductor_flydsl.disable()"
_WARM_UP_END = "the warm-up's end (warm_up.finish)"
PATCHES: tuple[Patch, ...] = (
    Patch("AlgorithmSelectorCache", "__class__", SELECTOR_HOOKS,
          "Inductor's selector object becomes a PluginSelector (a user's subclass of the "
          "selector stays under it): serves recorded timings and sees Inductor's choice "
          "(no extension point does)", _WHILE_ON, kind=INSTANCE_CLASS),
    Patch("InductorChoices", "__class__", CHOICES,
          "an InductorChoices made by a user's inductor_choices_class factory is layered "
          "under the plugin's class (its uuid() in the FX-graph-cache key)",
          "the instance's life (one compile's); inductor_flydsl.disable() puts the user's "
          "factory back, whose later instances keep their class", kind=INSTANCE_CLASS),
    Patch("VllmBackend", "configure_post_pass", VLLM_PASSES,
          "joins the plugin's post-grad pass to vLLM's per-compile config after vLLM "
          "configured its own (does nothing while the plugin is off)",
          "the process's end (vLLM registers its plugins once per process)"),
    Patch("Scheduler", "speedup_by_fusion", FUSION_REPLAY,
          "replays a deferred GEMM's epilogue-fusion decision from recorded timings, or "
          "captures Inductor's benchmark of it", _WHILE_ON),
    Patch("Scheduler", "benchmark_fused_nodes", FUSION_REPLAY,
          "captures the epilogue kernel's time", _WHILE_ON),
    Patch("Scheduler", "benchmark_codegened_module", FUSION_REPLAY,
          "captures each fused template's time", _WHILE_ON),
    Patch("MultiTemplateBuffer", "swap_as_triton_caller", FUSION_REPLAY,
          "tells a captured time to its template", _WHILE_ON),
    Patch("TritonBenchmarkRequest", "make_run_fn", TRITON_STREAM,
          "backports torch 2.14.1's fix where torch binds the raw stream when the call is "
          "made (2.13): a Triton choice's kernel is launched on the stream current when it "
          "runs, so graph timing captures it instead of timing an empty graph; applied "
          "only where the installed torch needs it; remove when 2.13 support ends",
          _WHILE_ON),
    Patch("select_algorithm", "get_algorithm_selector_cache", SELECTOR_HOOKS,
          "puts the plugin on Inductor's selector object when Inductor first asks for it: "
          "making it queries the GPU (torch.cuda.current_device()), which enable() must "
          "not do at `import torch`",
          "Inductor's first call of it, or inductor_flydsl.disable()"),
    Patch("benchmarker", "benchmark_cpu", WARM_UP,
          "keeps the warm-up's background compiles off the CPUs while Inductor times a "
          "candidate", _WARM_UP_END),
    Patch("cpu_vec_isa", "valid_vec_isa_list", WARM_UP,
          "probes only the vector ISA Inductor picks", _WARM_UP_END),
)

# Inductor settings the plugin reads or writes (``internals.config.<key>``).
CONFIG_KEYS: tuple[str, ...] = (
    "max_autotune", "max_autotune_gemm", "max_autotune_gemm_backends",
    "max_autotune_gemm_search_space", "autotune_in_subproc", "cpp_wrapper",
    "aot_inductor.output_path", "benchmark_fusion", "benchmark_epilogue_fusion",
    "multi_kernel_hints",
    "inductor_choices_class", "post_grad_custom_post_pass", "_post_fusion_custom_pass",
    "freezing", "fx_graph_cache", "autotune_local_cache", "autotune_remote_cache",
    "cpp.simdlen", "cpp_cache_precompile_headers", "triton.cudagraphs",
)

_BY_NAME = {entry.name: entry for entry in (*INTERNALS, *CLIENT_OWNERS)}
_CLIENTS = frozenset(entry.name for entry in CLIENT_OWNERS)
# The names a declared patch replaces for a while (an attribute of a module): resolved at
# each use, never cached, so never the replacement after the original is put back.
_REPLACED = frozenset(
    entry.name for entry in INTERNALS for patch in PATCHES
    if patch.kind == ATTRIBUTE and patch.owner in _BY_NAME
    and patch.attr == entry.attr.rsplit(".", 1)[-1]
    and f"{_BY_NAME[patch.owner].module}.{_BY_NAME[patch.owner].attr}" == entry.module)
_resolved: dict[str, Any] = {}


def resolve(entry: Internal) -> Any:
    """The object ``entry`` names (imports its module); AttributeError/ImportError if gone."""
    value: Any = importlib.import_module(entry.module)
    for part in entry.attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:  # a submodule not imported by its package yet
            value = importlib.import_module(f"{value.__name__}.{part}")
    return value


def __getattr__(name: str) -> Any:
    """``internals.<name>``: resolved on first use, so importing this module imports
    nothing of Inductor (the CLI and the DB never pay for it)."""
    entry = _BY_NAME.get(name)
    if entry is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _resolved:
        return _resolved[name]
    value = resolve(entry)
    if name not in _REPLACED:
        _resolved[name] = value
    return value


def selector_object() -> Any | None:
    """Inductor's selector object, or None where Inductor has not made it yet (never made
    here: making it asks the GPU, ``selector_hooks.py``)."""
    return getattr(resolve(_BY_NAME["select_algorithm"]), "_ALGORITHM_SELECTOR_CACHE", None)


def client_installed(name: str) -> bool:
    """Whether the library of the :data:`CLIENT_OWNERS` entry ``name`` is installed
    (looked up, not imported)."""
    return importlib.util.find_spec(_BY_NAME[name].module.split(".")[0]) is not None


def selector_class_over(original: type, plugin_class: type) -> type:
    """The class Inductor's selector object of class ``original`` is given
    (``patches.swap_class``, a declared patch): ``plugin_class``, with a user's subclass of
    the selector under it."""
    base = resolve(_BY_NAME["AlgorithmSelectorCache"])
    return plugin_class if original is base else \
        type(plugin_class.__name__, (plugin_class, original), {})
