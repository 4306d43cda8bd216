"""Tune ONE sweep item in this (fresh) process, through the plugin's own recording path.

    python -m inductor_flydsl.sweep.worker --item '{"op":"linear","m":16,...}' --db t.db
    python -m inductor_flydsl.sweep.worker --describe      # device/software rows as JSON

It builds real tensors with the item's layout on the device, enables
``inductor_flydsl`` in ``readwrite`` mode on ``--db`` and compiles the GEMM with
``torch.compile(mode="max-autotune")`` (on a GPU with ``--timing eager``:
``max-autotune-no-cudagraphs``): Inductor benchmarks the candidates, each timed the way a
user's compile of that mode times it (``--timing graph``, the default: graph replay, as
max-autotune's cudagraph trees run them; records are served to max-autotune compiles;
``inductor/timing/timing_parity.py``) and the plugin's feedback saver records every
candidate and the winner, exactly as in a user's compile. Nothing here times kernels
itself. When the DB already holds a winner for the problem, the plugin reuses it and
nothing is benchmarked.

On CPU, Inductor autotunes only GEMMs with a constant weight: ``op=linear`` runs an
``nn.Linear`` under ``torch._inductor.config.freezing = True`` (recorded as op
``packed_linear``); ``mm``/``addmm``/``bmm`` are reported as skipped.

Each worker uses a fresh Inductor cache dir (``--cache-dir``, else a temporary one that is
removed at exit), so neither the FX-graph cache nor Inductor's autotune cache answers for
it, shipped tuning DBs are not layered (``INDUCTOR_FLYDSL_SHIPPED=0``), dynamic-M
buckets are off (``INDUCTOR_FLYDSL_BUCKETS=0``) and so are priors
(``INDUCTOR_FLYDSL_PRIORS=0``: an older record never narrows the candidates): a sweep
measures every candidate. The last stdout line is ``SWEEP_RESULT {json}``.

Crashes, hangs and failing batches are injected by the tests from outside
(tests/faults/sitecustomize.py); there is no test hook here.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

from .. import settings
from ..provenance.timing_modes import GPU_TIMING_MODES
from .items import ItemError, SweepItem, always_skipped
from .warm_up import finish as warm_up_finish
from .warm_up import warm_up

RESULT_PREFIX = "SWEEP_RESULT "
DEFAULT_BACKENDS = {"cpu": "ATEN,CPP", "cuda": "ATEN,TRITON", "rocm": "ATEN,TRITON,FLYDSL"}
CPU_SKIP_REASON = ("Inductor on CPU autotunes only frozen-weight linear layers "
                   "(op=linear, recorded as packed_linear); {op} gets ATen only")
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """Linux: get SIGKILL when the runner dies (even by kill -9), so no orphan keeps a
    GPU busy. A worker whose parent is already gone exits at once."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(3)


