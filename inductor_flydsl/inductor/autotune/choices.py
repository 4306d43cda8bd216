"""The plugin's ``InductorChoices``: it carries the plugin's identity into Inductor's
FX-graph-cache key through ``uuid()``, so code compiled with the plugin is never loaded by
a process without it, and the reverse.

``uuid()`` names the plugin version and the template sources; it never hashes the tuning
DB, which compiles write to (the key would change on every compile). A user's own
``inductor_choices_class`` is kept: the plugin's class is layered over it, and both uuids
enter the key (a user's factory function: each instance it makes is layered, a declared
patch done by ``patches.swap_class``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...provenance.software import template_version
from ...version import __version__
from ..adapter import internals, patches
from . import compile_end

SWAPPED = "InductorChoices"  # an instance's class: a declared patch (internals.PATCHES)


class PluginChoices(internals.InductorChoices):
    def uuid(self) -> str:
        compile_end.ensure_installed()  # after a torch._dynamo.reset(), before this compile ends
        ours = f"inductor_flydsl-{__version__}-{template_version()}"
        parent_uuid = getattr(super(), "uuid", None)
        return f"{ours}+{parent_uuid()}" if callable(parent_uuid) else ours


@functools.cache
def _layered_over(cls: type) -> type:
    return type(f"PluginChoicesOver{cls.__name__}", (PluginChoices, cls), {})


def plugin_choices_factory(previous: Callable[[], Any] | None) -> Callable[[], Any]:
    """The ``inductor_choices_class`` to install over ``previous`` (the user's, or None)."""
    if previous is None or previous is PluginChoices:
        return PluginChoices
    if isinstance(previous, type) and issubclass(previous, internals.InductorChoices):
        return previous if issubclass(previous, PluginChoices) else _layered_over(previous)

    def factory() -> Any:  # a user factory function: layer over what it builds
        instance = previous()
        if isinstance(instance, internals.InductorChoices) and \
                not isinstance(instance, PluginChoices):
            patches.swap_class(SWAPPED, instance, _layered_over(type(instance)))
        return instance

    return factory
