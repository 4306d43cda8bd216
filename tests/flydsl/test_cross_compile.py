"""Real FlyDSL cross-compiles of the dense GEMM template (CPU only, no GPU launch).

Each (config, variant) compiles once per session through the ``compiled`` fixture.
"""

import hashlib
import shutil
from pathlib import Path

import pytest

from inductor_flydsl.flydsl_backend.builds import toolchain
from inductor_flydsl.flydsl_backend.builds.cross_compile import (
    compile_config,
    load_template,
    template_source_hash,
)
from inductor_flydsl.flydsl_backend.offer import configs, resources
from inductor_flydsl.isa.stats import parse_isa
from inductor_flydsl.provenance import software

pytest.importorskip("flydsl")
if toolchain.find_ld_lld() is None:
    pytest.skip(f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}", allow_module_level=True)

gemm = load_template("gemm_dense")
Config = gemm.GemmConfig

BASE = Config(tile_m=64, tile_n=64, tile_k=64, waves_m=2, waves_n=2, stages=2, group_m=8)
MEDIUM = Config(tile_m=128, tile_n=128, tile_k=64, waves_m=2, waves_n=2, stages=1, group_m=4)

# (config, arch, dtype, layout, op): every layout and op once on gfx950 bf16, plus fp16
# and gfx942 samples.
SAMPLES = [
    (BASE, "gfx950", "bf16", "nn", "mm"),
    (BASE, "gfx950", "bf16", "nt", "mm"),
    (BASE, "gfx950", "bf16", "tn", "mm"),
    (BASE, "gfx950", "bf16", "tt", "mm"),
    (BASE, "gfx950", "bf16", "nt", "addmm"),
    (BASE, "gfx950", "bf16", "nn", "bmm"),
    (MEDIUM, "gfx950", "fp16", "nt", "addmm"),
    (BASE, "gfx950", "fp16", "tt", "bmm"),
    (BASE, "gfx942", "bf16", "nt", "mm"),
    (MEDIUM, "gfx942", "fp16", "tn", "addmm"),
]


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    """Memoized compile_config: each variant compiles once per test session."""
    dump_root = tmp_path_factory.mktemp("flydsl_dump")
    cache: dict = {}

    def get(config, arch, dtype="bf16", layout="nt", op="mm"):
        key = (config, arch, dtype, layout, op)
        if key not in cache:
            cache[key] = compile_config(
                "gemm_dense",
                config,
                arch=arch,
                dtype=dtype,
                layout=layout,
                op=op,
                dump_dir=dump_root,
            )
        return cache[key]

    return get


