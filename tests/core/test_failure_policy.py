"""The failure policy (docs/design.md): a bad ``INDUCTOR_FLYDSL_*`` value or a broken
install never makes ``import torch`` fail; the plugin stays off with exactly one warning
naming the variable or module and the fix; ``enable(strict=True)`` raises instead; code
that runs during a compile reads a bad value as its default. Every variable is declared
in ``settings.py`` and read nowhere else."""

from __future__ import annotations

import logging
import os
import re
import shutil
import site as site_module
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import inductor_flydsl
from inductor_flydsl import settings
from inductor_flydsl.settings import SettingError
from tests.conftest import REPO

NOT_A_DIR = str(REPO / "README.md")
# one bad value for every variable; a variable without one must be free text
BAD = {
    "INDUCTOR_FLYDSL": "maybe",
    "INDUCTOR_FLYDSL_DB": str(REPO),  # a directory
    "INDUCTOR_FLYDSL_MODE": "bogus",
    "INDUCTOR_FLYDSL_SHIPPED": "nope",
    "INDUCTOR_FLYDSL_REUSE": "2",
    "INDUCTOR_FLYDSL_PRIORS": "yes please",
    "INDUCTOR_FLYDSL_PRIOR_TOP_K": "0",
    "INDUCTOR_FLYDSL_BUCKETS": "on-ish",
    "INDUCTOR_FLYDSL_CANDIDATES": "65",
    "INDUCTOR_FLYDSL_TOP_K": "-1",
    "INDUCTOR_FLYDSL_BUILD_JOBS": "-1",
    "INDUCTOR_FLYDSL_BUILD_TIMEOUT_S": "soon",
    "INDUCTOR_FLYDSL_MAX_KERNELS": "many",
    "INDUCTOR_FLYDSL_CACHE_DIR": NOT_A_DIR,  # a file
    "INDUCTOR_FLYDSL_ON_BUSY": "panic",
    "INDUCTOR_FLYDSL_BUSY_CPU": "-0.5",
    "INDUCTOR_FLYDSL_REPEATS": "1.5",
    "INDUCTOR_FLYDSL_LOG": "verbose",
    "INDUCTOR_FLYDSL_TEMPLATE_PACKAGES": "my-templates",
}
FREE_TEXT = {"INDUCTOR_FLYDSL_BUSY_NOTE"}  # set by the sweep runner for its workers


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("INDUCTOR_FLYDSL"):
            monkeypatch.delenv(name)


def test_every_variable_is_declared_once_and_has_a_bad_value_here() -> None:
    names = [s.name for s in settings.ENV_SETTINGS]
    assert len(names) == len(set(names))
    assert set(BAD) | FREE_TEXT == set(names)
    for setting in settings.ENV_SETTINGS:
        assert setting.doc and setting.name.startswith("INDUCTOR_FLYDSL")
    assert settings.BUSY_NOTE.parse("anything at all") == "anything at all"


def test_the_package_reads_no_variable_outside_settings() -> None:
    """Every ``INDUCTOR_FLYDSL_*`` name the package's code mentions is a declared setting,
    (or a variable of this project's scripts, known so that ``doctor`` and
    ``enable(strict=True)`` do not call it a typo), and only settings.py reads the
    environment for one."""
    declared = {s.name for s in settings.ENV_SETTINGS} | set(settings.SCRIPT_VARIABLES)
    for path in (REPO / "inductor_flydsl").rglob("*.py"):
        text = path.read_text()
        unknown = set(re.findall(r"\bINDUCTOR_FLYDSL_[A-Z0-9_]*[A-Z0-9]", text)) - declared
        assert not unknown, f"{path}: undeclared {sorted(unknown)}"
        if path.name != "settings.py":
            assert not re.search(r"environ(\.get)?\(?\[?[\"']INDUCTOR_FLYDSL", text), path


