"""How the plugin's pass joins vLLM's per-compile Inductor config
(``inductor_flydsl/inductor/vllm/vllm_passes.py``), checked without vLLM: the join itself works
on the dict vLLM hands Inductor, and with no vLLM installed nothing of it runs.
tests/vllm_client/test_vllm_backend.py checks it inside vLLM's real compile."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import inductor_flydsl
from inductor_flydsl.inductor.adapter import internals
from inductor_flydsl.inductor.fusion.epilogue_pass import EpilogueFusionPass
from inductor_flydsl.inductor.vllm import vllm_passes
from tests.conftest import isolated_env


class Manager(internals.CustomGraphPass):
    """Stands for vLLM's PostGradPassManager: a CustomGraphPass with a uuid."""

    def __call__(self, graph: object) -> None:
        pass

    def uuid(self) -> str:
        return "manager"


def test_nothing_joins_while_the_plugin_is_off() -> None:
    inductor_flydsl.disable()
    manager = Manager()
    config = {"post_grad_custom_post_pass": manager, "max_autotune": True}
    assert not vllm_passes.join(config)
    assert config == {"post_grad_custom_post_pass": manager, "max_autotune": True}


def test_the_pass_comes_after_vllms_once(tmp_path: Path) -> None:
    manager = Manager()
    with inductor_flydsl.enabled(tmp_path / "t.db"):
        config: dict = {"post_grad_custom_post_pass": manager}
        assert vllm_passes.join(config)
        first = config["post_grad_custom_post_pass"]
        assert first[0] is manager and isinstance(first[1], EpilogueFusionPass)
        assert first[1].inner is None  # the user's global passes do not run under vLLM
        assert not vllm_passes.join(config)  # already there: unchanged
        assert config["post_grad_custom_post_pass"] is first
        listed: dict = {"post_grad_custom_post_pass": [manager, manager]}
        assert vllm_passes.join(listed)
        assert [type(p) for p in listed["post_grad_custom_post_pass"]] == [
            Manager, Manager, EpilogueFusionPass]
        empty: dict = {}
        assert vllm_passes.join(empty)
        assert [type(p) for p in empty["post_grad_custom_post_pass"]] == [EpilogueFusionPass]
    # the pass's identity enters Inductor's FX-graph-cache key: the same in every process
    assert vllm_passes.plugin_pass().uuid() == vllm_passes.plugin_pass().uuid() is not None


def test_register_without_vllm_warns_and_changes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    from inductor_flydsl.telemetry import user_warnings

    monkeypatch.setattr(user_warnings, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vllm_passes.register()
    assert any("cannot join vLLM's compile" in str(w.message) for w in caught), caught


def test_enabling_the_plugin_imports_nothing_of_vllm(tmp_path: Path) -> None:
    """Enabling the plugin (twice, as a disable and enable again do) loads neither the
    vLLM module nor vLLM (no module of the package imports them: only vLLM's entry point
    does); the global post-grad pass is the plugin's, as before."""
    code = (
        "import sys, torch, inductor_flydsl\n"
        f"inductor_flydsl.enable({str(tmp_path / 't.db')!r})\n"
        "inductor_flydsl.disable(); inductor_flydsl.enable()\n"
        "from torch._inductor import config\n"
        "print(type(config.post_grad_custom_post_pass).__name__,\n"
        "      'inductor_flydsl.inductor.vllm.vllm_passes' in sys.modules,\n"
        "      any(m == 'vllm' or m.startswith('vllm.') for m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], env=isolated_env(tmp_path),
                         capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["EpilogueFusionPass", "False", "False"], out.stderr[-2000:]


def test_register_wraps_vllms_backend_once() -> None:
    """vLLM may call its general plugins more than once per process: one wrapper."""
    backends = pytest.importorskip("vllm.compilation.backends")
    vllm_passes.register()
    wrapped = backends.VllmBackend.configure_post_pass
    vllm_passes.register()
    assert backends.VllmBackend.configure_post_pass is wrapped
    assert getattr(wrapped, vllm_passes._WRAPPED)
    assert getattr(wrapped, "__wrapped__", None) is not None  # vLLM's own method inside
    assert not getattr(wrapped.__wrapped__, vllm_passes._WRAPPED, False)


def test_a_compile_vllm_captures_is_timed_as_graphs(tmp_path: Path) -> None:
    """Issue 50: vLLM captures its own CUDA/HIP graphs with Inductor's cudagraphs off, so
    the plugin's pass carries vLLM's cudagraph mode into each per-compile config, and a
    selection of that compile on a GPU is timed by graph replay (as it will run); with
    vLLM's mode NONE it is timed eagerly, as before. vLLM's own CUDAGraphMode where vLLM
    is installed."""
    import enum
    import types

    import torch

    from inductor_flydsl.inductor.timing.timing_parity import (
        compile_uses_graphs,
        selection_timing,
    )

    try:
        from vllm.config.compilation import CUDAGraphMode
    except ImportError:  # the same names as vLLM 0.32's enum
        CUDAGraphMode = enum.Enum("CUDAGraphMode", "NONE PIECEWISE FULL")  # type: ignore

    class Captures:
        def captures_graphs(self, device: object) -> bool:
            return True

    gpu = torch.device("cuda", 0)
    with inductor_flydsl.enabled(tmp_path / "t.db"):
        for mode, expected in ((CUDAGraphMode.PIECEWISE, "graph"),
                               (CUDAGraphMode.FULL, "graph"), (CUDAGraphMode.NONE, "eager")):
            backend = types.SimpleNamespace(
                compilation_config=types.SimpleNamespace(cudagraph_mode=mode))
            captures = vllm_passes.vllm_captures_graphs(backend)
            config: dict = {"post_grad_custom_post_pass": Manager(),
                            "triton.cudagraphs": False}
            assert vllm_passes.join(config, captures_graphs=captures)
            with internals.config.patch(config):  # as vLLM hands it to Inductor
                assert compile_uses_graphs() == (expected == "graph")
                assert selection_timing(gpu, [Captures()]) == expected
            # another identity in Inductor's FX-graph cache for each mode
            ids = {p.uuid() for p in config["post_grad_custom_post_pass"]}
            assert (vllm_passes.plugin_pass(True).uuid() in ids) == captures
        with internals.config.patch({"triton.cudagraphs": False}):
            assert not compile_uses_graphs()  # outside vLLM's compile: Inductor's flag
