"""scripts/vllm_serving.py on a machine without a ROCm GPU: it checks what it can (the
model directory, vLLM), then stops where a GPU is needed, saying so, with its documented
exit code; in an interpreter without vLLM it stops there instead."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO, isolated_env

SCRIPT = REPO / "scripts" / "vllm_serving.py"
HAS_VLLM = importlib.util.find_spec("vllm") is not None and \
    importlib.util.find_spec("vllm").origin is not None  # not a namespace package
HAS_ROCM_GPU = torch.version.hip is not None and torch.cuda.is_available()


def _model_dir(root: Path) -> Path:
    """A model directory as the script checks it (config.json, a weights file); never
    loaded here."""
    model = root / "tiny-llama"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256,
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 4,
        "max_position_embeddings": 4096}))
    (model / "model.safetensors").write_bytes(b"")
    return model


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=isolated_env(tmp_path),
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.skipif(HAS_ROCM_GPU, reason="a ROCm GPU is here: the script would measure")
def test_stops_where_a_gpu_is_needed_and_says_so(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--model", str(_model_dir(tmp_path)))
    assert "model: " in proc.stdout and "LlamaForCausalLM" in proc.stdout, proc.stdout
    if HAS_VLLM:
        assert proc.returncode == 4, (proc.stdout, proc.stderr[-3000:])
        assert "vLLM " in proc.stdout and " imports" in proc.stdout
        assert "this needs a ROCm GPU" in proc.stderr
        assert "stopped before loading the model" in proc.stderr
    else:
        assert proc.returncode == 3, (proc.stdout, proc.stderr[-3000:])
        assert "vLLM does not import in this interpreter" in proc.stderr


def test_bad_input_is_named(tmp_path: Path) -> None:
    missing = _run(tmp_path, "--model", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    model = _model_dir(tmp_path)
    (model / "model.safetensors").unlink()
    no_weights = _run(tmp_path, "--model", str(model))
    assert no_weights.returncode == 2 and "no weight files" in no_weights.stderr
    bad_runs = _run(tmp_path, "--model", str(model), "--runs", "off,hot")
    assert bad_runs.returncode == 2 and "--runs takes some of" in bad_runs.stderr