@pytest.mark.parametrize(("config", "arch", "dtype", "layout", "op"), SAMPLES)
def test_variant_compiles_clean(compiled, config, arch, dtype, layout, op):
    result = compiled(config, arch, dtype, layout, op)
    assert result.ok, result.error
    assert resources.limit_violations(result) == []
    assert result.scratch_bytes == 0 and result.vgpr_spills == 0 and result.sgpr_spills == 0
    assert result.lds_bytes == gemm.lds_bytes(config, layout, arch)
    assert result.lds_bytes <= resources.LDS_LIMIT_BYTES[arch]
    assert result.total_vgprs <= resources.vgpr_budget(config)
    assert result.max_workgroup_size == config.num_threads
    mnemonic = gemm.MFMA_MNEMONIC[(arch, dtype)]
    assert set(result.mfma_counts) == {mnemonic}
    # At least one copy of a K step's MFMAs per place the code computes a step: the loop
    # body and the last step (register-staged), or the loop body and the stages - 1
    # drain steps (direct-to-LDS; the single-buffer loop has only its body).
    rep = (config.tile_m // config.waves_m // 16) * (config.tile_n // config.waves_n // 16)
    per_step = rep * config.tile_k // gemm.MFMA_K[arch]
    copies = config.stages if gemm.uses_async_lds(layout, arch) else 2
    assert result.mfma_counts[mnemonic] >= copies * per_step
    assert parse_isa(open(result.isa_path).read()).mfma_counts == result.mfma_counts


def test_resource_model_accepts_what_compiles(compiled):
    """Configs the model accepts compile without spills and within limits."""
    sample = [
        (Config(tile_m=16, tile_n=64, tile_k=128, waves_m=1, waves_n=2), "gfx950"),
        (Config(tile_m=128, tile_n=256, tile_k=64, waves_m=2, waves_n=4), "gfx950"),
        (MEDIUM, "gfx942"),
    ]
    for config, arch in sample:
        assert resources.estimate(config, "bf16", arch)[2], config
        result = compiled(config, arch)
        assert resources.limit_violations(result) == [], (config, arch)
        assert resources.estimate_vgprs(config, arch) >= result.total_vgprs - 16


def test_resource_model_rejects_lds_overflow_gfx942(compiled):
    config = Config(tile_m=128, tile_n=128, tile_k=64, waves_m=2, waves_n=2, stages=2)
    lds, _, ok, reasons = resources.estimate(config, "bf16", "gfx942")
    assert not ok and lds > resources.LDS_LIMIT_BYTES["gfx942"]
    assert any("LDS" in reason for reason in reasons)
    result = compiled(config, "gfx942")
    assert not result.ok
    assert "local memory" in result.error
    assert result.lds_bytes == lds
    # The same config fits gfx950.
    assert resources.estimate(config, "bf16", "gfx950")[2]


@pytest.mark.slow
def test_resource_model_rejects_register_overflow(compiled):
    """A single-wave 256x256 tile needs far more than 512 registers: the compiler spills."""
    config = Config(tile_m=256, tile_n=256, tile_k=32, waves_m=1, waves_n=1, stages=1)
    _, vgprs, ok, reasons = resources.estimate(config, "bf16", "gfx950")
    assert not ok and vgprs > resources.vgpr_budget(config)
    assert any("VGPR" in reason for reason in reasons)
    result = compiled(config, "gfx950")
    assert result.vgpr_spills > 0 and result.scratch_bytes > 0
    assert resources.limit_violations(result)


def test_invalid_config_is_reported_not_raised():
    result = compile_config(
        "gemm_dense", {"tile_m": 48}, arch="gfx950", dtype="bf16", layout="nt", op="mm"
    )
    assert not result.ok and result.error.startswith("invalid:")


def test_default_configs_validate_and_fit_gfx950():
    # issue 8: at most 40; issue 43 added decode configs (deeper pipelines, split-K in one
    # launch): a compile with no record benchmarks the model's top 4 of them (decisions.md)
    assert 12 <= len(configs.DEFAULT) <= 48
    for config in configs.DEFAULT:
        config.validate()
        assert Config.from_json(config.to_json()) == config
    assert len(configs.default_configs("gfx950")) >= 12


def _sha16(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def test_source_hash_is_its_sources_digest_and_follows_an_edit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hash is computed here from the files themselves (not compared with itself), and
    an edit of shared code (fused_epilogue.py, in a copy of the templates) changes the
    hash of every template built on it, not of one that is not."""
    root = software.templates_dir()
    assert root is not None

    # each template's sources, in the order its hash takes them (the shipped DBs' records
    # carry these hashes: the order is part of the identity)
    sources = {"gemm_dense": ("gemm_dense", "fused_epilogue"),
               "gemm_grouped": ("gemm_grouped", "gemm_dense", "fused_epilogue"),
               "gemm_mx": ("gemm_mx", "gemm_dense", "fused_epilogue")}
    assert {n: software.template_sources(n) for n in sources} == sources

    def expected(name: str, where: Path) -> str:
        parts = sources[name]
        digests = [_sha16((where / f"{part}.py").read_bytes()) for part in parts]
        return digests[0] if len(digests) == 1 else _sha16(" ".join(digests).encode())

    assert template_source_hash("gemm_dense") == expected("gemm_dense", root)
    copy = tmp_path / "templates"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(software, "templates_dir", lambda: copy)
    before = {n: template_source_hash(n) for n in ("gemm_dense", "gemm_grouped", "gemm_mx")}
    assert before["gemm_dense"] == expected("gemm_dense", root)
    edited = copy / "fused_epilogue.py"
    edited.write_text(edited.read_text() + "\n# an edit\n")
    after = {n: template_source_hash(n) for n in before}
    for name in before:
        assert after[name] == expected(name, copy) != before[name]
    (copy / "gemm_mx.py").write_text((copy / "gemm_mx.py").read_text() + "\n# another\n")
    assert template_source_hash("gemm_dense") == after["gemm_dense"]  # not built on gemm_mx
    assert template_source_hash("gemm_mx") != after["gemm_mx"]
