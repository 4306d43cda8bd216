"""What ``inductor_flydsl.stats()`` returns: the process counters as a dict (JSON-ready,
``stats()["hits"]`` works) whose ``str()`` is a readable table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LISTS = ("decisions", "epilogues", "refusals")
CANDIDATE_WIDTH = 40  # long candidate ids are cut in the table (as_dict() has them whole)
PROBLEM_WIDTH = 48  # a gemm_epilogue problem names its epilogue: long
EPILOGUE_WIDTH = 24  # an epilogue's ops
SOURCE_WIDTH = 40  # where a decision came from (a DB path)


def _cell(value: Any, width: int | None = None) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, list | tuple):
        text = ", ".join(str(v) for v in value) or "none"
    else:
        text = str(value)
    if width is not None and len(text) > width:
        text = text[: width - 3] + "..."
    return text


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                 indent: str = "  ") -> list[str]:
    """Plain-text columns, left-aligned, one line per row."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
              for row in rows]
    return [line.rstrip() for line in lines]


class StatsSnapshot(dict[str, Any]):
    """A copy of the counters at one moment. ``as_dict()`` is a plain dict (for JSON);
    ``str()`` and ``repr()`` are tables."""

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self.items()}

    def __str__(self) -> str:
        counters = [(k, str(v)) for k, v in self.items() if k not in LISTS]
        lines = ["inductor_flydsl stats (this process)"]
        lines += format_table(("counter", "value"), counters)
        decisions = self.get("decisions", [])
        lines += ["", f"decisions ({len(decisions)}): the kernel chosen per GEMM and where "
                      "the choice came from"]
        if decisions:
            lines += format_table(("problem", "backend", "candidate", "source"), [
                (_cell(d.get("problem"), PROBLEM_WIDTH), _cell(d.get("backend")),
                 _cell(d.get("candidate_id"), CANDIDATE_WIDTH),
                 _cell(d.get("source"), SOURCE_WIDTH))
                for d in decisions])
        epilogues = self.get("epilogues", [])
        lines += ["", f"epilogues ({len(epilogues)}): what the scheduler ran after each GEMM"]
        if epilogues:
            lines += format_table(
                ("problem", "epilogue", "fused", "backend", "candidate", "served", "record"),
                [(_cell(e.get("problem"), PROBLEM_WIDTH), _cell(e.get("epilogue"), EPILOGUE_WIDTH),
                  _cell(e.get("fused")),
                  _cell(e.get("backend")), _cell(e.get("candidate_id"), CANDIDATE_WIDTH),
                  _cell(e.get("served")), _cell(e.get("record"))) for e in epilogues])
        refusals = self.get("refusals", [])
        lines += ["", f"refusals ({len(refusals)}): problems neither looked up nor recorded"]
        if refusals:
            lines += format_table(("op", "reason"),
                                  [(_cell(r.get("op")), _cell(r.get("reason")))
                                   for r in refusals])
        return "\n".join(lines)

    __repr__ = __str__
