"""Numerics of the FlyDSL GEMM kernels on a real AMD GPU (ROCm 7, gfx950 or gfx942).

Skipped unless ``scripts/validate_rocm.py``'s preflight finds a ROCm 7 runtime and a
supported GPU (it never launches anything to find out: a FlyDSL launch without ROCm 7
aborts the process). Every case calls ``templates.gemm_dense.launch`` directly and
compares with a float64 torch reference under ``flydsl_backend.tolerances``; torch's own
``mm``/``addmm``/``bmm`` in the same dtype is held to the same bound.

* every DEFAULT config that fits the GPU, for every dtype, layout and op, on the small
  awkward shapes of ``suites.NUMERICS_SHAPES`` (about 3500 launches, minutes: most of it
  is compiling 24 variants x up to 24 configs once);
* the 15-shape dense suite (``suites.DENSE_BF16_NT_SUITE``) for every dtype, layout and
  op, each shape with the config ``prune_for_shape`` ranks first (bmm with batch 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inductor_flydsl.cli.rocm import epilogues as rocm_epilogues
from inductor_flydsl.flydsl_backend.offer import configs, suites
from inductor_flydsl.flydsl_backend.run import kernel_runner
from inductor_flydsl.template_loader import load_template
from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def _load_validate_rocm():
    return load_script("validate_rocm")


vr = _load_validate_rocm()
PREFLIGHT = vr.preflight()
pytestmark = [
    pytest.mark.rocm,
    pytest.mark.skipif(not PREFLIGHT.ok, reason=f"needs ROCm 7 + gfx950/gfx942: "
                                                f"{PREFLIGHT.message}"),
]
gemm = load_template("gemm_dense")
VARIANTS = [(d, lay, op) for d in gemm.DTYPES for lay in gemm.LAYOUTS for op in gemm.OPS]


def _ids(variant):
    return "-".join(variant)


@pytest.fixture(scope="module")
def device():
    import torch

    return torch.device("cuda", 0)


def _assert_ok(row):
    assert row["ok"], row
    assert row["torch_ok"], f"torch's own result is out of tolerance: {row}"


@pytest.mark.parametrize("variant", VARIANTS, ids=_ids)
def test_default_configs_on_awkward_shapes(device, variant):
    dtype, layout, op = variant
    failures = []
    for config in configs.default_configs(PREFLIGHT.arch, dtype):
        if configs._tpl.split_k_reason(config, op):  # split-K configs: mm and addmm only
            continue
        for i, shape in enumerate(suites.NUMERICS_SHAPES):
            row = vr.numerics_case(config, dtype=dtype, layout=layout, op=op, shape=shape,
                                   device=device, pad=8 if i % 2 else 0,
                                   batch=suites.NUMERICS_BATCH, seed=i)
            if not row["ok"]:
                failures.append(row)
    assert not failures, f"{len(failures)} failures, first: {failures[0]}"


@pytest.mark.parametrize("variant", VARIANTS, ids=_ids)
@pytest.mark.parametrize("shape", suites.DENSE_BF16_NT_SUITE,
                         ids=lambda s: "x".join(map(str, s)))
def test_dense_suite_shapes(device, variant, shape):
    dtype, layout, op = variant
    m, n, k = shape
    candidates = configs.prune_for_shape(configs.default_configs(PREFLIGHT.arch, dtype),
                                         m, n, k, op=op, limit=1)
    assert candidates, f"no DEFAULT config for {shape} on {PREFLIGHT.arch}"
    row = vr.numerics_case(candidates[0], dtype=dtype, layout=layout, op=op, shape=shape,
                           device=device, batch=2, seed=m)
    _assert_ok(row)


@pytest.mark.parametrize("op", ["mm", "addmm"])
def test_split_k_launch_replays_under_graph_capture(device, op):
    """A split-K launch (fp32 workspace from the caching allocator, torch sum on the same
    stream) captured in a graph and replayed on new inputs gives the right result."""
    import torch

    config = gemm.GemmConfig(16, 32, 256, 1, 1, 2, 1, 4)
    if configs.fits(config, PREFLIGHT.arch) is False:
        pytest.skip(f"{config} does not fit {PREFLIGHT.arch}")
    m, n, k = 24, 4104, 4096
    a = torch.randn(m, k, device=device).to(torch.bfloat16)
    b = torch.randn(n, k, device=device).to(torch.bfloat16).t()
    bias = torch.randn(n, device=device).to(torch.bfloat16) if op == "addmm" else None
    out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    alpha, beta = (0.5, -2.0) if op == "addmm" else (1.0, 0.0)
    gemm.launch(a, b, bias, out, alpha, beta, config,
        runner=kernel_runner.runner())  # compiles outside the capture
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        gemm.launch(a, b, bias, out, alpha, beta, config, runner=kernel_runner.runner())
    for seed in range(2):
        torch.manual_seed(seed)
        a.copy_(torch.randn(m, k, device=device))
        b.copy_(torch.randn(n, k, device=device).t())
        graph.replay()
        torch.cuda.synchronize(device)
        ref = alpha * (a.double() @ b.double())
        if bias is not None:
            ref = ref + beta * bias.double()
        from inductor_flydsl.numerics.tolerances import check_close

        close = check_close(out, ref, "bf16", k, scale=abs(alpha))
        assert close.ok, close.to_json()


GROUPED_VARIANTS = [(d, lay) for d in ("bf16", "fp16") for lay in ("nt", "nn")]


@pytest.mark.parametrize("variant", GROUPED_VARIANTS, ids=_ids)
def test_grouped_default_configs_on_ragged_groups(device, variant):
    """Every grouped DEFAULT config that fits the GPU, on empty, one-token, dominant and
    single groups with N tails (the emulator's scenarios), against a per-group float64
    reference; rows past the last group stay untouched."""
    from inductor_flydsl.emulator.grouped import grouped_scenarios

    dtype, layout = variant
    failures = []
    for config in (c for c in configs.DEFAULT_GROUPED if configs.fits(c, PREFLIGHT.arch, dtype)):
        for seed, (name, (rows, n, k)) in enumerate(grouped_scenarios(config).items()):
            row = vr.grouped_numerics_case(config, dtype=dtype, layout=layout,
                                           group_rows=rows, n=n, k=k, device=device,
                                           scenario=name, seed=seed)
            if not row["ok"]:
                failures.append(row)
    assert not failures, f"{len(failures)} failures, first: {failures[0]}"


def test_grouped_mm_through_the_custom_op_matches_aten(device):
    """torch.ops.inductor_flydsl.grouped_mm_out (what Inductor's generated code calls) on
    a Zipf-routed MoE shape agrees with the per-group float64 reference, as
    torch._grouped_mm does."""
    import json

    import torch

    from inductor_flydsl.flydsl_backend.run import ops  # noqa: F401  (registers the ops)
    from inductor_flydsl.numerics.gemm import validate_output
    from inductor_flydsl.problems.routing import group_sizes, offsets

    config = next(c for c in configs.DEFAULT_GROUPED if configs.fits(c, PREFLIGHT.arch))
    x = torch.randn(2048, 1024, device=device, dtype=torch.bfloat16)
    w = torch.randn(16, 512, 1024, device=device, dtype=torch.bfloat16).transpose(-1, -2)
    offs = offsets(group_sizes("zipf", 2048, 16)).to(device)
    out = torch.empty(2048, 512, device=device, dtype=torch.bfloat16)
    torch.ops.inductor_flydsl.grouped_mm_out.default(x, w, offs, out,
                                                      json.dumps(config.to_json()))
    torch.cuda.synchronize(device)
    validate_output("grouped_mm", (x, w, offs), out, 1.0, 0.0)
    validate_output("grouped_mm", (x, w, offs), torch._grouped_mm(x, w, offs=offs), 1.0, 0.0)


mx = load_template("gemm_mx")
MX_ONLY = pytest.mark.skipif(PREFLIGHT.arch != "gfx950",
                             reason="MX kernels need gfx950's scaled MFMAs")


@MX_ONLY
@pytest.mark.parametrize("dtype", mx.DTYPES)
def test_mx_default_configs_every_format_pairing(device, dtype):
    """Every MX DEFAULT config for this format pairing (mm and addmm) on a tail shape and
    M = 1, against the float64 dequantize-then-matmul reference; where ATen's
    torch._scaled_mm takes the same scales, it must agree with that reference too."""
    from inductor_flydsl.emulator.mx import mx_tail_shape

    failures = []
    for config in configs.mx_default_configs(dtype):
        m, n, k = mx_tail_shape(config)
        for op in mx.OPS:
            for seed, shape in enumerate(((m, n, k), (1, n, k))):
                row = vr.mx_numerics_case(config, dtype=dtype, op=op, shape=shape,
                                          device=device, seed=seed)
                if not row["ok"]:
                    failures.append(row)
    assert not failures, f"{len(failures)} failures, first: {failures[0]}"


@MX_ONLY
def test_mx_scaled_mm_through_the_custom_op(device):
    """torch.ops.inductor_flydsl.scaled_mm_out (what Inductor's generated code calls) on a
    Llama-3-8B MXFP4 shape agrees with the float64 MX reference (validate_output, the
    check a candidate passes before it may win)."""
    import json

    import torch

    from inductor_flydsl.emulator.mx import make_mx_operands
    from inductor_flydsl.flydsl_backend.run import ops  # noqa: F401  (registers the ops)
    from inductor_flydsl.numerics.gemm import validate_output

    config = configs.mx_default_configs("e2m1xe2m1_bf16")[0]
    a, b, sa, sb, _, out = (t.to(device) for t in make_mx_operands(
        "e2m1xe2m1_bf16", "mm", 256, 4096, 4096) if t is not None)
    torch.ops.inductor_flydsl.scaled_mm_out.default(a, b, sa, sb, out,
                                                     json.dumps(config.to_json()))
    torch.cuda.synchronize(device)
    validate_output("scaled_mm", (a, b, sa, sb), out, 1.0, 0.0)




@pytest.mark.parametrize("case", list(rocm_epilogues.CASES))
def test_fused_epilogue_default_configs(device, case):
    """Every DEFAULT config that takes the epilogue, through the custom op Inductor's
    generated code calls (torch.ops.inductor_flydsl.gemm_epilogue_out), on a tail shape
    (M and N past a tile), against the float64 reference of the epilogue."""
    import json

    import torch

    from inductor_flydsl.flydsl_backend.run import ops  # noqa: F401  (registers the ops)
    from inductor_flydsl.numerics.gemm import validate_epilogue_output
    from inductor_flydsl.problems.epilogue_spec import EpilogueSpec

    _, k, spec_json = rocm_epilogues.CASES[case]
    spec = EpilogueSpec.from_json(spec_json)
    m, n = 77, 264  # tails in M and N (N a multiple of 8)
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=device, dtype=torch.bfloat16).t()
    extras = rocm_epilogues._extras(spec, m, n, device)
    slots = [*extras, *([a] * (4 - len(extras)))]
    out = torch.empty(m, n, device=device, dtype=getattr(torch, spec.out_dtype))
    tried = 0
    for config in configs.default_configs(PREFLIGHT.arch, "bf16"):
        if k % config.tile_k or gemm.epilogue_reason(config, op="mm", epilogue=spec.text()):
            continue
        out.fill_(float("nan"))
        torch.ops.inductor_flydsl.gemm_epilogue_out.default(
            a, b, *slots, out, json.dumps(config.to_json()), spec.text())
        torch.cuda.synchronize(device)
        validate_epilogue_output(spec.text(), (a, b, *slots), out)
        tried += 1
    assert tried, "some DEFAULT config takes the epilogue"


def test_fused_epilogue_speed_report_runs(device):
    """One case of validate_rocm.py section (e) end to end (timings are reported there,
    not asserted here): every column is measured and the fused result is correct."""
    row = rocm_epilogues.epilogue_case("mlp_down_residual", 128, PREFLIGHT.arch, device,
                                       vr.bench_ms)
    assert row["numerics_ok"] is True and row["flydsl_fused_ms"] > 0
    assert row["aten_unfused_ms"] > 0 and row["flydsl_unfused_ms"] > 0
