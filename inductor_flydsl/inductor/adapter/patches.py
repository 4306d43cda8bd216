"""Replacing an attribute of torch or of a client library for a while, and putting it
back: the only way the plugin does it.

No extension point offers what these do, so the plugin puts its own function in place of
one of Inductor's for a while: the methods of the deferred epilogue-fusion decision
(``fusion_replay.py``, while the plugin is on: :func:`inductor_flydsl.disable` puts them
back), the persistent sweep worker's CPU set-up (``sweep/warm_up.py``, until the
warm-up's end, ``warm_up.finish``) and the function that makes Inductor's selector object
(``selector_hooks.py``, until Inductor first calls it); and vLLM's
``VllmBackend.configure_post_pass`` (``vllm_passes.py``, for the process's life). Each is
declared in ``internals.PATCHES`` (what it replaces, who installs it, why, until when),
which ``internals_check.problems()`` checks per torch release (``client_problems()`` for a
client library, where installed). :func:`apply` refuses anything not declared there,
remembers the original and hands it back; :func:`restore` puts it back.

Two objects' classes are swapped for a class layered over theirs (the object keeps its
state and everything its class did): Inductor's selector object (``selector_hooks.py``,
until ``disable()``) and an ``InductorChoices`` a user's factory makes (``choices.py``,
for that instance's life). Declared in ``internals.PATCHES`` too (kind
``INSTANCE_CLASS``), done by :func:`swap_class` and undone by :func:`restore_class`.
Nothing is added to ``torch``: generated code reaches the plugin's ops through the
package's own module, which it imports itself (``flydsl_backend/direct.py``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from . import internals

_DECLARED = {(p.owner, p.attr): p for p in internals.PATCHES}
FUSION_REPLAY, WARM_UP = internals.FUSION_REPLAY, internals.WARM_UP


@dataclass
class _Applied:
    target: Any
    original: Any
    replacement: Any
    had_own: bool  # the attribute was the target's own (else it came from its class)


_lock = threading.Lock()
_applied: dict[tuple[str, str], _Applied] = {}
# every original ever replaced: a replacement called after its restore (a call already
# under way) still finds what it wraps
_originals: dict[tuple[str, str], Any] = {}


def declared(owner: str, attr: str, kind: str = internals.ATTRIBUTE) -> internals.Patch:
    try:
        patch = _DECLARED[(owner, attr)]
    except KeyError:
        raise ValueError(f"{owner}.{attr} is not a declared patch: add it to "
                         "inductor/adapter/internals.py's PATCHES") from None
    if patch.kind != kind:
        raise ValueError(f"{owner}.{attr} is declared as a patch of kind {patch.kind!r}, "
                         f"not {kind!r}")
    return patch


def swap_class(owner: str, instance: Any, new_class: type) -> type:
    """Make ``instance`` (of the declared owner class) an instance of ``new_class``, a
    class layered over its own (a subclass of it: the instance keeps its state and what
    its class did); returns the class it had, for :func:`restore_class`."""
    declared(owner, "__class__", internals.INSTANCE_CLASS)
    if not isinstance(instance, getattr(internals, owner)):
        raise TypeError(f"{type(instance).__name__} is not a {owner}")
    original = type(instance)
    if not issubclass(new_class, original):
        raise TypeError(f"{new_class.__name__} is not layered over {original.__name__}")
    instance.__class__ = new_class
    return original


def restore_class(owner: str, instance: Any, original: type) -> None:
    """Undo :func:`swap_class`: ``instance`` is an instance of ``original`` again."""
    declared(owner, "__class__", internals.INSTANCE_CLASS)
    if not isinstance(instance, original):
        raise TypeError(f"{type(instance).__name__} is not layered over {original.__name__}")
    instance.__class__ = original


def _own_value(target: Any, attr: str) -> tuple[bool, Any]:
    """(whether ``attr`` is ``target``'s own attribute, its value as looked up)."""
    own = attr in getattr(target, "__dict__", {})
    if isinstance(target, type):
        return own, target.__dict__.get(attr)  # the function itself, not a bound method
    return own, getattr(target, attr, None)


def apply(owner: str, attr: str, replacement: Any) -> Any | None:
    """Put ``replacement`` in place of ``<owner>.<attr>`` (a declared patch) and
    return the original; already applied: nothing changes, the original is returned.
    None when there is nothing to replace (a class that does not define the method
    itself, an object without it): nothing is patched."""
    patch = declared(owner, attr)
    key = (patch.owner, patch.attr)
    with _lock:
        if key in _applied:
            return _applied[key].original
        target = getattr(internals, owner)
        had_own, original = _own_value(target, attr)
        if original is None or (isinstance(target, type) and not had_own):
            return None
        try:  # internals reads the source of a wrapped method through it
            replacement.__wrapped__ = original
        except (AttributeError, TypeError):
            pass
        setattr(target, attr, replacement)
        _applied[key] = _Applied(target, original, replacement, had_own)
        _originals[key] = original
        return original


def original(owner: str, attr: str) -> Any:
    """What :func:`apply` replaced (KeyError if it never did)."""
    return _originals[(owner, attr)]


def is_applied(owner: str, attr: str) -> bool:
    """Whether the replacement is in place now."""
    with _lock:
        found = _applied.get((owner, attr))
        return found is not None and _current(found, attr) is found.replacement


def _current(found: _Applied, attr: str) -> Any:
    return _own_value(found.target, attr)[1]


def restore(owner: str, attr: str) -> bool:
    """Put the original back; False when the patch is not applied, or when something else
    has since replaced the replacement (that one is left in place, and this patch stays
    applied under it)."""
    key = (owner, attr)
    with _lock:
        found = _applied.get(key)
        if found is None or _current(found, attr) is not found.replacement:
            return False
        if found.had_own:
            setattr(found.target, attr, found.original)
        else:  # it came from the object's class: drop the object's own attribute
            delattr(found.target, attr)
        del _applied[key]
        return True


def restore_all(by: str) -> list[str]:
    """Restore every patch ``by`` installed; the ones restored, as ``owner.attr``."""
    return [f"{p.owner}.{p.attr}" for p in internals.PATCHES
            if p.by == by and restore(p.owner, p.attr)]


def applied() -> list[str]:
    """The patches in place now, as ``owner.attr``."""
    return [f"{owner}.{attr}" for owner, attr in list(_applied) if is_applied(owner, attr)]
