"""A user's own post-grad and post-fusion passes, in every form torch accepts, keep working
with the plugin on: chained as Inductor runs them, keyed by their own uuid()s, restored by
disable() (issue 33, point 1). Real torch.compile, plugin on with a fresh DB."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._inductor import config
from torch._inductor.custom_graph_pass import (
    CustomGraphPass,
    CustomInferenceAwareGraphPass,
    CustomSchedulerPass,
)

import inductor_flydsl
from inductor_flydsl.inductor.fusion.epilogue_fusion import EpilogueFusionPass
from inductor_flydsl.inductor.fusion.fusion_observer import (
    PostFusionObserver,
    UncachedPostFusionObserver,
)

RAN: list[tuple[str, Any]] = []


def plain_pass(graph: torch.fx.Graph) -> None:
    RAN.append(("plain", len(graph.nodes)))


class CountingPass(CustomGraphPass):
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, graph: torch.fx.Graph) -> None:
        RAN.append((self.name, len(graph.nodes)))

    def uuid(self) -> Any:
        return f"counting-pass-{self.name}"


class AwarePass(CustomInferenceAwareGraphPass):
    def __call__(self, graph: torch.fx.Graph, is_inference: bool) -> None:
        RAN.append(("aware", is_inference))

    def uuid(self) -> Any:
        return "aware-pass"


class SchedulerPass(CustomSchedulerPass):
    def __call__(self, nodes: list[Any]) -> list[Any]:
        RAN.append(("scheduler", len(nodes)))
        return nodes

    def uuid(self) -> Any:
        return "scheduler-pass"


FORMS: dict[str, Any] = {
    "callable": plain_pass,
    "custom": CountingPass("a"),
    "list": [CountingPass("a"), plain_pass, CountingPass("b")],
    "tuple": (CountingPass("b"), CountingPass("a")),
    "inference_aware": AwarePass(),
    "list_with_inference_aware": [AwarePass(), CountingPass("a")],
}
EXPECTED = {
    "callable": ["plain"], "custom": ["a"], "list": ["a", "plain", "b"], "tuple": ["b", "a"],
    "inference_aware": ["aware"], "list_with_inference_aware": ["aware", "a"],
}


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(),
                               torch.nn.Linear(48, 48), torch.nn.GELU(),
                               torch.nn.Linear(48, 16)).eval()


@pytest.fixture
def clean_config(tmp_path: Path) -> Iterator[Path]:
    before = (config.post_grad_custom_post_pass, config._post_fusion_custom_pass)
    RAN.clear()
    torch._dynamo.reset()
    try:
        with config.patch(fx_graph_cache=False):
            yield tmp_path / "t.db"
    finally:
        inductor_flydsl.disable()
        config.post_grad_custom_post_pass, config._post_fusion_custom_pass = before
        torch._dynamo.reset()


def _compile_and_check(mode: str) -> None:
    model, x = _mlp(), torch.randn(8, 32)
    with torch.no_grad():
        expected = model(x)
        got = torch.compile(model, mode=mode)(x)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_set_before_enable(form: str, clean_config: Path) -> None:
    config.post_grad_custom_post_pass = FORMS[form]
    inductor_flydsl.enable(clean_config, "readwrite")
    assert isinstance(config.post_grad_custom_post_pass, EpilogueFusionPass)
    _compile_and_check("max-autotune")
    assert [name for name, _ in RAN] == EXPECTED[form]
    if "aware" in form:  # torch.no_grad(): an inference graph, as Inductor says
        assert ("aware", True) in RAN
    inductor_flydsl.disable()
    assert config.post_grad_custom_post_pass is FORMS[form]  # restored, the same object


@pytest.mark.parametrize("form", ["list", "inference_aware"])
def test_default_mode(form: str, clean_config: Path) -> None:
    config.post_grad_custom_post_pass = FORMS[form]
    inductor_flydsl.enable(clean_config, "readwrite")
    _compile_and_check("default")
    assert [name for name, _ in RAN] == EXPECTED[form]


def test_set_after_enable(clean_config: Path) -> None:
    """A value set after enable() replaces the plugin's pass: the user's passes run as
    Inductor runs them; a second enable() chains them again."""
    inductor_flydsl.enable(clean_config, "readwrite")
    config.post_grad_custom_post_pass = FORMS["list_with_inference_aware"]
    _compile_and_check("max-autotune")
    assert [name for name, _ in RAN] == ["aware", "a"]
    RAN.clear()
    torch._dynamo.reset()
    inductor_flydsl.enable(clean_config, "readwrite")
    assert config.post_grad_custom_post_pass.inner is FORMS["list_with_inference_aware"]
    _compile_and_check("max-autotune")
    assert [name for name, _ in RAN] == ["aware", "a"]


def test_user_scheduler_pass_runs_under_the_observer(clean_config: Path) -> None:
    user = SchedulerPass()
    config._post_fusion_custom_pass = user
    inductor_flydsl.enable(clean_config, "readwrite")
    assert isinstance(config._post_fusion_custom_pass, PostFusionObserver)
    _compile_and_check("max-autotune")
    assert [name for name, _ in RAN] == ["scheduler"]
    inductor_flydsl.disable()
    assert config._post_fusion_custom_pass is user


def test_plain_scheduler_callable_keeps_inductor_bypassing_its_cache(
        clean_config: Path) -> None:
    """Inductor bypasses its FX-graph cache for a plain callable post-fusion pass; the
    observer around one is no CustomSchedulerPass either, so it still does."""
    config._post_fusion_custom_pass = lambda nodes: nodes
    inductor_flydsl.enable(clean_config, "readwrite")
    assert isinstance(config._post_fusion_custom_pass, UncachedPostFusionObserver)
    assert not isinstance(config._post_fusion_custom_pass, CustomSchedulerPass)


def test_uuid_is_the_user_passes_own() -> None:
    assert EpilogueFusionPass(FORMS["tuple"]).uuid()[-1] == ("counting-pass-b",
                                                             "counting-pass-a")
    assert EpilogueFusionPass(None).uuid()[-1] == ()
    # A plain callable has no uuid: Inductor bypasses its cache for it, with or without
    # the plugin (a falsy uuid() is its signal).
    assert EpilogueFusionPass(plain_pass).uuid() is None
    assert EpilogueFusionPass(FORMS["list"]).uuid() is None
    assert PostFusionObserver(SchedulerPass()).uuid()[-1] == "scheduler-pass"


UUID_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from core.test_user_graph_passes import FORMS
    from inductor_flydsl.inductor.fusion.epilogue_fusion import EpilogueFusionPass
    print(repr(EpilogueFusionPass(FORMS["list_with_inference_aware"]).uuid()))
""")


def test_uuid_is_the_same_in_every_process(tmp_path: Path) -> None:
    tests = str(Path(__file__).resolve().parent.parent)
    script = UUID_SCRIPT.format(tests=tests)
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True, timeout=120).stdout.strip() for _ in range(2)]
    assert runs[0] == runs[1]
    assert "aware-pass" in runs[0] and "0x" not in runs[0]  # no memory address
