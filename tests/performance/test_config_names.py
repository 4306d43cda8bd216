"""How a config is shown: every field that tells two DEFAULT configs apart is in its label."""

from __future__ import annotations

from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT
from inductor_flydsl.performance.config_names import config_label


def test_labels_show_split_k_and_the_in_launch_reduction() -> None:
    plain = {"tile_m": 16, "tile_n": 32, "tile_k": 64, "waves_m": 1, "waves_n": 1,
             "stages": 4, "group_m": 1}
    assert config_label(plain) == "t16x32x64 w1x1 s4 g1"
    assert config_label({**plain, "split_k": 1}) == "t16x32x64 w1x1 s4 g1"
    assert config_label({**plain, "split_k": 16}) == "t16x32x64 w1x1 s4 g1 sk16"
    inside = {**plain, "split_k": 16, "reduce_in_launch": 1}
    assert config_label(inside) == "t16x32x64 w1x1 s4 g1 sk16 rl"
    assert config_label({"tile_m": 16}, "fallback") == "fallback"


def test_every_default_config_has_its_own_label() -> None:
    labels = [config_label(c.to_json()) for c in DEFAULT]
    assert len(set(labels)) == len(DEFAULT)
