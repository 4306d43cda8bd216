"""A persistent sweep worker's one-time set-up, started before its first batch and kept
off the CPUs while Inductor times a candidate (:func:`warm_up`).

On CPU: Inductor's vector-ISA pick, probing only the ISA it picks
(:func:`_first_valid_isa_only`), and its precompiled C++ header, built in threads; its
CPU benchmarker waits for the probe and stops the header's compilers while it times
(:func:`_background_quiet`). On every device: Inductor's compile stack and the plugin's
hooks imported ahead. Both replacements are declared in ``inductor/adapter/patches.py`` and put
back by :func:`finish`, at the worker's end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any


def _first_valid_isa_only() -> None:
    """Make Inductor's list of valid vector ISAs stop at the first valid one.

    ``pick_vec_isa`` returns the first ISA, in Inductor's priority order, that the CPU
    reports and whose test build loads (a C++ compile, ~2 s, and a dlopen in a child
    Python); but Inductor test-builds every ISA the CPU reports before it picks (3 on an
    AVX-512 VNNI machine, ~5 s one after another). With ``ATEN_CPU_CAPABILITY`` and
    ``cpp.simdlen`` unset, only that first one counts, and the list stops there; the pick
    is the same. Otherwise (or off Linux x86-64) Inductor's own list is used."""
    import functools
    import platform

    from ..inductor.adapter import internals, patches

    inductor_config, cpu_vec_isa = internals.config, internals.cpu_vec_isa
    if patches.is_applied("cpu_vec_isa", "valid_vec_isa_list"):
        return
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return
    original = cpu_vec_isa.valid_vec_isa_list

    @functools.cache
    def first_valid() -> list[Any]:
        flags = cpu_vec_isa.x86_isa_checker()
        for isa in cpu_vec_isa.supported_vec_isa_list:
            if all(flag in flags for flag in str(isa).split()) and isa:
                return [isa]
        return []

    def valid_vec_isa_list() -> list[Any]:
        if os.environ.get("ATEN_CPU_CAPABILITY") or inductor_config.cpp.simdlen is not None:
            return original()
        return first_valid()

    valid_vec_isa_list.cache_clear = first_valid.cache_clear  # type: ignore[attr-defined]
    patches.apply("cpu_vec_isa", "valid_vec_isa_list", valid_vec_isa_list)


_background: list[Any] = []  # warm-up threads a benchmark must wait for
PCH_WARM_UP_KERNEL = 'extern "C" void kernel(long n) { (void)n; }\n'


def _build_cpu_pch() -> None:
    """Build Inductor's precompiled CPU kernel header (cpp_prefix.h) by compiling an
    empty kernel through the same code cache and flags as the batches' kernels; a compile
    that needs the header meanwhile waits on Inductor's file lock instead of repeating
    the build."""
    from ..inductor.adapter.internals import CppPythonBindingsCodeCache

    CppPythonBindingsCodeCache.load_pybinding(["long"], PCH_WARM_UP_KERNEL)


def _wait_for_background() -> None:
    while _background:
        _background.pop().join()


COMPILER_NAMES = {"g++", "gcc", "c++", "cc", "cc1plus", "cc1", "as", "ld", "collect2",
                  "clang", "clang++"}
_pausable: list[Any] = []  # background threads whose compilers stop during benchmarks


