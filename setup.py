"""The package list, found rather than listed (pyproject.toml holds everything else).

``inductor_flydsl`` and its subpackages are found by setuptools; ``templates/`` and
``tuning_db/`` live at the top of the repository (design card) and ship as the packages
named in :data:`TOP_LEVEL_DIRS`, with any subpackage they grow found the same way.
"""

from __future__ import annotations

from setuptools import find_packages, setup

TOP_LEVEL_DIRS = {"inductor_flydsl_templates": "templates",
                  "inductor_flydsl_tuning_db": "tuning_db"}


def packages() -> list[str]:
    found = find_packages(include=["inductor_flydsl", "inductor_flydsl.*"])
    for package, folder in TOP_LEVEL_DIRS.items():
        found += [package, *(f"{package}.{sub}" for sub in find_packages(where=folder))]
    return found


setup(packages=packages(), package_dir=TOP_LEVEL_DIRS)
