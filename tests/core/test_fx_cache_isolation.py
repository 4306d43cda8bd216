"""Inductor's FX graph cache never serves code compiled with the plugin to a process
without it, nor the reverse (the plugin's identity enters the key through uuid())."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import isolated_env, run_compile_model

SMALL = ["--mode", "default", "--freezing", "0", "--dims", "32,48,16", "--batch", "4"]


@pytest.mark.slow  # > 20 s on 2 cores
def test_fx_cache_keys_differ_with_and_without_plugin(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)  # one Inductor cache dir shared by all four runs
    db = ["--db", str(tmp_path / "t.db")]
    first_plugin = run_compile_model([*SMALL, "--plugin", *db], env)
    first_plain = run_compile_model(SMALL, env)
    second_plugin = run_compile_model([*SMALL, "--plugin", *db], env)
    second_plain = run_compile_model(SMALL, env)
    assert first_plugin["fxgraph_cache_miss"] == 1 and first_plugin["fxgraph_cache_hit"] == 0
    assert first_plain["fxgraph_cache_miss"] == 1 and first_plain["fxgraph_cache_hit"] == 0
    assert second_plugin["fxgraph_cache_hit"] == 1
    assert second_plain["fxgraph_cache_hit"] == 1


def test_uuid_names_plugin_and_templates() -> None:
    from inductor_flydsl.inductor.autotune.choices import PluginChoices
    from inductor_flydsl.provenance.software import template_version
    from inductor_flydsl.version import __version__

    uuid = PluginChoices().uuid()
    assert uuid == f"inductor_flydsl-{__version__}-{template_version()}"
    assert uuid == PluginChoices().uuid()  # stable: never hashes the DB