@pytest.mark.parametrize("name", sorted(set(BAD) - settings.DISPLAY_ONLY))
def test_a_bad_value_turns_the_plugin_off_with_one_warning_or_raises_when_strict(
        name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _clean_env(monkeypatch)
    monkeypatch.setenv("INDUCTOR_FLYDSL_DB", str(tmp_path / "t.db"))
    monkeypatch.setenv("INDUCTOR_FLYDSL", "1")
    monkeypatch.setenv(name, BAD[name])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            given = inductor_flydsl.enable_from_env()  # what `import torch` runs
            assert given is None or given.mode is settings.Mode.OFF
            assert inductor_flydsl.active_settings() is None
        messages = [str(w.message) for w in caught]
        assert len(messages) == 1, messages
        assert f"{name}={BAD[name]!r}" in messages[0] and "stays off" in messages[0]
        assert "unset it" in messages[0] and re.search(r": (use|this is a)", messages[0])
        with pytest.raises(SettingError, match=re.escape(f"{name}={BAD[name]!r}")):
            inductor_flydsl.enable(strict=True)
        assert inductor_flydsl.active_settings() is None
    finally:
        inductor_flydsl.disable()


def test_a_bad_display_setting_is_one_warning_and_its_default_the_plugin_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``INDUCTOR_FLYDSL_LOG`` only changes what is printed (issue 52): a typo of it is
    one warning naming the setting, the value, the valid values and the close match; the
    plugin stays on with the default (no summary line); ``strict`` still raises."""
    assert settings.DISPLAY_ONLY == {"INDUCTOR_FLYDSL_LOG"}
    _clean_env(monkeypatch)
    monkeypatch.setenv("INDUCTOR_FLYDSL_DB", str(tmp_path / "t.db"))
    monkeypatch.setenv("INDUCTOR_FLYDSL", "1")
    monkeypatch.setenv("INDUCTOR_FLYDSL_LOG", "sumary")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            given = inductor_flydsl.enable_from_env()
        assert given is not None and given.mode is settings.Mode.READWRITE
        assert inductor_flydsl.active_settings() == given
        assert [str(w.message) for w in caught if "inductor_flydsl" in str(w.message)] == [
            "inductor_flydsl: INDUCTOR_FLYDSL_LOG='sumary': use one of: off, summary; did you "
            "mean summary? (or unset it; default: off); the default is used and the plugin "
            "stays on"]
        from inductor_flydsl.inductor.autotune import compile_end, compile_summary

        assert compile_summary._on_end not in compile_end._registered  # off: the default
        with pytest.raises(SettingError, match="INDUCTOR_FLYDSL_LOG='sumary'"):
            inductor_flydsl.enable(strict=True)
        assert inductor_flydsl.active_settings() is None
        # beside a setting that turns the plugin off: one warning naming both, plugin off
        monkeypatch.setenv("INDUCTOR_FLYDSL_REPEATS", "0")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert inductor_flydsl.enable().mode is settings.Mode.OFF
        ours = [str(w.message) for w in caught if "inductor_flydsl" in str(w.message)]
        assert len(ours) == 1 and "INDUCTOR_FLYDSL_LOG" in ours[0], ours
        assert "INDUCTOR_FLYDSL_REPEATS" in ours[0] and "stays off" in ours[0]
    finally:
        inductor_flydsl.disable()


@pytest.mark.parametrize("setting", [s for s in settings.ENV_SETTINGS if s.name in BAD],
                         ids=lambda s: s.name)
def test_during_a_compile_a_bad_value_reads_as_its_default(
        setting: settings.EnvSetting, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(setting.name, BAD[setting.name])
    with caplog.at_level(logging.WARNING, logger="inductor_flydsl"):
        assert setting.value() == setting.default
    assert setting.name in caplog.text


def test_several_bad_values_make_one_warning_naming_each(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _clean_env(monkeypatch)
    monkeypatch.setenv("INDUCTOR_FLYDSL_DB", str(tmp_path / "t.db"))
    monkeypatch.setenv("INDUCTOR_FLYDSL_REPEATS", "0")
    monkeypatch.setenv("INDUCTOR_FLYDSL_ON_BUSY", "panic")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert inductor_flydsl.enable().mode is settings.Mode.OFF
    assert len(caught) == 1
    assert "INDUCTOR_FLYDSL_REPEATS" in str(caught[0].message)
    assert "INDUCTOR_FLYDSL_ON_BUSY" in str(caught[0].message)
    with pytest.raises(ValueError, match="mode='bogus'"):  # an argument: the caller's error
        inductor_flydsl.enable(mode="bogus")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTOR_FLYDSL")}
    env.update({"INDUCTOR_FLYDSL": "1", "INDUCTOR_FLYDSL_DB": str(tmp_path / "t.db"),
                "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor_cache")})
    env.update(extra)
    return env


def _warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "Warning:" in line
            and "inductor_flydsl" in line]


@pytest.mark.parametrize("bad", [
    {k: v for k, v in BAD.items() if k != "INDUCTOR_FLYDSL"},  # every other one at once
    {"INDUCTOR_FLYDSL": BAD["INDUCTOR_FLYDSL"]}], ids=["every_setting", "enable_itself"])
def test_import_torch_survives_bad_values_with_one_warning_naming_each(
        bad: dict[str, str], tmp_path: Path) -> None:
    """Through the real ``torch.backends`` entry point, in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-c", "import torch, inductor_flydsl;"
         " print(inductor_flydsl.active_settings())"],
        env=_env(tmp_path, **bad), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "None"
    found = _warnings_of(proc.stderr)
    assert len(found) == 1, proc.stderr
    for name, value in bad.items():
        assert f"{name}={value!r}" in found[0], (name, found[0])


