"""The one rule for an MX weight whose E8M0 scales are per 32x32 block (vLLM's MXFP8
linear, the MX template's ``nt_b32`` layout): its scale rows, and whether a scale tensor
of some number of rows is such a block scale rather than one row per weight row."""

from __future__ import annotations

BLOCK_ROWS = 32  # weight rows sharing one scale row


def block_scale_rows(n: int) -> int:
    """Scale rows of an (N, K) weight scaled per 32x32 block: ``ceil(N / 32)``."""
    return -(-n // BLOCK_ROWS)


def is_block_scaled(scale_rows: int, n: int) -> bool:
    """``scale_rows`` rows of scales for ``n`` weight rows are per 32x32 block (and not
    also one per row: N > 1)."""
    return n > 1 and scale_rows == block_scale_rows(n)
