"""How the plugin tells the user something to fix while the compile goes on: one
:class:`TuningDBWarning` per problem and process (:func:`warn_once`). Used by the DB
layers (an unusable, read-only or full DB file), the Inductor hooks (a refused problem, an
error inside a hook), the FlyDSL runtime (a kernel computed with ATen instead) and the
vLLM pass."""

from __future__ import annotations

import logging
import threading
import warnings

log = logging.getLogger("inductor_flydsl")


class TuningDBWarning(UserWarning):
    """Something the plugin could not use or do (a tuning DB file, a kernel, a hook);
    compilation continues without it."""


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    """One :class:`TuningDBWarning` per problem (``key``) and process, and nothing else:
    a warning, not a log line, because it is something for the user to fix while the
    compile goes on, and a warning category is what Python gives users to filter, escalate
    (``-W error::...TuningDBWarning``) or assert on. Only where warnings are errors (so the
    warning cannot be shown) does a log line say it instead: the compile must go on."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    try:
        warnings.warn(message, TuningDBWarning, stacklevel=3)
    except Exception:  # warnings turned into errors (-W error): the log line must do
        log.warning(message)
