"""The plugin's ``InductorChoices``: it carries the plugin's identity into Inductor's
FX-graph-cache key through ``uuid()``, so code compiled with the plugin is never loaded by
a process without it, and the reverse.

``uuid()`` names the plugin version and the template sources; it never hashes the tuning
DB, which compiles write to (the key would change on every compile).
"""

from __future__ import annotations

from torch._inductor.choices import InductorChoices

from ..software import template_version
from ..version import __version__


class PluginChoices(InductorChoices):
    def uuid(self) -> str:
        return f"inductor_flydsl-{__version__}-{template_version()}"
