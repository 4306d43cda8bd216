"""Run the grouped GEMM template's compiled ISA on ragged problems and compare with a
per-group float64 reference.

The kernel arguments come from the template's own host code (``launcher_args`` and
``kernel_launch``), as on a real launch. Each scenario is a list of group sizes; the
scenarios of :func:`grouped_scenarios` cover what a grouped kernel gets wrong: empty
groups, one-token groups, a group larger than all others together, a single group,
and N tails.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..problems.routing import offsets
from .errors import EmulatorError
from .gemm import TORCH_DTYPES, judge, note_run, run_kernel
from .machine import DEFAULT_BUDGET


@dataclass
class GroupedEmulation:
    ok: bool
    scenario: str
    dtype: str
    layout: str
    group_rows: list[int]
    n: int
    k: int
    max_abs_err: float | None = None
    worst: float | None = None
    races: list[str] = field(default_factory=list)
    hazards: list[str] = field(default_factory=list)
    error: str | None = None
    instructions: int = 0
    workgroups: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def grouped_scenarios(config: Any) -> dict[str, tuple[list[int], int, int]]:
    """Named ``(group rows, N, K)`` problems for one config: every one has an N tail
    (N = tile_n + 8) and K = ``stages + 2`` K steps (the whole pipeline runs)."""
    tm = config.tile_m
    n = config.tile_n + 8
    k = config.tile_k * (config.stages + 2)
    return {
        # empty first, middle and last groups next to a full tile plus a tail
        "empty groups": ([0, tm + 3, 0, 5, 0], n, k),
        "one-token groups": ([1, 1, 2, 1], n, k),
        # one group larger than the three others together (a full tile and a tail)
        "dominant group": ([2, tm + 7, 1, 3], n, k),
        "one group": ([tm + 5], n, k),
    }


def make_grouped_operands(dtype: str, layout: str, group_rows: list[int], n: int, k: int, *,
                          seed: int = 0, spare_rows: int = 3):
    """Random ``(a, b, offs, out)`` CPU tensors; ``spare_rows`` rows past the last group
    end show whether the kernel writes outside the groups (they must stay NaN)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    tdtype = getattr(torch, TORCH_DTYPES[dtype])
    groups = len(group_rows)
    total = sum(group_rows) + spare_rows
    a = torch.randn(total, k, generator=gen).to(tdtype)
    if layout[1] == "t":
        b = torch.randn(groups, n, k, generator=gen).to(tdtype).transpose(-1, -2)
    else:
        b = torch.randn(groups, k, n, generator=gen).to(tdtype)
    offs = offsets(group_rows)
    out = torch.full((total, n), float("nan"), dtype=tdtype)
    return a, b, offs, out


def emulate_grouped(isa_text: str, template: Any, config: Any, *, dtype: str, layout: str,
                    group_rows: list[int], n: int, k: int, scenario: str = "", seed: int = 0,
                    spare_rows: int = 3, offs: list[int] | None = None,
                    budget: int = DEFAULT_BUDGET, hazards: str = "error") -> GroupedEmulation:
    """Emulate the grouped kernel compiled to ``isa_text`` on one ragged problem.

    ``spare_rows`` tokens follow the last group (0: the groups end at T). ``offs``
    replaces the group end offsets the kernel gets (e.g. malformed ones: the reference
    clamps them as the kernel must). ``ok`` needs every group's rows correct, the rows
    past the last group untouched, no LDS race and no hazard; an access outside the
    operands fails the run.
    """
    import torch

    from ..numerics.gemm import grouped_reference
    from ..numerics.tolerances import check_close

    result = GroupedEmulation(ok=False, scenario=scenario, dtype=dtype, layout=layout,
                              group_rows=list(group_rows), n=n, k=k)
    start = time.perf_counter()
    try:
        a, b, ends, out = make_grouped_operands(dtype, layout, group_rows, n, k, seed=seed,
                                                spare_rows=spare_rows)
        if offs is not None:
            ends = torch.tensor(offs, dtype=torch.int32)
        args = template.launcher_args(a, b, ends, out)
        report, bindings = run_kernel(isa_text, *template.kernel_launch(config, args),
                                      budget=budget, hazards=hazards)
        note_run(result, report)
        got = bindings.read_back(out)
        used = min(max(int(ends.max()), 0), a.shape[0]) if len(ends) else 0
        expected = grouped_reference(a, b, ends)
        rms_a = float(a.double().pow(2).mean().sqrt())
        rms_b = float(b.double().pow(2).mean().sqrt())
        close = check_close(got[:used], expected[:used], dtype, k=k,
                            scale=max(rms_a * rms_b, 1e-30))
        untouched = bool(torch.isnan(got[used:].float()).all())
        judge(result, close,
              None if untouched else "the kernel wrote rows past the last group's end")
    except EmulatorError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = round(time.perf_counter() - start, 3)
    return result


def emulate_grouped_scenarios(isa_text: str, template: Any, config: Any, *, dtype: str,
                              layout: str, seed: int = 0) -> dict[str, Any]:
    """Every :func:`grouped_scenarios` problem; ``ok`` when all are correct."""
    runs = []
    for name, (rows, n, k) in grouped_scenarios(config).items():
        runs.append(emulate_grouped(isa_text, template, config, dtype=dtype, layout=layout,
                                    group_rows=rows, n=n, k=k, scenario=name, seed=seed))
    failed = [r for r in runs if not r.ok]
    return {
        "ok": not failed,
        "error": f"{failed[0].scenario}: {failed[0].error}" if failed else None,
        "scenarios": [r.to_json() for r in runs],
        "instructions": sum(r.instructions for r in runs),
        "workgroups": sum(r.workgroups for r in runs),
        "seconds": round(sum(r.seconds for r in runs), 3),
        "max_abs_err": max((r.max_abs_err or 0.0) for r in runs),
    }