def _emit(result: dict[str, Any]) -> None:
    sys.stdout.write(RESULT_PREFIX + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


def device_kind(device: str) -> str:
    import torch

    if device == "cpu":
        return "cpu"
    return "rocm" if torch.version.hip is not None else "cuda"


def describe(device: str) -> dict[str, Any]:
    from ..provenance.device import describe_device
    from ..provenance.software import current_software

    return {"device": describe_device(device).as_row(),
            "software": current_software().as_row(), "kind": device_kind(device)}


def _operand(rows: int, cols: int, major: str, batch: int | None, *, device: str,
             dtype: Any, gen: Any) -> Any:
    """A rows x cols operand, row-major (``n``) or column-major (``t``)."""
    import torch

    lead = () if batch is None else (batch,)
    shape = (*lead, rows, cols) if major == "n" else (*lead, cols, rows)
    t = torch.randn(shape, device=device, dtype=dtype, generator=gen)
    return t if major == "n" else t.transpose(-1, -2)


def build(item: SweepItem, device: str) -> tuple[Any, tuple[Any, ...]]:
    """The callable to compile and its inputs, as the item describes them; a
    ``dynamic_m`` item's M dim is marked dynamic (``torch._dynamo.mark_dynamic``)."""
    fn, inputs = _build(item, device)
    if item.dynamic_m:
        from ..inductor.adapter import internals

        a = inputs[0] if item.op != "addmm" else inputs[1]
        internals.mark_dynamic(a, a.dim() - 2)
    return fn, inputs


def _build(item: SweepItem, device: str) -> tuple[Any, tuple[Any, ...]]:
    import torch

    if item.op == "scaled_mm":
        from ..emulator.mx import make_mx_operands
        from ..flydsl_backend.offer.mx_eligibility import alias_variant

        a, b, scale_a, scale_b, _, _ = make_mx_operands(alias_variant(item.dtype), "mm",
                                                        item.m, item.n, item.k)
        return _scaled_mm, tuple(t.to(device) for t in (a, b, scale_a, scale_b))
    dtype = getattr(torch, item.dtype)
    gen = torch.Generator(device=device).manual_seed(0)
    kw = {"device": device, "dtype": dtype, "gen": gen}
    a_major, b_major = item.layout
    if item.op == "grouped_mm":
        from ..problems.routing import group_sizes, offsets

        x = _operand(item.m, item.k, "n", None, **kw)
        w = _operand(item.k, item.n, b_major, item.batch, **kw) / math.sqrt(item.k)
        offs = offsets(group_sizes(item.routing, item.m, item.batch)).to(device)
        return _grouped_mm, (x, w, offs)
    if item.op == "linear":
        module = torch.nn.Linear(item.k, item.n, bias=False, device=device, dtype=dtype)
        with torch.no_grad():
            module.weight.copy_(torch.randn(item.n, item.k, device=device, dtype=dtype,
                                            generator=gen) / math.sqrt(item.k))
        return module.eval(), (_operand(item.m, item.k, "n", None, **kw),)
    batch = item.batch if item.op == "bmm" else None
    a = _operand(item.m, item.k, a_major, batch, **kw)
    b = _operand(item.k, item.n, b_major, batch, **kw) / math.sqrt(item.k)
    if item.op == "mm":
        return torch.mm, (a, b)
    if item.op == "bmm":
        return torch.bmm, (a, b)
    bias = torch.randn(item.n, device=device, dtype=dtype, generator=gen)
    return torch.addmm, (bias, a, b)


def _scaled_mm(a: Any, b: Any, scale_a: Any, scale_b: Any) -> Any:
    """MX GEMM with unswizzled (rows, K/32) E8M0 scales, bf16 out."""
    import torch

    return torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)


def _grouped_mm(x: Any, w: Any, offs: Any) -> Any:
    import torch

    return torch._grouped_mm(x, w, offs=offs)


def _rel_err(out: Any, ref: Any) -> float:
    diff = (out.float() - ref.float()).abs().max().item()
    scale = max(ref.float().abs().max().item(), 1e-6)
    return float(diff / scale)


# how candidates are timed on a GPU (--timing): as the compiled graph of a max-autotune
# compile runs them (graph replay) or of a max-autotune-no-cudagraphs one (eager)
TIMINGS = GPU_TIMING_MODES
GPU_TIMING = "graph"


def compile_mode(kind: str, timing: str) -> str:
    """The ``torch.compile`` mode a sweep item is compiled with: on a GPU, the one whose
    compiled graph runs kernels the way ``timing`` times them (graph replay under
    max-autotune's cudagraph trees, else eager launches); on CPU (no graphs) max-autotune."""
    if timing not in TIMINGS:
        raise ValueError(f"timing {timing!r} is not one of {', '.join(TIMINGS)}")
    return "max-autotune" if kind == "cpu" or timing == "graph" else \
        "max-autotune-no-cudagraphs"


