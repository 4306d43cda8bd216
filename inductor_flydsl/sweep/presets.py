"""Where sweep items come from: named presets, a CSV file, or the DB's recorded misses.

Presets:

- ``dense-bf16-suite``: the 15 dense BF16 NT ``mm`` shapes of the published FlyDSL
  comparison (M in 8..4096 x 4096 x 4096, 4096x4096x8192, 8192^3, 32x14336x4096,
  16x28672x4096, 4096x256x4096);
- ``llama3-8b``, ``llama3-70b``, ``mixtral-8x7b``: every distinct linear layer of the model
  (fused qkv, o, gate/up separate and fused, down; Mixtral's experts w1/w3 (fused w13 too),
  w2 and the router) over token counts M = 1, 2, 4, ..., 8192 (the dynamic-M buckets),
  bf16, N and K from the published model configs;
- ``moe-mixtral-8x7b``, ``moe-deepseek-v3``, ``moe-qwen3-30b-a3b``: the routed experts'
  grouped GEMMs (``grouped_mm``: fused gate/up, then down) of each model, bf16, weights
  K-contiguous (``nt``), over T = 256, 2048 and 16384 routed tokens (tokens x top-k), each
  under every token routing (``inductor``, ``uniform``, ``zipf``, ``sparse``). DeepSeek-V3
  is taken with its 256 experts sharded 8 ways (expert parallelism, 32 per GPU, as it is
  deployed): its full 256 x 7168 x 4096 weight tensor is past the kernel's int32 offsets;
- ``mx-llama3-8b``, ``mx-llama3-70b``: every distinct linear layer of the model as an MX
  ``scaled_mm`` (``a @ w.t()``), MXFP8 and MXFP4, M = 128, 512 and 4096;
  ``mx-dense-suite``: the dense suite's shapes whose M is a multiple of 128, MXFP8 and
  MXFP4. (Multiples of 128 because torch 2.13 traces MX ``_scaled_mm`` only with its E8M0
  scales counted as rows rounded up to 128 by K/32 rounded up to 4; at such M that count
  is the unswizzled (M, K/32) layout the MX template reads.) These run on a GPU with MX
  support (gfx950); elsewhere their compiles fail and the items are recorded failed;
- ``cpu-smoke``: three tiny fp32 linear layers (on CPU Inductor autotunes only
  frozen-weight linears, so the preset holds nothing a CPU would skip), about a minute on
  2 cores.
"""

from __future__ import annotations

import csv
import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..db import sweep_state
from ..db.open import Database
from ..problems.problem import Problem
from .items import ItemError, SweepItem, dedupe

M_BUCKETS = tuple(1 << i for i in range(14))  # 1 .. 8192

# (name, N, K) of each distinct linear layer, from the models' config.json
# (hidden, heads x head_dim, kv heads, intermediate).
LLAMA3_8B = (  # hidden 4096, 32 heads, 8 kv heads, head_dim 128, intermediate 14336
    ("qkv", (32 + 2 * 8) * 128, 4096), ("o", 4096, 4096), ("gate_up", 2 * 14336, 4096),
    ("gate/up", 14336, 4096), ("down", 4096, 14336))
LLAMA3_70B = (  # hidden 8192, 64 heads, 8 kv heads, head_dim 128, intermediate 28672
    ("qkv", (64 + 2 * 8) * 128, 8192), ("o", 8192, 8192), ("gate_up", 2 * 28672, 8192),
    ("gate/up", 28672, 8192), ("down", 8192, 28672))
MIXTRAL_8X7B = (  # hidden 4096, 32 heads, 8 kv heads, 8 experts of intermediate 14336
    ("qkv", (32 + 2 * 8) * 128, 4096), ("o", 4096, 4096), ("router", 8, 4096),
    ("expert.w13", 2 * 14336, 4096), ("expert.w1/w3", 14336, 4096),
    ("expert.w2", 4096, 14336))

# (name, groups, N, K, top_k) of each routed-expert grouped GEMM, from config.json:
# hidden, moe/expert intermediate size, experts (per GPU), experts per token.
MOE_MIXTRAL_8X7B = (("w13", 8, 2 * 14336, 4096, 2), ("w2", 8, 4096, 14336, 2))
MOE_DEEPSEEK_V3_EP8 = (("gate_up", 32, 2 * 2048, 7168, 8), ("down", 32, 7168, 2048, 8))
MOE_QWEN3_30B_A3B = (("gate_up", 128, 2 * 768, 2048, 8), ("down", 128, 2048, 768, 8))
MOE_TOKENS = (256, 2048, 16384)  # routed (token, expert) pairs: tokens x top-k
MX_TOKENS = (16, 256, 4096)  # validate_rocm's MX speed: decode, small and large prefill
# MX sweep items: token counts that are multiples of 128, where torch 2.13's trace-time
# check of _scaled_mm's E8M0 scale count (rows rounded up to 128, K/32 to 4) and the
# unswizzled (M, K/32) layout the MX template reads coincide
MX_SWEEP_TOKENS = (128, 512, 4096)

