"""Token routings for grouped (mixture-of-experts) GEMMs, and the rule that picks one
winner over several.

A grouped GEMM's speed depends on how its T tokens fall into its G groups, which only the
router knows at run time. Inductor benchmarks on one synthetic split
(``torch._inductor.kernel.mm_grouped.create_offsets``): near-uniform, group ``i`` ends at
``round((i + 1) * T / G / a) * a`` with ``a`` = 16 bytes of elements, the last at ``T``.
That is the ``inductor`` routing here, and the one a plain compile records. The sweep can
also measure (through the same Inductor autotune, with its benchmark offsets replaced):

* ``uniform``: every token picks an expert uniformly at random (multinomial);
* ``zipf``: expert ``r`` (by popularity) is picked with probability proportional to
  ``1 / (r + 1) ** 1.2`` (a skewed router; the busiest expert gets several times its
  share);
* ``sparse``: a quarter of the experts (at least one) get no token, the others uniform.

Each routing's results are recorded under the problem's key plus ``routing=<name>``.

The winner served for a problem measured under several routings is the candidate with the
smallest worst-case slowdown: for each routing, its time over that routing's fastest
candidate (among those timed under every routing); its score is the largest of these;
ties go to the smaller total time. This is
"the best worst case" made scale-free: an absolute worst-case time would look only at the
most skewed routing (its times are the largest), and ignore a candidate that is far behind
on the others. Only candidates with a usable time under every recorded routing qualify.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

ROUTINGS = ("inductor", "uniform", "zipf", "sparse")
MEASURED_ROUTINGS = ROUTINGS[1:]  # recorded under ``routing=<name>``; inductor: plain key
ZIPF_EXPONENT = 1.2
SPARSE_EMPTY_FRACTION = 0.25


def group_sizes(routing: str, tokens: int, groups: int, *, seed: int = 0,
                alignment: int = 8) -> list[int]:
    """Rows per group (they sum to ``tokens``) under ``routing``; deterministic in
    ``seed``. ``alignment`` is the ``inductor`` routing's rounding (16 bytes of the
    operand dtype, as Inductor's ``create_offsets``)."""
    if routing not in ROUTINGS:
        raise ValueError(f"unknown routing {routing!r}; use one of {', '.join(ROUTINGS)}")
    if tokens < 0 or groups < 1:
        raise ValueError(f"need tokens >= 0 and groups >= 1, got {tokens} and {groups}")
    import torch

    if routing == "inductor":  # Inductor's create_offsets, in its float32 arithmetic
        ends = torch.arange(1, groups + 1, dtype=torch.float32) * (tokens / groups)
        ends[:-1] = (ends[:-1] / alignment).round() * alignment
        ends[-1] = tokens
        bounds = [0, *ends.to(torch.int64).tolist()]
        return [e - s for s, e in itertools.pairwise(bounds)]
    gen = torch.Generator().manual_seed(seed)
    weights = torch.ones(groups, dtype=torch.float64)
    if routing == "zipf":
        ranks = torch.randperm(groups, generator=gen).to(torch.float64)
        weights = 1.0 / (ranks + 1.0) ** ZIPF_EXPONENT
    elif routing == "sparse":
        empty = max(1, int(groups * SPARSE_EMPTY_FRACTION)) if groups > 1 else 0
        weights[torch.randperm(groups, generator=gen)[:empty]] = 0.0
    if tokens == 0:
        return [0] * groups
    picks = torch.multinomial(weights / weights.sum(), tokens, replacement=True,
                              generator=gen)
    return torch.bincount(picks, minlength=groups).tolist()


def offsets(sizes: list[int]):
    """int32 group end offsets (``torch._grouped_mm``'s ``offs``) of ``sizes``."""
    import torch

    return torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32)


def worst_case_winner(times: Mapping[str, Mapping[str, float]]
                      ) -> tuple[str, float, dict[str, float]] | None:
    """``(candidate, worst slowdown, slowdown per routing)`` of the candidate with the
    best worst case over ``times`` (routing -> candidate -> ms; see the module doc), or
    None when no candidate has a usable time under every routing."""
    usable = {r: {c: t for c, t in per.items() if t is not None and math.isfinite(t) and t > 0}
              for r, per in times.items()}
    usable = {r: per for r, per in usable.items() if per}
    if not usable:
        return None
    common = set.intersection(*(set(per) for per in usable.values()))
    if not common:
        return None
    # the reference of each routing: its fastest candidate among those timed everywhere
    best = {r: min(per[c] for c in common) for r, per in usable.items()}

    def score(candidate: str) -> tuple[float, float, str]:
        slowdowns = [usable[r][candidate] / best[r] for r in usable]
        return max(slowdowns), sum(usable[r][candidate] for r in usable), candidate

    winner = min(common, key=score)
    per_routing = {r: round(usable[r][winner] / best[r], 4) for r in sorted(usable)}
    return winner, score(winner)[0], per_routing


# ---- the routing a sweep measures under (set around one compile) -------------------
_active: str | None = None
GROUPED_OP = "grouped_mm"


def set_active(routing: str | None) -> None:
    """Benchmark grouped GEMMs under ``routing`` (None or ``inductor``: Inductor's own
    offsets, the plain key) in this process's following compiles."""
    global _active
    if routing is not None and routing not in ROUTINGS:
        raise ValueError(f"unknown routing {routing!r}; use one of {', '.join(ROUTINGS)}")
    _active = None if routing in (None, "inductor") else routing


def active() -> str | None:
    return _active


def routed(problem, routing: str):
    """``problem`` keyed for one measured routing: its attrs plus ``routing=<name>``."""
    import dataclasses

    attrs = tuple(sorted({**dict(problem.attrs), "routing": routing}.items()))
    return dataclasses.replace(problem, attrs=attrs)


def offs_index(name: str, input_nodes) -> int | None:
    """Where the ``offs`` input of a routable grouped GEMM selection is: 2-D tokens A
    (T, K) times 3-D weights B (G, K, N) with int32 group ends, static sizes (the
    routings split T rows). None for anything else (3-D x 3-D, K-grouped 2-D x 2-D,
    3-D x 2-D, symbolic sizes, not a grouped GEMM)."""
    if name != GROUPED_OP or len(input_nodes) < 3:
        return None
    try:
        import torch

        a, b, offs = input_nodes[0], input_nodes[1], input_nodes[-1]
        if (offs.get_dtype() != torch.int32 or len(a.get_size()) != 2
                or len(b.get_size()) != 3):
            return None
        int(a.get_size()[0]), int(offs.get_size()[0])  # static sizes only
    except (AttributeError, NotImplementedError, TypeError, ValueError):
        return None
    return len(input_nodes) - 1


def benchmark_offsets_fn(routing: str, tokens: int, groups: int):
    """An Inductor ``input_gen_fns`` entry: the routing's offsets on the node's device."""

    def make(node):
        return offsets(group_sizes(routing, tokens, groups)).to(node.get_device())

    return make
