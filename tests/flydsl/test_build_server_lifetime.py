"""The build server ends with the process that started it (issue 50, point 10).

It stops when its stdin closes, but a child forked from the compiling process (a
DataLoader worker, a user's ``os.fork``) inherited that pipe's write end and kept it
open, so a compiling process killed with SIGKILL left the server and its warm workers
running. Now a forked child lets go of the pipes (``build_client._detach_forked_child``),
the server asks for SIGTERM at its parent's death and its workers at the server's
(``parent_death.py``).

Run for real: a parent process starts the build server through the package's client
(``BuildServerPool``, from a thread that then ends, as a compile's or a launch's thread
may), waits for its warm worker, forks a child that sleeps, and is killed with SIGKILL;
the server and its worker are gone within 5 s while the forked child lives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from inductor_flydsl.flydsl_backend.builds import build_server, parent_death
from tests.conftest import isolated_env

PARENT = r"""
import json, os, sys, threading, time
from inductor_flydsl.flydsl_backend.builds import build_client

made = []
starter = threading.Thread(target=lambda: made.append(
    build_client.BuildServerPool(1, 60, "json:dumps")))
starter.start()
starter.join()  # the thread that asked for the server is gone
pool = made[0]
pool.prewarm()
ready = pool.wait_ready(120)
server = pool._proc.pid
with open(f"/proc/{server}/task/{server}/children") as f:
    workers = [int(p) for p in f.read().split()]
stdin_fd = pool._proc.stdin.fileno()
read_end, write_end = os.pipe()
child = os.fork()
if child == 0:  # a forked child that outlives this process, holding what it inherited
    os.write(write_end, os.readlink(f"/proc/self/fd/{stdin_fd}").encode())
    time.sleep(60)
    os._exit(0)
seen_by_child = os.read(read_end, 200).decode()
print(json.dumps({"ready": ready, "server": server, "workers": workers, "child": child,
                  "child_stdin": seen_by_child,
                  "own_stdin": os.readlink(f"/proc/self/fd/{stdin_fd}")}), flush=True)
time.sleep(60)  # killed by the test
"""


def _alive(pid: int) -> bool:
    """Running (a zombie no reaper collected is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_build_server_and_its_workers_end_when_their_parent_is_killed(
        tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", PARENT], env=isolated_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: dict = {}
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)[1][-3000:]
        pids = json.loads(line)
        assert pids["ready"] and len(pids["workers"]) == 1, pids
        # the forked child let go of the server's stdin; the parent holds the pipe
        assert pids["child_stdin"] == "/dev/null", pids
        assert pids["own_stdin"].startswith("pipe:"), pids
        # the server outlived the thread that started it (its parent-death signal
        # follows that thread): it served the warm-up after the thread ended
        assert _alive(pids["server"])
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed = time.monotonic()
        helpers = [pids["server"], *pids["workers"]]
        while any(_alive(pid) for pid in helpers) and time.monotonic() - killed < 5:
            time.sleep(0.05)
        assert [pid for pid in helpers if _alive(pid)] == [], pids
        assert _alive(pids["child"])  # what used to keep the server's stdin open
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in [pids.get("child"), pids.get("server"), *pids.get("workers", [])]:
            if pid and _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_server_whose_parent_is_already_gone_exits_before_importing_anything() -> None:
    """The race at start-up: the parent died before the parent-death signal was asked
    for. The bootstrap sees another parent and exits at once (the server module, and
    torch, are never imported: 'import torch' would take seconds)."""
    other = os.getppid()  # not the new process's parent
    command = [sys.executable, "-X", "importtime", "-c", build_server.BOOTSTRAP,
               parent_death.__file__, build_server.MODULE, "--events-fd", "1",
               "--parent-pid", str(other)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")]
    assert "runpy" in imported  # -X importtime reports
    assert not any(name.split(".")[0] in ("torch", "inductor_flydsl") for name in imported)