_DENSE_BF16_NT_FALLBACK: tuple[tuple[int, int, int], ...] = (
    *((m, 4096, 4096) for m in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)),
    (4096, 4096, 8192), (8192, 8192, 8192), (32, 14336, 4096), (16, 28672, 4096),
    (4096, 256, 4096))

CPU_SMOKE = (  # (op, M, N, K): tiny fp32 problems, ~15-20 s each on 2 cores
    ("linear", 16, 128, 64), ("linear", 32, 64, 128), ("linear", 8, 256, 64))


def _mnk(entry: Any) -> tuple[int, int, int]:
    """An (M, N, K) from a tuple, a mapping or an object with m/n/k attributes."""
    if isinstance(entry, dict):
        lowered = {str(k).lower(): v for k, v in entry.items()}
        return int(lowered["m"]), int(lowered["n"]), int(lowered["k"])
    if all(hasattr(entry, a) for a in ("m", "n", "k")):
        return int(entry.m), int(entry.n), int(entry.k)
    m, n, k = entry
    return int(m), int(n), int(k)


def dense_bf16_shapes() -> tuple[tuple[int, int, int], ...]:
    """The suite from ``flydsl_backend.offer.suites`` when that module exists, else our copy."""
    try:
        from ..flydsl_backend.offer.suites import DENSE_BF16_NT_SUITE
    except ImportError:
        return _DENSE_BF16_NT_FALLBACK
    return tuple(_mnk(entry) for entry in DENSE_BF16_NT_SUITE)


def _linear_items(layers: Iterable[tuple[str, int, int]]) -> list[SweepItem]:
    return dedupe([SweepItem.from_values({"op": "linear", "m": m, "n": n, "k": k,
                                          "dtype": "bfloat16", "layout": "nt"})
                   for _, n, k in layers for m in M_BUCKETS])


def _grouped_items(layers: Iterable[tuple[str, int, int, int, int]]) -> list[SweepItem]:
    from ..problems.routing import ROUTINGS

    return dedupe([SweepItem.from_values({"op": "grouped_mm", "m": t, "n": n, "k": k,
                                          "batch": groups, "dtype": "bfloat16",
                                          "layout": "nt", "routing": r})
                   for _, groups, n, k, _ in layers for t in MOE_TOKENS for r in ROUTINGS])


def _mx_items(layers: Iterable[tuple[str, int, int]], tokens: Iterable[int] = MX_SWEEP_TOKENS
              ) -> list[SweepItem]:
    return dedupe([SweepItem.from_values({"op": "scaled_mm", "m": m, "n": n, "k": k,
                                          "dtype": dtype, "layout": "nt"})
                   for _, n, k in layers for m in tokens for dtype in ("mxfp8", "mxfp4")])


def _preset_items(name: str) -> list[SweepItem]:
    if name == "dense-bf16-suite":
        return [SweepItem.from_values({"op": "mm", "m": m, "n": n, "k": k,
                                       "dtype": "bfloat16", "layout": "nt"})
                for m, n, k in dense_bf16_shapes()]
    if name == "llama3-8b":
        return _linear_items(LLAMA3_8B)
    if name == "llama3-70b":
        return _linear_items(LLAMA3_70B)
    if name == "mixtral-8x7b":
        return _linear_items(MIXTRAL_8X7B)
    if name == "moe-mixtral-8x7b":
        return _grouped_items(MOE_MIXTRAL_8X7B)
    if name == "moe-deepseek-v3":
        return _grouped_items(MOE_DEEPSEEK_V3_EP8)
    if name == "moe-qwen3-30b-a3b":
        return _grouped_items(MOE_QWEN3_30B_A3B)
    if name == "mx-llama3-8b":
        return _mx_items(LLAMA3_8B)
    if name == "mx-llama3-70b":
        return _mx_items(LLAMA3_70B)
    if name == "mx-dense-suite":  # the 15-shape suite where M is a multiple of 128
        return dedupe([SweepItem.from_values({"op": "scaled_mm", "m": m, "n": n, "k": k,
                                              "dtype": d, "layout": "nt"})
                       for m, n, k in dense_bf16_shapes() if m % 128 == 0 and k % 128 == 0
                       for d in ("mxfp8", "mxfp4")])
    if name == "cpu-smoke":
        return [SweepItem.from_values({"op": op, "m": m, "n": n, "k": k, "dtype": "float32",
                                       "layout": "nt"}) for op, m, n, k in CPU_SMOKE]
    raise ItemError(unknown_preset(name))


