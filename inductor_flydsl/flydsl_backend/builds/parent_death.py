"""A helper process ends with the process that started it (Linux).

The build server and its workers are asked to stop by their parent (end of input, a
message), but a parent killed with SIGKILL never asks, and a child forked from it may keep
the pipe that would tell them open. :func:`end_with_parent` asks the kernel to send this
process SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``), then checks that the
parent is still the one expected (it may have died before the request took effect).

The kernel sends the signal when the *thread* that forked this process ends, not the
whole process: the starting side must fork from a thread that lasts as long as its
process (``build_client.py`` starts the server from one; the server forks its workers
from its only thread).

Standard library only: the build server's bootstrap runs this file before it imports the
package (which imports torch, seconds of start-up the parent may not outlive).
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def end_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> bool:
    """Have ``sig`` sent to this process when its parent ``parent_pid`` dies; False when
    that parent is already gone (the caller should exit). Where ``prctl`` is missing (not
    Linux), only the parent check is made."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl here: the parent check still holds
        pass
    return os.getppid() == parent_pid
