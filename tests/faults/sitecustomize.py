"""Faults in sweep workers, for tests/sweep: a child whose PYTHONPATH starts with this
directory imports this module at start-up (Python's ``site``). In a sweep worker process
only (``inductor_flydsl/sweep/worker.py``):

- ``INDUCTOR_FLYDSL_SWEEP_TEST_CRASH`` = an item's id or op: the worker aborts when it
  reads that item (exit 134, as a GPU fault does);
- ``INDUCTOR_FLYDSL_SWEEP_TEST_HANG`` = an item's id or op: it sleeps forever there (a
  hang, for ``--timeout-s``);
- ``INDUCTOR_FLYDSL_SWEEP_TEST_BATCH_FAIL`` set: every multi-item batch's compile raises.

And in any process (every child inherits PYTHONPATH):

- ``INDUCTOR_FLYDSL_TEST_FORCE_ROCM`` = an arch (``gfx950``): the provider's runtime
  check passes as on a ROCm GPU of that arch, so ``enable()`` starts the build pool (its
  processes are what tests/flydsl/test_worker_processes.py counts).

The product has no hook for this: the items module and the batch module are patched as
they are imported (a meta-path finder wrapping their loaders).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time
from pathlib import Path
from typing import Any

ENV_CRASH = "INDUCTOR_FLYDSL_SWEEP_TEST_CRASH"
ENV_HANG = "INDUCTOR_FLYDSL_SWEEP_TEST_HANG"
ENV_BATCH_FAIL = "INDUCTOR_FLYDSL_SWEEP_TEST_BATCH_FAIL"
ENV_FORCE_ROCM = "INDUCTOR_FLYDSL_TEST_FORCE_ROCM"
ITEMS, BATCH = "inductor_flydsl.sweep.items", "inductor_flydsl.sweep.batch"
PROVIDER = "inductor_flydsl.flydsl_backend.autotune.provider"


def _in_worker() -> bool:
    return Path(sys.argv[0]).parts[-2:] == ("sweep", "worker.py") if sys.argv else False


def _fault(item: Any) -> None:
    targets = {item.item_id, item.op}
    if os.environ.get(ENV_CRASH) in targets:
        sys.stderr.write(f"{ENV_CRASH}: aborting on purpose (test fault)\n")
        sys.stderr.flush()
        os.abort()
    if os.environ.get(ENV_HANG) in targets:
        sys.stderr.write(f"{ENV_HANG}: hanging on purpose (test fault)\n")
        sys.stderr.flush()
        while True:
            time.sleep(60)


def _patch_items(module: Any) -> None:
    read = module.SweepItem.from_values.__func__

    def from_values(cls: Any, values: Any) -> Any:
        item = read(cls, values)
        if _in_worker():
            _fault(item)
        return item

    module.SweepItem.from_values = classmethod(from_values)


def _patch_batch(module: Any) -> None:
    build = module.batch_module

    def batch_module(models: Any) -> Any:
        if os.environ.get(ENV_BATCH_FAIL) and _in_worker():
            raise RuntimeError(f"{ENV_BATCH_FAIL}: a batch of {len(models)} fails "
                               "(test fault)")
        return build(models)

    module.batch_module = batch_module


def _patch_provider(module: Any) -> None:
    arch = os.environ.get(ENV_FORCE_ROCM)
    if arch:
        module.runtime_target = lambda device: (arch, [])


PATCHES = {ITEMS: _patch_items, BATCH: _patch_batch, PROVIDER: _patch_provider}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, patch: Any) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, PATCHES[name])
        return spec


if any(os.environ.get(name) for name in (ENV_CRASH, ENV_HANG, ENV_BATCH_FAIL, ENV_FORCE_ROCM)):
    sys.meta_path.insert(0, _Finder())
