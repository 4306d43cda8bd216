"""What ``inductor-flydsl sweep`` shows while it runs (stderr): a progress bar, a line per
item as it starts and as it finishes (named as the tuning DB names its problems), and a
live status line while it waits for a quiet machine (``--on-busy wait|backoff``).

On a terminal the bar and the status line are live; elsewhere (a log file, CI) the same
facts come as plain lines: the wait when it starts, every ``WAIT_REPEAT_S`` while it
lasts, and when it ends. Nothing is cut mid-word.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from ..sweep.busy import BusyWait
from ..sweep.items import SweepItem, db_name
from ..sweep.runner import DONE, FAILED, INTERRUPTED, SKIPPED, ItemOutcome, SweepSummary
from .output import err_console

STATUS_STYLE = {DONE: "green", FAILED: "red", SKIPPED: "yellow", INTERRUPTED: "magenta"}
WAIT_REPEAT_S = 60.0  # plain output: repeat the waiting line this often
NOTE_WIDTH = 110
SKIP_HINT = ("to skip the wait: Ctrl-C, then run again with --resume --on-busy record "
             "(runs at once, recorded low-confidence)")


def clip(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters, cut at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[: width - 4]
    space = cut.rfind(" ")
    if space > width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + " ..."


def wait_text(wait: BusyWait) -> str:
    """The status line of an item waiting for a quiet machine: what it waits for, how long
    so far and at most, and how to skip."""
    held = ("waiting for a quiet machine before the next item" if wait.policy == "wait"
            else "busy machine: items put back in the queue (backoff)")
    return (f"{held}: {clip(wait.reason, NOTE_WIDTH)}; waited {wait.waited_s:.0f} s of at "
            f"most {wait.max_wait_s:.0f} s (then the item runs anyway, recorded "
            f"low-confidence), next check in {wait.next_check_s:.0f} s; {SKIP_HINT}")


def item_name(item: SweepItem, device_kind: str, problems: Iterable[str] = ()) -> str:
    """The item as the DB names its problem (e.g. ``packed_linear float32 16x128x64 nn``
    for a CPU ``linear`` item): the names its worker recorded (``problems``), else the
    name the DB will give it (``items.db_name``), else, where the item alone does not
    tell, the item as it was given."""
    names = list(problems)
    return ", ".join(names) if names else db_name(item, device_kind) or item.summary()


class _StatusProgress(Progress):
    """A progress bar with a status line under it (empty: none)."""

    status: str = ""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        if self.status:
            yield Text(self.status, style="yellow")  # wraps at word boundaries


class SweepProgress:
    def __init__(self, enabled: bool, device_kind: str, live: bool | None = None,
                 bar: bool = True) -> None:
        """``enabled``: the header and each item's started and finished lines; ``bar``
        (``--no-progress`` turns it off): the live bar and status line, on a terminal."""
        self.enabled = enabled
        self.device_kind = device_kind  # names items as the DB names them (item_name)
        self.live = enabled and bar and (err_console.is_terminal if live is None else live)
        # live: a wrapping console (a soft-wrapping one, like err_console, would crop the
        # live display to one line per renderable); plain: err_console, lines never cut
        console = Console(stderr=True, highlight=False) if self.live else err_console
        self.progress = _StatusProgress(
            SpinnerColumn(), TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
            TextColumn("[green]{task.fields[done]} done[/] [red]{task.fields[failed]} "
                       "failed[/] [yellow]{task.fields[skipped]} skipped[/]"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=console, disable=not self.live)
        self.task = None
        self.counts = {DONE: 0, FAILED: 0, SKIPPED: 0}
        self._wait_since: float | None = None
        self._wait_printed = 0.0

    def _line(self, text: str) -> None:
        if self.enabled:
            self.progress.console.print(text)

    def plan(self, summary: SweepSummary, todo: list[SweepItem]) -> None:
        if summary.resumed_skip:
            err_console.print(f"resume: {summary.resumed_skip} of {summary.items_total} "
                              "items already finished")
        self._line(f"sweep: {len(todo)} items into {summary.db}")
        self.progress.start()
        self.task = self.progress.add_task("sweep", total=len(todo), **self.counts)

    def event(self, kind: str, outcome: ItemOutcome | None) -> None:
        if outcome is None:
            return
        where = f" [GPU {outcome.slot}]" if outcome.slot not in ("cpu", "") else ""
        if kind == "started":
            name = escape(item_name(outcome.item, self.device_kind))
            self._line(f"[dim]{'started':>11} {name}{where}[/dim]")
            return
        if kind != "finished" or self.task is None:
            return
        if outcome.status in self.counts:
            self.counts[outcome.status] += 1
        self.progress.update(self.task, advance=1, **self.counts)
        style = STATUS_STYLE.get(outcome.status, "white")
        note = outcome.source or clip((outcome.error.strip().splitlines() or [""])[0],
                                      NOTE_WIDTH)
        if outcome.busy:
            note += f" [yellow](noisy: {clip(outcome.busy, NOTE_WIDTH)})[/yellow]"
        name = escape(item_name(outcome.item, self.device_kind, outcome.problems))
        self._line(f"[{style}]{outcome.status:>11}[/] {name}{where} "
                   f"{outcome.seconds:.1f} s  {note}")

    def wait(self, wait: BusyWait | None) -> None:
        """The busy gate's report: an item waits (a status line), or no longer (None)."""
        now = time.monotonic()
        if wait is None:
            if self._wait_since is not None:
                self.progress.status = ""
                self.progress.refresh()
                if not self.live:
                    err_console.print(f"wait over after {now - self._wait_since:.0f} s "
                                      "(machine quiet, or waited the most): sweep goes on")
            self._wait_since = None
            return
        text = wait_text(wait)
        if self.live:
            self.progress.status = text
            self.progress.refresh()
        elif self._wait_since is None or now - self._wait_printed >= WAIT_REPEAT_S:
            err_console.print(text, markup=False)  # even with --json/--no-progress
            self._wait_printed = now
        if self._wait_since is None:
            self._wait_since = now

    def stop(self) -> None:
        self.progress.stop()
