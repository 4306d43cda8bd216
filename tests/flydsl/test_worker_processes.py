"""With ``INDUCTOR_FLYDSL=1`` where FlyDSL candidates can be offered, the first selection
that offers them starts one build pool: one build server (``inductor_flydsl.
flydsl_backend.builds.build_server``) whose workers are forked from it. The server imports torch
(so the plugin's ``torch.backends`` entry point runs there) and must not enable the plugin
again, or every server would start another one (issue 36: a chain of fork servers, one
more every few seconds).

Run for real: a child process with ``INDUCTOR_FLYDSL=1`` and the provider's runtime check
forced to pass (tests/faults/sitecustomize.py, inherited by every descendant) calls what
a selection offering FlyDSL calls (``provider.start_build_server``; ``import torch``
starts nothing: tests/core/test_nothing_at_import.py); its descendants are counted from
/proc after the pool is warm and a few more seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAULTS = REPO / "tests" / "faults"

CHILD = r"""
import json, os, time
import torch  # the entry point enables the plugin (INDUCTOR_FLYDSL=1)
import inductor_flydsl
from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.builds import prebuild

provider.start_build_server()  # as the first selection offering FlyDSL does
ready = prebuild.wait_ready(120)
time.sleep(float(os.environ["SETTLE_S"]))  # a fork-server chain grows about every 3 s


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
                found.append(int(entry))
    return found


def descendants(pid, depth=1):
    out = []
    for child in children(pid):
        out.append((child, depth))
        out.extend(descendants(child, depth + 1))
    return out


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


procs = {pid: [depth, cmdline(pid)] for pid, depth in descendants(os.getpid())}
pool = prebuild._pool
print(json.dumps({"enabled": inductor_flydsl.active_settings() is not None, "ready": ready,
                  "workers": pool.n_workers if pool else 0,
                  "procs": procs}))
"""


@pytest.mark.slow
def test_enabled_plugin_starts_one_pool_and_its_server_only(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTOR_FLYDSL")}
    env.update({"INDUCTOR_FLYDSL": "1", "INDUCTOR_FLYDSL_DB": str(tmp_path / "t.db"),
                "INDUCTOR_FLYDSL_SHIPPED": "0", "INDUCTOR_FLYDSL_TEST_FORCE_ROCM": "gfx950",
                "INDUCTOR_FLYDSL_BUILD_JOBS": "2", "SETTLE_S": "8",
                "FLYDSL_RUNTIME_CACHE_DIR": str(tmp_path / "flydsl"),
                "PYTHONPATH": os.pathsep.join([str(FAULTS), str(REPO),
                                               env.get("PYTHONPATH", "")]),
                "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["enabled"] and data["ready"], data
    procs = data["procs"]  # pid -> [depth below the child, command line]
    servers = [c for d, c in procs.values() if d == 1 and "build_server" in c]
    workers = [c for d, c in procs.values() if d == 2 and "build_server" in c]
    trackers = [c for d, c in procs.values() if "resource_tracker" in c]
    # before issue 36's fix: every server enabled the plugin again, which started another
    # server below it, one level every few seconds
    assert len(servers) == 1 and len(trackers) <= 1, procs
    assert max(d for d, _ in procs.values()) == 2, procs
    assert not any("forkserver" in c for _, c in procs.values()), procs
    assert data["workers"] == 2 and len(workers) == 2, procs  # warm: both started
    assert len(procs) <= data["workers"] + 2, procs  # the workers, the server, a tracker


def test_the_build_server_never_enables_the_plugin() -> None:
    """Its environment turns the plugin off, and its import path is this process's."""
    import sys

    from inductor_flydsl.flydsl_backend.builds.build_client import server_environment
    from inductor_flydsl.settings import ENABLE

    env = server_environment()
    assert ENABLE.read(env) is False
    assert env["PYTHONPATH"].split(os.pathsep)[:1] == [sys.path[0] or os.getcwd()]