def test_a_broken_install_stays_off_with_one_warning_naming_the_module(
        tmp_path: Path) -> None:
    """A copy of the package without ``inductor_flydsl/numerics`` (the wheel of issue 34):
    ``import torch`` works, one warning names the module and says to reinstall, and
    ``enable(strict=True)`` raises."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "inductor_flydsl", site / "inductor_flydsl",
                    ignore=shutil.ignore_patterns("numerics", "__pycache__"))
    shutil.copytree(REPO / "templates", site / "templates")
    script = ("import torch, inductor_flydsl, pathlib\n"
              f"assert pathlib.Path(inductor_flydsl.__file__).is_relative_to({str(site)!r})\n"
              "print('off' if inductor_flydsl.active_settings() is None else 'on')\n"
              "try:\n    inductor_flydsl.enable(strict=True)\n"
              "except inductor_flydsl.PluginUnavailable as exc:\n    print('raised', exc)\n")
    # -S: no .pth files, so an editable install of a checkout cannot serve the missing
    # module through its import finder; the site-packages still give torch and the
    # package's entry point (its metadata), which loads the copy, first on the path
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join([str(site), *site_module.getsitepackages()]))
    proc = subprocess.run([sys.executable, "-S", "-c", script], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-2] == "off"
    assert lines[-1].startswith("raised") and "inductor_flydsl.numerics" in lines[-1]
    found = _warnings_of(proc.stderr)
    assert len(found) == 1, proc.stderr
    assert "inductor_flydsl.numerics" in found[0] and "pip install --force-reinstall" in found[0]


@pytest.mark.parametrize("name", ["INDUCTOR_FLYDSL_DB", "INDUCTOR_FLYDSL_MODE",
                                  "INDUCTOR_FLYDSL_PRIOR_TOP_K"])
def test_the_command_line_names_a_bad_setting_without_a_traceback(
        name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from inductor_flydsl.cli.main import main

    _clean_env(monkeypatch)
    monkeypatch.setenv(name, BAD[name])
    assert main(["explain", "--op", "mm", "--shape", "64x64x64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"inductor-flydsl: error: {name}={BAD[name]!r}"), err
    assert "Traceback" not in err
