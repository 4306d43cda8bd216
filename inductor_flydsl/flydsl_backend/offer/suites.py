"""Reference problem suites as data, shared by the sweep, ``scripts/validate_rocm.py`` and tests.

Shapes are ``(M, N, K)`` of ``out[M, N] = A[M, K] @ B[K, N]``. "NT" means A row-major and
B given as the transpose of a row-major ``(N, K)`` weight, i.e. ``x @ W.T`` (a linear
layer); the template calls that layout ``"nt"``.
"""

from __future__ import annotations

Shape = tuple[int, int, int]

# The 15-shape dense BF16 NT suite on which upstream's FlyDSL backend published results on
# MI355X (decode-like skinny M up to square 8192^3, plus LLM projection shapes).
DENSE_BF16_NT_SUITE: list[Shape] = [
    *((m, 4096, 4096) for m in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)),
    (4096, 4096, 8192),
    (8192, 8192, 8192),
    (32, 14336, 4096),
    (16, 28672, 4096),
    (4096, 256, 4096),
]

# A 5-shape subset for quick runs: skinny, medium, square, wide-N projection, narrow-N.
DENSE_BF16_NT_QUICK: list[Shape] = [
    (16, 4096, 4096),
    (256, 4096, 4096),
    (4096, 4096, 4096),
    (32, 14336, 4096),
    (4096, 256, 4096),
]

# Small shapes for numerics, chosen to hit the kernel's edge handling: M = 1 and M / N
# that are not multiples of any tile (tails), N at its minimum (8, one 16-byte vector),
# K = 384 (one, three or twelve K steps depending on tile_k). Every tile_k of the template
# (32, 64, 128) divides each K, and every N is a multiple of 8 (a kernel requirement).
# ``validate_rocm`` rounds M up to a multiple of 8 where the layout needs it ("t" A).
NUMERICS_SHAPES: list[Shape] = [
    (1, 8, 128),
    (17, 264, 384),
    (200, 1000, 256),
    (513, 136, 1024),
    (128, 128, 128),
    (1000, 2056, 512),
]

# Batch size used for ``bmm`` in numerics checks.
NUMERICS_BATCH = 3