PRESETS = ("dense-bf16-suite", "llama3-8b", "llama3-70b", "mixtral-8x7b", "moe-mixtral-8x7b",
           "moe-deepseek-v3", "moe-qwen3-30b-a3b", "mx-llama3-8b", "mx-llama3-70b",
           "mx-dense-suite", "cpu-smoke")


def unknown_preset(name: str) -> str:
    """The error for a preset name that is not one: the close matches first (``cpu_smoke``
    for ``cpu-smoke``), then every preset."""
    close = difflib.get_close_matches(name.strip().lower().replace("_", "-"), PRESETS, n=2,
                                      cutoff=0.6)
    guess = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"--preset {name!r} is not a preset{guess}; presets: {', '.join(PRESETS)}"


def check_preset(name: str) -> str:
    """``name`` if it is a preset, else :class:`ItemError` (:func:`unknown_preset`)."""
    if name not in PRESETS:
        raise ItemError(unknown_preset(name))
    return name


def preset(name: str) -> list[SweepItem]:
    return dedupe(_preset_items(check_preset(name)))


# ---- CSV ------------------------------------------------------------------------------
CSV_COLUMNS = ("op", "m", "n", "k", "batch", "dtype", "layout", "routing")
CSV_REQUIRED = ("op", "m", "n", "k", "dtype", "layout")