def _compile_recorded(fn: Any, inputs: tuple[Any, ...], *, db: str, kind: str,
                      backends: str | None, dynamic: bool = False) -> dict[str, Any]:
    """Compile and run ``fn`` with max-autotune and the plugin recording into ``db``, and
    run it eagerly too: ``out``, ``ref``, ``compile_s``, the plugin ``stats`` whose
    ``decisions`` are this compile's only (a persistent worker's earlier ones are cut),
    and the ``backends`` used."""
    import torch

    import inductor_flydsl

    from ..inductor.adapter import internals

    inductor_config = internals.config
    chosen = backends or DEFAULT_BACKENDS[kind]
    inductor_config.max_autotune_gemm_backends = chosen
    if kind == "cpu":
        inductor_config.freezing = True  # else Inductor does not autotune CPU GEMMs
    inductor_flydsl.enable(db, "readwrite", strict=True)  # never tune with the plugin off
    before = len(inductor_flydsl.stats()["decisions"])
    mode = compile_mode(kind, GPU_TIMING)
    start = time.perf_counter()
    with torch.no_grad():
        # dynamic=None lets mark_dynamic make M symbolic; nothing else becomes dynamic
        compiled = torch.compile(fn, mode=mode, dynamic=None if dynamic else False,
                                 fullgraph=True)
        out = compiled(*inputs)
        if kind != "cpu":
            torch.cuda.synchronize()
        compile_s = time.perf_counter() - start
        ref = fn(*inputs)
    stats = inductor_flydsl.stats()
    inductor_flydsl.disable()
    stats["decisions"] = stats["decisions"][before:]
    return {"out": out, "ref": ref, "compile_s": compile_s, "stats": stats,
            "backends": chosen}


def _sources(decisions: list[dict[str, Any]]) -> str:
    """"autotune", "db" or both: where the decisions' winners came from."""
    return ",".join(sorted({"autotune" if d["source"] == "autotune" else "db"
                            for d in decisions}))


def tune(item: SweepItem, db: str, device: str, backends: str | None) -> dict[str, Any]:
    kind = device_kind(device)
    result: dict[str, Any] = {"item_id": item.item_id, "item": item.to_dict(),
                              **describe(device)}
    if always_skipped(item, kind):
        return {**result, "status": "skipped", "reason": CPU_SKIP_REASON.format(op=item.op)}
    from ..problems import routing

    fn, inputs = build(item, device)
    routing.set_active(item.routing or None)  # grouped: benchmark under the item's routing
    try:
        run = _compile_recorded(fn, inputs, db=db, kind=kind, backends=backends,
                                dynamic=item.dynamic_m)
    finally:
        routing.set_active(None)
    from ..inductor.adapter.internals import counters

    stats, chosen = run["stats"], run["backends"]
    decisions = stats["decisions"]
    problem_ids = sorted({d["problem_id"] for d in decisions})
    result.update({"backends": chosen, "compile_s": round(run["compile_s"], 3),
                   "rel_err": _rel_err(run["out"], run["ref"]),
                   "stats": stats, "problem_ids": problem_ids,
                   "autotune_runs": counters["inductor"]["select_algorithm_autotune"]})
    if not decisions:
        return {**result, "status": "failed",
                "reason": f"no GEMM autotune happened (backends {chosen}: a single "
                          f"candidate or no tunable lowering); plugin stats: "
                          f"hits={stats['hits']} misses={stats['misses']} "
                          f"errors={stats['errors']}"}
    return {**result, "status": "done", "source": _sources(decisions),
            "problems": sorted({d["problem"] for d in decisions}), "reason": ""}


def reset_between_items() -> None:
    """What a persistent worker clears before each batch: Dynamo's compiled frames and
    guards, Inductor's per-process counters, and the plugin's hooks (re-enabled per
    batch). Inductor's caches that could answer an autotune (FX graph cache, local and
    remote autotune caches) are off for the worker's whole life (:func:`serve`); its code
    caches keyed by source hash stay, since they hold builds, not measurements."""
    import inductor_flydsl

    from ..inductor.adapter import internals

    inductor_flydsl.disable()
    internals.dynamo_reset()
    internals.counters.clear()


def tune_batch(items: list[SweepItem], db: str, device: str,
               backends: str | None) -> list[dict[str, Any]]:
    """Tune ``items`` in one compiled graph (see sweep/batch.py); one result per item,
    shaped as :func:`tune`'s. Raises when the batch's compile fails (the caller retries the
    items one by one)."""
    base = describe(device)
    kind = base["kind"]
    results: dict[str, dict[str, Any]] = {}
    runnable = []
    for item in items:
        if always_skipped(item, kind):
            results[item.item_id] = {"item_id": item.item_id, "item": item.to_dict(), **base,
                                     "status": "skipped",
                                     "reason": CPU_SKIP_REASON.format(op=item.op)}
        else:
            runnable.append(item)
    # grouped GEMMs each compile alone: each has its own token routing for benchmarking
    for item in [i for i in runnable if i.op == "grouped_mm"]:
        results[item.item_id] = tune(item, db, device, backends)
    runnable = [i for i in runnable if i.op != "grouped_mm"]
    if runnable:
        if len(runnable) == 1:
            results[runnable[0].item_id] = tune(runnable[0], db, device, backends)
        else:
            results.update(_tune_together(runnable, db, device, backends, base))
    return [results[item.item_id] for item in items]


