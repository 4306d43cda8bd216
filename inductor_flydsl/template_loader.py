"""The one way templates are found and loaded: the installed ``inductor_flydsl_templates``
package (``templates/`` in a source checkout, mapped by pyproject.toml), else the
``templates/`` directory next to the package, imported by file path. Every user of a
template (the FlyDSL backend, the cross-compiler, the emulator, the scripts) goes through
:func:`load_template`; its identity for caches and the DB is :func:`template_source_hash`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_TEMPLATE_PACKAGES = ("inductor_flydsl_templates",)  # how templates/ is installed


def _template_file(name: str) -> Path:
    from .provenance.software import templates_dir

    root = templates_dir()
    candidate = root / f"{name}.py" if root is not None else None
    if candidate is not None and candidate.is_file():
        return candidate
    raise ValueError(f"unknown template {name!r}")


def template_packages() -> tuple[str, ...]:
    """The packages templates are looked up in: the shipped one, then those named in
    ``INDUCTOR_FLYDSL_TEMPLATE_PACKAGES`` (extra templates: the template registry)."""
    from . import settings

    return (*_TEMPLATE_PACKAGES, *settings.TEMPLATE_PACKAGES.value())


def load_template(name: str) -> ModuleType:
    """Import a template module by name (installed package or source checkout, then the
    extra template packages). Either way a template is a module of a package, so
    templates import their siblings with ``from . import ...``."""
    if not name.isidentifier():
        raise ValueError(f"invalid template name {name!r}")
    for package in (*_TEMPLATE_PACKAGES, _CHECKOUT_PACKAGE):  # loaded already: at once
        loaded = sys.modules.get(f"{package}.{name}")
        if loaded is not None:
            return loaded
    for package in template_packages():
        module_name = f"{package}.{name}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        if importlib.util.find_spec(package) is not None:
            with contextlib.suppress(ModuleNotFoundError):
                return importlib.import_module(module_name)
    path = _template_file(name)  # a source checkout's templates/
    _checkout_package(path.parent)
    return importlib.import_module(f"{_CHECKOUT_PACKAGE}.{name}")


_CHECKOUT_PACKAGE = "_inductor_flydsl_templates"  # a source checkout's templates/


def _checkout_package(root: Path) -> ModuleType:
    """A source checkout's ``templates/`` imported as a package (not installed)."""
    if _CHECKOUT_PACKAGE in sys.modules:
        return sys.modules[_CHECKOUT_PACKAGE]
    spec = importlib.util.spec_from_file_location(
        _CHECKOUT_PACKAGE, root / "__init__.py", submodule_search_locations=[str(root)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[_CHECKOUT_PACKAGE] = package
    spec.loader.exec_module(package)
    return package


def template_source_hash(template_name: str) -> str:
    """First 16 hex digits of the sha256 of the template's source file (ValueError for an
    unknown template)."""
    from .provenance.software import template_source_hash as source_hash

    digest = source_hash(template_name)
    if digest is None:
        raise ValueError(f"unknown template {template_name!r}")
    return digest
