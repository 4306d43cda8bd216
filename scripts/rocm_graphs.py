"""Section (g) of scripts/validate_rocm.py, and the checks of tests/flydsl/test_graphs_rocm.py:
FlyDSL inside CUDA/HIP graphs and timed the way the graph runs (issue 42). ROCm only.

1. ``cudagraph_cases``: ``torch.compile(mode="max-autotune")`` with cudagraph trees on,
   the plugin on (a fresh DB) and FlyDSL steered to win its selection (every other
   choice's time multiplied by 1e6 in the selector's lookup, as PyTorch's own tests steer
   theirs), for a plain config, a split-K config (a decode M with a long K) and a fused
   epilogue (``relu(x @ w.T + bias)``): the generated code calls the plugin's op, the
   graph runs three times on fresh inputs with output equal to eager each time, and
   ``counters["inductor"]["cudagraph_skips"] == 0``.
2. ``timing_cases``: at three decode shapes, the time Inductor recorded in the DB for the
   FlyDSL winner and for ATen (graph-replay timing under max-autotune) against the
   kernel's own device time from ``torch.profiler``: within ``TOLERANCE_US``.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOLERANCE_US = 3.0
DECODE_SHAPES = ((8, 4096, 4096), (32, 1024, 8192), (64, 14336, 4096))


def _steer_to(pick: Callable[[Any], bool]):
    """A replacement of the selector's lookup making every choice but the picked ones
    1e6 times slower (restore with the returned undo)."""
    from torch._inductor import select_algorithm

    original = select_algorithm.AlgorithmSelectorCache.lookup

    def lookup(self, choices, name, key, benchmark, hint_override=None):
        timings = original(self, choices, name, key, benchmark, hint_override)
        return {c: t if pick(c) else t * 1e6 for c, t in timings.items()}

    select_algorithm.AlgorithmSelectorCache.lookup = lookup
    return lambda: setattr(select_algorithm.AlgorithmSelectorCache, "lookup", original)


def _is_flydsl(split_k: bool | None) -> Callable[[Any], bool]:
    def pick(choice: Any) -> bool:
        state = getattr(choice, "inductor_flydsl", None)
        if state is None or state.backend != "flydsl":
            return False
        return split_k is None or (state.config.get("split_k", 1) > 1) == split_k
    return pick


def cudagraph_case(name: str, device: Any, log: Callable[[str], None]) -> dict[str, Any]:
    import torch
    from torch._dynamo.utils import counters
    from torch._inductor.utils import fresh_cache, run_and_get_code

    import inductor_flydsl

    m, n, k = (16, 1024, 8192) if name == "split_k" else (128, 1024, 1024)
    make = {"plain": lambda x, w, b: x @ w.t(), "split_k": lambda x, w, b: x @ w.t(),
            "epilogue": lambda x, w, b: torch.relu(x @ w.t() + b)}[name]
    undo = _steer_to(_is_flydsl(True if name == "split_k" else
                                False if name == "plain" else None))
    row: dict[str, Any] = {"case": name, "shape": f"{m}x{n}x{k}"}
    try:
        with tempfile.TemporaryDirectory() as tmp, fresh_cache():
            inductor_flydsl.enable(Path(tmp) / "g.db", "readwrite")
            torch._dynamo.reset()
            counters.clear()
            compiled = torch.compile(make, mode="max-autotune")
            inputs = [(torch.randn(m, k, device=device, dtype=torch.bfloat16),
                       torch.randn(n, k, device=device, dtype=torch.bfloat16),
                       torch.randn(n, device=device, dtype=torch.bfloat16))
                      for _ in range(3)]
            _, code = run_and_get_code(compiled, *inputs[0])
            errors = []
            for args in inputs:  # three calls, each on new inputs
                out = compiled(*args).float()
                ref = make(*args).float()
                errors.append(float((out - ref).abs().max() / ref.abs().max().clamp_min(1)))
            text = "\n".join(code)
            row.update(flydsl_in_graph="inductor_flydsl_direct." in text,
                       cudagraph_skips=int(counters["inductor"]["cudagraph_skips"]),
                       max_rel_err=max(errors),
                       stats=inductor_flydsl.stats().as_dict())
            inductor_flydsl.disable()
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        undo()
    row["ok"] = (row.get("flydsl_in_graph") is True and row.get("cudagraph_skips") == 0
                 and row.get("max_rel_err", 1.0) < 2e-2 and "error" not in row)
    log(f"graphs: {name}: {'ok' if row['ok'] else 'FAILED'} {row}")
    return row


def kernel_us(fn: Callable[[], None], calls: int = 50) -> float:
    """The mean device time of the GPU kernels ``fn`` launches, from torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = sum(e.device_time_total for e in prof.key_averages()
                if e.device_time_total > 0 and "memcpy" not in e.key.lower()
                and "memset" not in e.key.lower())
    return total / calls