def _tune_together(items: list[SweepItem], db: str, device: str, backends: str | None,
                   base: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from ..inductor.adapter.internals import counters
    from .batch import batch_module, problems_by_item

    module, flat = batch_module([build(item, device) for item in items])
    run = _compile_recorded(module, flat, db=db, kind=base["kind"], backends=backends)
    chosen, decisions = run["backends"], run["stats"]["decisions"]
    owned = problems_by_item(items, [d["problem_id"] for d in decisions], db)
    out: dict[str, dict[str, Any]] = {}
    for item, got, ref in zip(items, run["out"], run["ref"], strict=True):
        mine = [d for d in decisions if d["problem_id"] in owned[item.item_id]]
        result = {"item_id": item.item_id, "item": item.to_dict(), **base, "backends": chosen,
                  "compile_s": round(run["compile_s"] / len(items), 3),
                  "batch_size": len(items), "rel_err": _rel_err(got, ref),
                  "problem_ids": sorted(owned[item.item_id]),
                  "autotune_runs": counters["inductor"]["select_algorithm_autotune"]}
        if not mine:
            out[item.item_id] = {**result, "status": "failed",
                                 "reason": f"no GEMM autotune happened for this item in its "
                                           f"batch of {len(items)} (backends {chosen})"}
            continue
        out[item.item_id] = {**result, "status": "done", "source": _sources(mine),
                             "problems": sorted({d["problem"] for d in mine}), "reason": ""}
    return out


BATCH_PREFIX = "SWEEP_BATCH "


def _busy_note(note: str) -> contextlib.AbstractContextManager[None]:
    """The runner's busy note for one batch (recorded with its selections), or none, set
    while the batch is tuned."""
    from ..provenance.noise import ENV_BUSY_NOTE

    return settings.overridden({ENV_BUSY_NOTE: note or None})


def serve(db: str, device: str, backends: str | None) -> int:
    """Persistent mode: read ``{"batch": id, "items": [...], "busy": note}`` lines on
    stdin (``busy``: why the runner found the machine busy before the batch, recorded with
    its selections; empty when it was quiet), tune each batch (:func:`tune_batch`; a batch
    whose compile raises is retried item by item in this process), print one
    ``SWEEP_RESULT`` line per item and then ``SWEEP_BATCH {"batch": id}``. Exits at end of
    input. A crash or hang is the runner's to handle: it kills this process, retries the
    batch's items one per batch, and starts a new worker."""
    from ..inductor.adapter import internals

    inductor_config = internals.config
    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False
    inductor_config.autotune_remote_cache = False
    warm_up(device)
    try:
        return _serve_batches(db, device, backends)
    finally:
        warm_up_finish()


def _tune_batch_or_alone(batch_id: Any, items: list[SweepItem], db: str, device: str,
                         backends: str | None) -> list[dict[str, Any]]:
    """One batch's results: tuned together, or, when the batch's compile raises, each item
    alone in this process."""
    reset_between_items()
    try:
        return tune_batch(items, db, device, backends)
    except Exception as batch_exc:
        sys.stderr.write(f"batch {batch_id} failed, retrying its {len(items)} items "
                         f"one by one:\n{traceback.format_exc()[-2000:]}\n")
        why = f"tuned alone: its batch's compile failed ({type(batch_exc).__name__}: " \
              f"{str(batch_exc)[:300]})"
    results = []
    for item in items:
        reset_between_items()
        try:
            result = tune(item, db, device, backends)
            if result.get("status") == "done":
                result["reason"] = why
            results.append(result)
        except Exception as exc:
            results.append({"item_id": item.item_id, "status": "failed",
                            "reason": f"{type(exc).__name__}: {exc}"[:2000],
                            "traceback": traceback.format_exc()[-4000:]})
    return results


def _serve_batches(db: str, device: str, backends: str | None) -> int:
    sys.stdout.write(BATCH_PREFIX + json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        batch_id = request["batch"]
        items = [SweepItem.from_values(v) for v in request["items"]]
        with _busy_note(request.get("busy") or ""):
            results = _tune_batch_or_alone(batch_id, items, db, device, backends)
        for result in results:
            _emit({**result, "batch": batch_id})
        sys.stdout.write(BATCH_PREFIX + json.dumps({"batch": batch_id}) + "\n")
        sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--item", help="the sweep item as JSON")
    parser.add_argument("--db", help="tuning DB to record into")
    parser.add_argument("--device", default="auto", help="cpu, cuda (first visible GPU), auto")
    parser.add_argument("--backends", default=None,
                        help="TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS (default: all "
                             "available: CPU ATEN,CPP; CUDA ATEN,TRITON; ROCm "
                             "ATEN,TRITON,FLYDSL)")
    parser.add_argument("--cache-dir", default=None,
                        help="Inductor cache dir (default: a fresh temporary one)")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="die with this process (the runner)")
    parser.add_argument("--timing", choices=TIMINGS, default="graph",
                        help="on a GPU: time candidates by graph replay (compiled as "
                             "max-autotune, the default) or eagerly, host dispatch included "
                             "(max-autotune-no-cudagraphs); records serve compiles of that "
                             "mode only")
    parser.add_argument("--serve", action="store_true",
                        help="persistent mode: tune batches of items read as JSON lines "
                             "on stdin until end of input")
    parser.add_argument("--describe", action="store_true",
                        help="print the device and software rows as JSON and exit")
    args = parser.parse_args(argv)
    global GPU_TIMING
    GPU_TIMING = args.timing
    if args.parent_pid is not None:
        _die_with_parent(args.parent_pid)
    own_cache = args.cache_dir is None
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="inductor_flydsl_sweep_")
    # The worker process's own set-up, for its whole life and inherited by the processes
    # it starts (Inductor's compile workers, the build server): process-wide on purpose.
    settings.set_for_process({
        settings.SHIPPED.name: "0",
        settings.BUCKETS.name: "0",  # measure this M, never reuse its bucket's
        settings.PRIORS.name: "0",  # measure every candidate, not a short list
        settings.ENABLE.name: None,  # enabled explicitly below, on --db only
        **({"TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS": args.backends}
           if args.backends else {}),
        "TORCHINDUCTOR_CACHE_DIR": cache_dir,
    })
    try:
        return _run(args)
    finally:
        if own_cache:
            shutil.rmtree(cache_dir, ignore_errors=True)


