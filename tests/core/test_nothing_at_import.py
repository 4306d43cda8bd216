"""``INDUCTOR_FLYDSL=1`` and ``import torch`` start no process and ask no device (issue 50,
point 3): the entry point enables the plugin in every process that imports torch
(Inductor's compile workers, DataLoader workers, vLLM's processes), and a CUDA/HIP
runtime initialized before a fork is broken in the forked children.

Run for real: a fresh interpreter with the plugin enabled by the entry point inside its
``import torch``. What the plugin calls is observed, not assumed: a meta-path finder
turns a profiler on (``sys.setprofile``, every thread) when ``inductor_flydsl`` starts
importing, so each Python call of the plugin's import and ``enable()``, and everything
they call, is seen: a device query is a call of ``torch.cuda``'s queries (or a
``torch._C._cuda_*`` function), of the plugin's own runtime probes (``eligibility``,
``provider``, ``provenance.device``), or a ``dlopen`` of the HIP runtime (Python's
``ctypes.dlopen`` audit event). Then the child lists its own child processes from
``/proc``.

Two set-ups, each where the code before the fix did what the issue describes:
``rocm7-torch``: torch looks like a ROCm 7 build to the plugin (``torch.version.hip``
set as ``torch.version`` is imported), so its runtime probe went on to
``torch.cuda.is_available()``; ``runtime-forced``: the provider's runtime check passes
as on a gfx950 (tests/faults/sitecustomize.py), where ``enable()`` started the build
server. Before the fix, Inductor's selector object was also made at ``enable()``, which
called ``torch.cuda.current_device()`` (Inductor's ``CacheBase.get_system``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import isolated_env, run_for_result

REPO = Path(__file__).resolve().parents[2]
FAULTS = REPO / "tests" / "faults"

CHILD = r"""
import importlib.abc, importlib.machinery, json, os, sys, threading, time

QUERIES = {"is_available", "current_device", "device_count", "get_device_properties",
           "_lazy_init", "init", "runtime_reasons", "runtime_target", "rocm_arch",
           "hip_runtime_loadable", "describe_device", "_describe_gpu"}
seen = {"calls": [], "enable": 0}


def profile(frame, event, arg):
    if event == "call":
        code = frame.f_code
        where = code.co_filename.replace(os.sep, "/")
        if code.co_name == "enable" and where.endswith("inductor_flydsl/__init__.py"):
            seen["enable"] += 1
        elif code.co_name in QUERIES and ("/torch/cuda/" in where
                                           or "/inductor_flydsl/" in where):
            seen["calls"].append(f"{where.rsplit('/', 2)[-2]}.{code.co_name}")
    elif event == "c_call" and getattr(arg, "__name__", "").startswith("_cuda_"):
        seen["calls"].append(f"torch._C.{arg.__name__}")


def audit(event, args):
    if event == "ctypes.dlopen" and args and "hip" in str(args[0]):
        seen["calls"].append(f"dlopen {args[0]}")


class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "inductor_flydsl":  # the entry point, inside `import torch`
            threading.setprofile(profile)
            sys.setprofile(profile)
        elif name == "torch.version" and os.environ.get("LOOK_LIKE_ROCM7"):
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                module.hip = "7.0.0"  # a ROCm 7 build, as far as the plugin can tell

            spec.loader.exec_module = exec_module
            return spec
        return None


sys.addaudithook(audit)
sys.meta_path.insert(0, Watch())
import torch  # the entry point enables the plugin here (INDUCTOR_FLYDSL=1)

sys.setprofile(None)
threading.setprofile(None)
import inductor_flydsl
from inductor_flydsl.inductor.adapter import internals

time.sleep(0.5)  # a process started in the background would be there by now


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
    return found


prebuild = sys.modules.get("inductor_flydsl.flydsl_backend.builds.prebuild")
print("RESULT " + json.dumps({
    "enabled": inductor_flydsl.active_settings() is not None, "enable_calls": seen["enable"],
    "hip": torch.version.hip, "device_queries": seen["calls"],
    "children": children(os.getpid()),
    "selector_made": internals.selector_object() is not None,
    "pool": prebuild is not None and prebuild._pool is not None}))
"""


@pytest.mark.parametrize("setup", ["rocm7-torch", "runtime-forced"])
def test_import_torch_with_the_plugin_on_starts_nothing_and_asks_no_device(
        tmp_path: Path, setup: str) -> None:
    env = isolated_env(tmp_path, INDUCTOR_FLYDSL="1", INDUCTOR_FLYDSL_DB=str(tmp_path / "t.db"),
                       INDUCTOR_FLYDSL_BUILD_JOBS="2")
    if setup == "rocm7-torch":
        env["LOOK_LIKE_ROCM7"] = "1"
    else:
        env["INDUCTOR_FLYDSL_TEST_FORCE_ROCM"] = "gfx950"
        env["PYTHONPATH"] = os.pathsep.join([str(FAULTS), str(REPO),
                                             env.get("PYTHONPATH", "")])
    result = run_for_result([sys.executable, "-c", CHILD], env, 300, "import torch")
    # the plugin was enabled inside `import torch`, and the profiler saw it
    assert result["enabled"] and result["enable_calls"] == 1, result
    if setup == "rocm7-torch":
        assert result["hip"] == "7.0.0"
    assert result["device_queries"] == [], result  # before: eligibility.runtime_reasons,
    # cuda.is_available (rocm7-torch), cuda.current_device (the selector object)
    assert result["children"] == [], result  # before (runtime-forced): the build server
    assert not result["pool"] and not result["selector_made"], result