def timing_case(shape: tuple[int, int, int], device: Any, log: Callable[[str], None]
                ) -> dict[str, Any]:
    """Inductor's recorded time (graph replay) of the FlyDSL winner and of ATen at one
    decode shape against the profiler's kernel time."""
    import json

    import torch
    from torch._inductor.utils import fresh_cache

    import inductor_flydsl
    from inductor_flydsl.db.open import open_db  # every DB connection is open_db's
    from inductor_flydsl.flydsl_backend.run.ops import direct_call

    m, n, k = shape
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=device, dtype=torch.bfloat16)
    row: dict[str, Any] = {"shape": f"{m}x{n}x{k}"}
    with tempfile.TemporaryDirectory() as tmp, fresh_cache():
        db = Path(tmp) / "t.db"
        inductor_flydsl.enable(db, "readwrite")
        torch._dynamo.reset()
        torch.compile(lambda a, b: a @ b.t(), mode="max-autotune")(x, w)
        inductor_flydsl.disable()
        tuning_db = open_db(db, writable=False)
        try:
            rows = list(tuning_db.query(
                "select r.backend, r.time_ms, r.config, p.spec from results r join "
                "problems p on p.id = r.problem_id where r.status = 'ok'"))
        finally:
            tuning_db.close()
    graph_rows = [r for r in rows if json.loads(r["spec"]).get("attrs", {}).get("timing")
                  == "graph"]
    out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    aten = [r for r in graph_rows if r["backend"] == "aten"]
    flydsl = sorted((r for r in graph_rows if r["backend"] == "flydsl"),
                    key=lambda r: r["time_ms"])
    if aten:
        row["aten_recorded_us"] = 1e3 * aten[0]["time_ms"]
        row["aten_kernel_us"] = kernel_us(lambda: torch.mm(x, w.t(), out=out))
    if flydsl:
        config = json.loads(flydsl[0]["config"])
        text = json.dumps({k: v for k, v in config.items()
                           if k not in ("template", "template_hash")},
                          sort_keys=True, separators=(",", ":"))
        row["flydsl_recorded_us"] = 1e3 * flydsl[0]["time_ms"]
        row["flydsl_kernel_us"] = kernel_us(lambda: direct_call("mm")(x, w.t(), out, text))
    gaps = [abs(row[f"{b}_recorded_us"] - row[f"{b}_kernel_us"]) for b in ("aten", "flydsl")
            if f"{b}_recorded_us" in row]
    row["worst_gap_us"] = max(gaps) if gaps else None
    row["ok"] = len(gaps) == 2 and max(gaps) <= TOLERANCE_US
    log(f"timing: {row['shape']}: {'ok' if row['ok'] else 'FAILED'} {row}")
    return row


def run_graphs(arch: str, device: Any, *, quick: bool, log: Callable[[str], None]
               ) -> dict[str, Any]:
    cases = [cudagraph_case(name, device, log) for name in ("plain", "split_k", "epilogue")]
    timings = [timing_case(shape, device, log) for shape in DECODE_SHAPES[:1 if quick else 3]]
    gaps = [t["worst_gap_us"] for t in timings if t["worst_gap_us"] is not None]
    return {"cudagraphs": cases, "timing": timings,
            "failed": sum(not r["ok"] for r in cases + timings),
            "median_gap_us": statistics.median(gaps) if gaps else None}