def _run(args: argparse.Namespace) -> int:
    item = None
    if args.serve:
        if not args.db:
            sys.stderr.write("worker: --serve needs --db\n")
            return 2
    elif not args.describe:
        if not args.item or not args.db:
            sys.stderr.write("worker: --item and --db are required\n")
            return 2
        try:
            item = SweepItem.from_values(json.loads(args.item))
        except (ItemError, json.JSONDecodeError, TypeError, AttributeError) as exc:
            _emit({"status": "failed", "reason": f"bad --item: {exc}"})
            return 2
        if args.device == "cpu" and always_skipped(item, "cpu"):  # without importing torch
            _emit({"item_id": item.item_id, "item": item.to_dict(), "status": "skipped",
                   "reason": CPU_SKIP_REASON.format(op=item.op)})
            return 0
    import torch

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device.startswith("cuda"):
        device = "cuda"
    if args.serve:
        return serve(args.db, device, args.backends)
    if item is None:
        sys.stdout.write(json.dumps(describe(device)) + "\n")
        return 0
    try:
        result = tune(item, args.db, device, args.backends)
    except Exception as exc:
        tail = traceback.format_exc()[-4000:]
        _emit({"item_id": item.item_id, "status": "failed",
               "reason": f"{type(exc).__name__}: {exc}"[:2000], "traceback": tail})
        return 1
    _emit(result)
    return 0 if result["status"] != "failed" else 1


if __name__ == "__main__":
    sys.exit(main())
