"""Which of Inductor's selections are GEMMs: the plugin records and serves those
(:func:`is_gemm_op`), and leaves every other selection to Inductor."""


# Every GEMM lowering of torch 2.13/2.14 that calls Inductor's selector, GPU and CPU.
GEMM_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "mm_plus_mm", "int_mm", "scaled_mm", "scaled_mm_v2",
    "sparse_semi_structured_mm", "grouped_mm", "scaled_grouped_mm",
    # CPU (mkldnn and weight-only-quantized lowerings)
    "packed_linear", "linear_unary", "linear_binary", "qlinear_unary", "qlinear_binary",
    "grouped_gemm", "_weight_int8pack_mm", "_weight_int4pack_mm_for_cpu",
    # a GEMM with its epilogue fused, against Inductor's own (epilogue_fusion.py)
    "gemm_epilogue",
})
# Selector calls that are not recorded, and why (docs/tuning-db.md lists them too).
EXCLUDED_OPS = {
    "b2b_gemm": "two fused GEMMs with a pointwise subgraph between them; the subgraph "
                "changes the result and is code, not a keyable attribute",
    "convolution": "not a GEMM; stride, padding, dilation and groups are not inputs",
    "convolution_bwd_weight": "not a GEMM (convolution backward)",
    "convolution_bwd_input": "not a GEMM (convolution backward)",
}


def is_gemm_op(name: str) -> bool:
    """GEMM lowerings, GPU and CPU. Names outside ``GEMM_OPS`` that still look like a
    GEMM (a linear or ``*_mm`` op of a newer torch) are recorded too; attention
    (``flex_*``), convolution, ``b2b_gemm`` and user custom-op autotuning are not."""
    if name in GEMM_OPS:
        return True
    if name in EXCLUDED_OPS or name.startswith("flex_"):
        return False
    return "linear" in name or name.endswith("_mm")
