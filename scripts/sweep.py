"""Offline GEMM tuning sweep; the same as ``inductor-flydsl sweep``.

    python scripts/sweep.py                       # cpu-smoke on CPU, dense-bf16-suite on GPU
    python scripts/sweep.py --preset llama3-8b --devices all --resume
"""

from __future__ import annotations

import sys

from inductor_flydsl.cli.sweep_command import main

if __name__ == "__main__":
    sys.exit(main())
