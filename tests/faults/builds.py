"""A build function for the FlyDSL build pool that aborts its worker (as a compiler crash
does) for one config: the tests set it as the pool's function (``catalog.BUILD_FN``) and
forward :data:`ENV_CRASH` to the workers with the build settings."""

from __future__ import annotations

import os
from typing import Any

from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.problems.keys import stable_id

ENV_CRASH = "INDUCTOR_FLYDSL_TEST_BUILD_CRASH"  # the config id whose build aborts
BUILD_FN = "tests.faults.builds:build_or_crash"


def build_or_crash(template_name: str, config: Any, **kwargs: Any) -> Any:
    settings = kwargs.get("settings") or {}
    if settings.get(ENV_CRASH, os.environ.get(ENV_CRASH)) == stable_id(dict(config)):
        os.abort()
    return prebuild.build_config(template_name, config, **kwargs)
