"""FlyDSL GEMM candidates for Inductor's autotuning.

Each candidate is an extern-kernel choice whose generated code calls
``inductor_flydsl_direct.<op>_out(..., out=buf)``, the op's implementation without torch's
dispatcher (see ``ops.py``), through the plugin's module ``direct.py``, which the
generated module imports itself (:class:`DirectKernelOut`). Inductor
benchmarks extern choices in-process on its own benchmark inputs, which is where the
candidate is validated against ATen first: a candidate whose output is wrong, or that
fails to compile or launch, reports an infinite time (so it cannot win) and is recorded
in the tuning DB as ``invalid`` or ``failed``.

Candidate identity (``hash_key``): template name, template source hash, op, config id and
the epilogue scalars; the same in every process, and what the DB stores.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

import torch

from ...db.store import STATUS_FAILED, STATUS_INVALID
from ...inductor.adapter import internals
from ...inductor.adapter.choice_state import PluginChoiceState
from ...inductor.autotune.candidates import GRAPH_TIMING_SUFFIX
from ...inductor.timing.timing_parity import timed_with_graphs
from ...numerics.gemm import NumericMismatch, validate_epilogue_output, validate_output
from ...problems.keys import canonical_json, stable_id
from ...template_loader import template_source_hash
from .. import direct
from ..run.ops import direct_call, scalar_arguments, strict_launches

log = logging.getLogger("inductor_flydsl")
def _python_kernel(op: str):  # the extern kernel Inductor benchmarks
    custom_op = direct_call(op)  # what generated code calls: timed with the same host work
    names = scalar_arguments(op)  # what the op takes after its config, by its schema

    def kernel(*inputs: torch.Tensor, out: torch.Tensor, config: str, alpha: float = 1.0,
               beta: float = 1.0, epilogue: str = "") -> None:
        given = {"alpha": alpha, "beta": beta, "epilogue": epilogue}
        custom_op(*inputs, out, config, *[given[name] for name in names])

    kernel.__name__ = f"inductor_flydsl_{op}"
    return kernel


class FlydslKernelChoice(internals.ExternKernelChoice):
    """One per op per process (Inductor keeps extern choices in a registry by name)."""

    def __init__(self, op: str) -> None:
        super().__init__(_python_kernel(op), name=f"inductor_flydsl_{op}", has_out_variant=True)
        self.op = op
        # normally set by bind(); callers are built directly here, and output_node() reads it
        self.ordered_kwargs_for_cpp_kernel = ()

    def call_name(self) -> str:
        return direct.call_name(self.op)


class DirectKernelOut(internals.ExternKernelOut):
    """The IR node of a FlyDSL call in the graph: Inductor's out-variant extern kernel,
    whose code generation also writes :data:`direct.IMPORT` among the generated module's
    imports (once per module; a subgraph's imports go with its code), so the module finds
    ``inductor_flydsl_direct`` wherever it runs."""

    def codegen(self, wrapper: Any) -> None:
        wrapper.add_import_once(direct.IMPORT)
        super().codegen(wrapper)


class FlydslChoiceCaller(internals.ExternKernelCaller):
    """A FlyDSL candidate; its plugin state (config as recorded, failure, build) is
    ``self.inductor_flydsl`` (``inductor/adapter/choice_state.py``)."""

    def __init__(self, choice: FlydslKernelChoice, input_nodes: Sequence[Any], layout: Any,
                 config: Any, *, template: str, alpha: float, beta: float,
                 dynamic_m: bool = False, epilogue: str = "") -> None:
        kwargs: dict[str, Any] = {"config": canonical_json(config.to_json())}
        if epilogue:
            kwargs["epilogue"] = epilogue
        takes = scalar_arguments(choice.op)  # grouped and scaled GEMMs take no alpha
        if "alpha" in takes:
            kwargs["alpha"] = alpha
        if "beta" in takes:
            kwargs["beta"] = beta
        super().__init__(choice, input_nodes, layout, kwargs, has_out_variant=True)
        self.op = choice.op
        self.template = template  # the spec whose kernels it launches
        self.template_hash = template_source_hash(self.template)
        self.config_id = stable_id(config.to_json())
        c = config
        self.name = (f"flydsl_{self.op}_{c.tile_m}x{c.tile_n}x{c.tile_k}_w{c.waves_m}x"
                     f"{c.waves_n}_s{c.stages}_g{c.group_m}")
        recorded = {"template": self.template, "template_hash": self.template_hash,
                    **config.to_json()}
        if epilogue:
            recorded["epilogue"] = epilogue
        # build and prepare are set by the provider (prebuild.py, lookup._prepare)
        self.inductor_flydsl = PluginChoiceState(backend="flydsl", config=recorded)
        # compiled for a symbolic M: validated at more sizes than the hint (see _validate)
        self.dynamic_m = dynamic_m

    def output_node(self) -> Any:
        """As Inductor's ``ExternKernelCaller.output_node`` for an out-variant kernel, the
        node a :class:`DirectKernelOut`."""
        node = DirectKernelOut(
            layout=self.layout, inputs=self.input_nodes,
            python_kernel_name=self.choice.call_name(), kwargs=self.kwargs)
        annotations = getattr(self, "annotations", None) or {}
        if "ktc" in annotations:  # Inductor's lookup-table annotation, as it passes it
            node.annotations["ktc"] = annotations["ktc"]
        return internals.TensorBox.create(node)

    def describe_variant(self, template: str, dtype: str, layout: str, op: str) -> None:
        """Name the template variant in the config text generated code passes the op
        (the op ignores it), so a graph loaded from the FX-graph cache can have its
        variants built before its first call (``loaded_variants.py``)."""
        config = json.loads(str(self.kwargs["config"]))
        config["variant"] = {"template": template, "dtype": dtype, "layout": layout,
                             "op": op}
        self.kwargs["config"] = canonical_json(config)

    def hash_key(self) -> str:
        scalars = "-".join(f"{k}={self.kwargs[k]!r}" for k in sorted(self.kwargs)
                           if k not in ("config", "epilogue"))
        if "epilogue" in self.kwargs:  # its id: the text is in the config
            scalars += f"-epilogue={stable_id(self.kwargs['epilogue'])}"
        # Timed by graph replay: another key in Inductor's own autotune cache, so an eager
        # compile is never handed a graph timing from it (the DB's candidate id drops it:
        # the problem key carries the timing mode there, candidates.candidate_id)
        timing = GRAPH_TIMING_SUFFIX if timed_with_graphs(self) else ""
        return (f"flydsl-{self.template}-{self.template_hash}-{self.op}-{self.config_id}-"
                f"{scalars}{timing}")

    def info_dict(self) -> dict[str, Any]:
        return {"backend": "flydsl", **self.inductor_flydsl.config}

    def _validate(self, inputs: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        """Run on Inductor's benchmark inputs (the size hint) and compare with float64.
        A dynamic-M candidate is also run and compared at every M of
        :func:`dynamic_validation_m` (on fresh random inputs of the same layout)."""
        runs = [(inputs, out)]
        if self.dynamic_m:
            hint = out.shape[0]
            runs += [resized_inputs(self.op, inputs, out, m)
                     for m in dynamic_validation_m(hint)]
        for args, result in runs:
            self.to_callable()(*args, out=result)
            try:
                if "epilogue" in self.kwargs:
                    validate_epilogue_output(str(self.kwargs["epilogue"]), args, result)
                    continue
                validate_output(self.op, args, result, float(self.kwargs.get("alpha", 1.0)),
                                float(self.kwargs.get("beta", 0.0)))
            except NumericMismatch as exc:
                raise NumericMismatch(f"at M={result.shape[0]}: {exc}") from exc

    def _build_failure(self) -> tuple[str, str] | None:
        """Wait for this candidate's parallel build; its failure, if it failed."""
        build = self.inductor_flydsl.build
        if build is None:
            return None
        result = build.wait()
        if result is None or result.ok:
            return None
        status = build.status or "failed"
        return STATUS_FAILED, f"build {status}: {result.error}"

    def benchmark(self, *args: torch.Tensor, out: torch.Tensor) -> float:
        state = self.inductor_flydsl
        if state.failure is None:
            state.failure = self._build_failure()
        if state.failure is None:
            try:
                with strict_launches():  # a failure excludes the candidate
                    self._validate(args, out)
            except NumericMismatch as exc:
                state.failure = (STATUS_INVALID, f"numeric check failed: {exc}")
            except Exception as exc:  # compile error, launch error: this candidate only
                state.failure = (STATUS_FAILED, f"{type(exc).__name__}: {exc}")
        if state.failure is not None:
            log.info("inductor_flydsl: %s excluded: %s", self.name, state.failure[1])
            return math.inf
        with strict_launches():
            return super().benchmark(*args, out=out)


def dynamic_validation_m(hint: int) -> tuple[int, ...]:
    """The M sizes a dynamic-M candidate must also compute correctly before it may win,
    besides the hint: M=1 (a decode step, one partial tile, and the split-K configs' home)
    and hint + 37, over the hint and, 37 being odd and over 32, a partial last tile for
    every tile_m (all powers of two) after at least one full tile."""
    return tuple(m for m in (1, hint + 37) if m != hint)


def resized_inputs(op: str, inputs: tuple[torch.Tensor, ...], out: torch.Tensor,
                   m: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """Fresh random inputs and an output like ``inputs``/``out`` with M = ``m``: A with
    the same dtype, device and row-major layout (the only one dynamic M takes), B as is,
    a 1-D bias as is and an (M, N) expanded bias re-expanded."""
    start = 1 if op == "addmm" else 0
    a = inputs[start]
    gen = torch.Generator(device=a.device).manual_seed(m)
    new_a = torch.randn((m, a.shape[-1]), generator=gen, device=a.device,
                        dtype=torch.float32).to(a.dtype)
    new_out = out.new_empty((m, out.shape[-1]))
    if op != "addmm":
        return (new_a, *inputs[1:]), new_out
    bias = inputs[0]
    if bias.dim() == 2:
        bias = bias[:1].expand(m, bias.shape[-1])
    return (bias, new_a, *inputs[2:]), new_out


_kernel_choices: dict[str, FlydslKernelChoice] = {}


def kernel_choice(op: str) -> FlydslKernelChoice:
    if op not in _kernel_choices:
        existing = internals.ExternKernelChoice.lookup(f"inductor_flydsl_{op}")
        _kernel_choices[op] = existing if isinstance(existing, FlydslKernelChoice) \
            else FlydslKernelChoice(op)
    return _kernel_choices[op]