def _compiler_descendants() -> list[int]:
    """This process's descendant compiler processes (g++ and what it runs), from /proc."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
        names[int(entry)] = name
    found, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        if names.get(pid) in COMPILER_NAMES:
            found.append(pid)
        todo += children.get(pid, [])
    return found


@contextlib.contextmanager
def _background_quiet() -> Any:
    """While Inductor times a candidate: the warm-up threads that must finish first have,
    and the compilers of the pausable ones (the precompiled header) are stopped. Only
    background work compiles then: the benchmarking thread is timing, and Inductor's
    kernel compiles come after lowering."""
    _wait_for_background()
    stopped: list[int] = []
    if any(t.is_alive() for t in _pausable):
        # again until a scan finds nothing new: a compiler driver may have started its
        # cc1plus between the scan and its own stop
        for _ in range(5):
            new = [pid for pid in _compiler_descendants() if pid not in stopped]
            if not new:
                break
            for pid in new:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
    try:
        yield
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGCONT)


def _gate_cpu_benchmarks() -> bool:
    """Make Inductor's CPU benchmarker keep the warm-up's background work off the CPUs
    while it times a candidate (:func:`_background_quiet`: a g++ on the other core would
    disturb the timings); False when it cannot be wrapped here (then the caller waits for
    the background work up front)."""
    from ..inductor.adapter import internals, patches

    if patches.is_applied("benchmarker", "benchmark_cpu"):
        return True
    try:
        benchmarker = internals.benchmarker
    except (ImportError, AttributeError):
        return False
    original = getattr(benchmarker, "benchmark_cpu", None)
    if not callable(original):
        return False

    def benchmark_cpu(*args: Any, **kwargs: Any) -> Any:
        with _background_quiet():
            return original(*args, **kwargs)

    return patches.apply("benchmarker", "benchmark_cpu", benchmark_cpu) is not None


def _in_background(step: Any, *, pausable: bool = False) -> None:
    """Run ``step`` in a thread that Inductor's CPU benchmarks wait for, or (``pausable``)
    whose compilers they stop while timing (:func:`_gate_cpu_benchmarks`; without the
    gate, wait for it now)."""
    import threading

    thread = threading.Thread(target=step, daemon=True, name="warm-up")
    if not _gate_cpu_benchmarks():
        thread.run()
        return
    thread.start()
    (_pausable if pausable else _background).append(thread)


def _cpu_set_up() -> None:
    """Inductor's vector-ISA pick (probing only the ISA it picks:
    :func:`_first_valid_isa_only`), then the precompiled header in a pausable thread
    (Linux, unless the user turned precompiled headers off)."""
    from ..inductor.adapter import internals

    inductor_config, cpu_vec_isa = internals.config, internals.cpu_vec_isa
    _first_valid_isa_only()
    cpu_vec_isa.pick_vec_isa()
    if sys.platform == "linux" and inductor_config.cpp_cache_precompile_headers:
        _in_background(_build_cpu_pch, pausable=True)


def warm_up(device: str) -> None:
    """Start Inductor's one-time CPU set-up in the background: the vector-ISA probe (a
    C++ compile and a dlopen per ISA tried, stopping at the first valid one:
    :func:`_first_valid_isa_only`) runs while this thread imports the compile stack and
    the plugin, and then while the first batch is traced and lowered (Inductor's own
    ``pick_vec_isa`` there waits for the probe's file locks and finds its builds); then
    the precompiled C++ header (cpp_prefix.h, ~4 s of g++; each kernel then compiles in
    about half the time) is built while the batch is lowered and its C++
    candidates are built, so its final kernels find it ready. Inductor's CPU benchmarker
    waits for the probe and stops the header's compiler while it times anything."""
    if device == "cpu":
        _in_background(_cpu_set_up)
    import inductor_flydsl.inductor.hooks  # noqa: F401 (imports the selector)
    from inductor_flydsl.inductor.adapter import internals

    internals.compile_fx  # noqa: B018 (imports Inductor's compile stack ahead)


def finish() -> list[str]:
    """The warm-up's end (the worker's last batch done): wait for its background work,
    then put back what it replaced (Inductor's ``benchmark_cpu`` and
    ``valid_vec_isa_list``, ``inductor/adapter/patches.py``). Returns what was put back."""
    from ..inductor.adapter import patches

    _wait_for_background()
    while _pausable:
        _pausable.pop().join()
    return patches.restore_all(patches.WARM_UP)