def parse_shapes_csv(path: str | Path) -> list[SweepItem]:
    """Items from a CSV with the header ``op,M,N,K,batch,dtype,layout[,routing]`` (names
    are case-insensitive; ``batch`` may be absent or blank for 1; ``routing``, for
    ``grouped_mm`` rows, may be absent or blank for ``inductor``). Blank lines and lines
    starting with ``#`` are ignored. Any bad value raises :class:`ItemError` naming the
    file, line and field; duplicates are dropped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ItemError(f"cannot read {path}: {exc}") from exc
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ItemError(f"{path}: empty file; expected a header {','.join(CSV_COLUMNS)}")
    header_line, header_text = lines[0]
    header = [h.strip().lower() for h in next(csv.reader([header_text]))]
    unknown = [h for h in header if h not in CSV_COLUMNS]
    missing = [c for c in CSV_REQUIRED if c not in header]
    if unknown or missing or len(set(header)) != len(header):
        problems = []
        if unknown:
            problems.append(f"unknown column(s) {', '.join(unknown)}")
        if missing:
            problems.append(f"missing column(s) {', '.join(missing)}")
        if len(set(header)) != len(header):
            problems.append("repeated column names")
        raise ItemError(f"{path} line {header_line}: bad header ({'; '.join(problems)}); "
                        f"expected {','.join(CSV_COLUMNS)}")
    items = []
    for number, line in lines[1:]:
        values = next(csv.reader([line]))
        if len(values) != len(header):
            raise ItemError(f"{path} line {number}: {len(values)} fields, header has "
                            f"{len(header)}")
        try:
            items.append(SweepItem.from_values(dict(zip(header, values, strict=True))))
        except ItemError as exc:
            raise ItemError(f"{path} line {number}: {exc}") from None
    if not items:
        raise ItemError(f"{path}: no rows after the header")
    return dedupe(items)


def write_shapes_csv(items: Iterable[SweepItem], path: str | Path) -> None:
    """The items as CSV; the ``routing`` column only when an item has one (grouped)."""
    items = list(items)
    routed = any(item.routing for item in items)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["op", "M", "N", "K", "batch", "dtype", "layout"]
                        + (["routing"] if routed else []))
        for item in items:
            writer.writerow([item.op, item.m, item.n, item.k, item.batch, item.dtype,
                             item.layout] + ([item.routing] if routed else []))


# ---- misses ---------------------------------------------------------------------------
def item_from_problem(problem: Problem) -> SweepItem:
    """The sweep item that reproduces ``problem``. CPU linear ops (``packed_linear``,
    ``linear_unary``, ...) become ``op=linear``; addmm's alpha/beta are not kept. A
    dynamic problem with M its only symbolic size becomes a ``dynamic_m`` item (M at the
    key's hint)."""
    op = problem.op
    dynamic_m = _dynamic_m_only(problem)
    if "linear" in op:
        x, out = problem.inputs[0], problem.output
        m = 1
        for dim in out.size[:-1]:
            m *= dim
        return SweepItem.from_values({"op": "linear", "m": m, "n": out.size[-1],
                                      "k": x.size[-1], "dtype": x.dtype, "layout": "nt",
                                      "dynamic_m": dynamic_m})
    if op == "grouped_mm" and problem.groups and not dynamic_m:
        t, n, k = problem.mnk
        attrs = dict(problem.attrs)
        return SweepItem.from_values({"op": op, "m": t, "n": n, "k": k,
                                      "batch": problem.groups, "dtype": problem.dtype,
                                      "layout": problem.layout,
                                      "routing": attrs.get("routing", "inductor")})
    if op == "scaled_mm" and not dynamic_m and len(problem.inputs) == 4:
        a, b = problem.inputs[:2]
        mx = {("float8_e4m3fn", "float8_e4m3fn"): "mxfp8",
              ("float4_e2m1fn_x2", "float4_e2m1fn_x2"): "mxfp4"}.get((a.dtype, b.dtype))
        if mx is None or problem.output.dtype != "bfloat16":
            raise ItemError(f"no sweep dtype reproduces scaled_mm of {a.dtype} x {b.dtype} "
                            f"-> {problem.output.dtype} (sweeps take mxfp8 and mxfp4, bf16 out)")
        m, n, k = problem.mnk
        return SweepItem.from_values({"op": op, "m": m, "n": n, "k": k, "dtype": mx,
                                      "layout": "nt"})
    if op not in ("mm", "addmm", "bmm"):
        raise ItemError(f"no sweep op reproduces {op!r}")
    m, n, k = problem.mnk
    return SweepItem.from_values({"op": op, "m": m, "n": n, "k": k, "batch": problem.batch,
                                  "dtype": problem.dtype, "layout": problem.layout,
                                  "dynamic_m": dynamic_m})


def _dynamic_m_only(problem: Problem) -> bool:
    """True for a dynamic problem whose only symbolic size is M (the output's row dim):
    what a ``dynamic_m`` item reproduces. Other dynamic problems raise ItemError."""
    if not problem.dynamic:
        return False
    out_rank = len(problem.output.size)
    if out_rank < 2 or problem.symbolic[-1] != (out_rank - 2,):
        raise ItemError(f"symbolic {problem.symbolic_text()}: the sweep reproduces dynamic "
                        "problems whose only symbolic size is M")
    if set(problem.exprs) != {"a"}:
        raise ItemError(f"symbolic {problem.symbolic_text()}: the sweep marks one dim "
                        "dynamic, so it reproduces M = one symbol, not a product")
    for t, dims in zip(problem.inputs, problem.symbolic[:-1], strict=True):
        if dims and dims != (len(t.size) - 2,):
            raise ItemError(f"symbolic {problem.symbolic_text()}: the sweep reproduces "
                            "dynamic problems whose only symbolic size is M")
    return True


@dataclass
class MissItems:
    items: list[SweepItem]
    already_tuned: int  # misses whose problem has since got a winner for this device/sw
    unconvertible: list[str]  # "summary: reason"


def items_from_misses(db: Database, device_id: str | None = None,
                      software_id: str | None = None) -> MissItems:
    """Items for the problems in ``misses`` (recorded on any device) that have no winner
    for ``device_id``/``software_id`` (when given), most frequently missed first."""
    rows = sweep_state.missed_problems(db)
    items, unconvertible, tuned = [], [], 0
    for row in rows:
        if device_id and software_id and sweep_state.has_winner(
                db, device_id, software_id, row["problem_id"]):
            tuned += 1
            continue
        try:
            items.append(item_from_problem(Problem.from_spec(json.loads(row["spec"]))))
        except (ItemError, ValueError, KeyError, TypeError, IndexError) as exc:
            unconvertible.append(f"{row['summary']}: {exc}")
    return MissItems(items=dedupe(items), already_tuned=tuned, unconvertible=unconvertible)


def items_from_noisy(db: Database, device_id: str,
                     software_id: str) -> MissItems:
    """Items for the problems whose winner for this device and software is
    low-confidence (``sweep --remeasure-noisy``). A file of schema version 1 has none."""
    rows = sweep_state.noisy_problems(db, device_id, software_id)
    items, unconvertible = [], []
    for row in rows:
        try:
            items.append(item_from_problem(Problem.from_spec(json.loads(row["spec"]))))
        except (ItemError, ValueError, KeyError, TypeError, IndexError) as exc:
            unconvertible.append(f"{row['summary']}: {exc}")
    return MissItems(items=dedupe(items), already_tuned=0, unconvertible=unconvertible)
