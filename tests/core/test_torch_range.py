"""The supported torch releases, checked at run time (the package declares no torch
requirement: pip never replaces a user's torch). A torch outside them leaves the plugin
off with one warning naming the version and the fix, and Inductor untouched; ``doctor``'s
internals check reports it; importing the package without torch says what to install.
Only the version string is changed (``torch.__version__``), nothing of torch's internals."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch

import inductor_flydsl
from inductor_flydsl.inductor.adapter import internals
from inductor_flydsl.inductor.adapter.torch_range import MISSING_TORCH, release, version_problem
from tests.conftest import REPO

FIX = "install a supported torch (pip install 'torch>=2.13,<2.15' --index-url"


@pytest.mark.parametrize("version", ["2.13.0", "2.13.0+cpu", "2.14.1", "2.14.1+rocm7.1",
                                     "2.13.0a0+git1234abc", "2.14.0.dev20260101+cpu"])
def test_supported_releases_pass(version: str) -> None:
    assert version_problem(version) is None


@pytest.mark.parametrize(("version", "nightly"), [("2.16.0", False), ("2.12.1+cu126", False),
                                                  ("2.15.0.dev20260301+cpu", True),
                                                  ("unknown", False)])
def test_other_releases_are_named_with_the_fix(version: str, nightly: bool) -> None:
    problem = version_problem(version)
    assert problem is not None
    assert problem.startswith(f"torch {version} is not supported by inductor-flydsl "
                              "(torch 2.13 or 2.14 is")
    assert FIX in problem
    assert ("a nightly of a later release is not" in problem) is nightly
    assert release("2.15.0.dev20260301+cpu") == (2, 15) and release("unknown") is None


def test_enable_stays_off_and_doctor_reports_an_unsupported_torch(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from inductor_flydsl.cli.doctor_checks import inductor_internals

    monkeypatch.setattr(torch, "__version__", "2.16.0")
    choices_class = internals.config.inductor_choices_class
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = inductor_flydsl.enable(tmp_path / "t.db")
    said = [str(w.message) for w in caught if "inductor_flydsl" in str(w.message)]
    assert said == [f"inductor_flydsl stays off: {version_problem('2.16.0')}"], said
    assert settings.mode is inductor_flydsl.Mode.OFF
    assert inductor_flydsl.active_settings() is None
    assert internals.config.inductor_choices_class is choices_class
    assert not (tmp_path / "t.db").exists()
    with pytest.raises(inductor_flydsl.PluginUnavailable) as raised:
        inductor_flydsl.enable(tmp_path / "t.db", strict=True)
    assert str(raised.value) == version_problem("2.16.0")
    section, found = inductor_internals()  # what `inductor-flydsl doctor` shows
    assert found[0] == version_problem("2.16.0")
    assert section.findings[0].problem == ("the plugin stays off with this torch: "
                                           + version_problem("2.16.0"))


def test_import_without_torch_says_what_to_install() -> None:
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.modules['torch'] = None; "
                           "import inductor_flydsl"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last == f"ModuleNotFoundError: {MISSING_TORCH}", proc.stderr[-2000:]
    assert MISSING_TORCH.startswith("inductor-flydsl needs torch 2.13 or 2.14: install it "
                                    "first (pip install 'torch>=2.13,<2.15' --index-url")
