#!/usr/bin/env python
"""``inductor-flydsl validate-rocm`` from a source checkout: the FlyDSL kernels' numerics
and speed on an MI300/MI350. The code is the package's (``inductor_flydsl/cli/rocm/``);
run from here, section (g) (``scripts/rocm_graphs.py``, beside this file) runs too.

    python scripts/validate_rocm.py [--quick] [--json] [--out report.md] ...

Exit status: 0 all numerics passed, 1 a numerics failure, 2 unsupported environment.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a source checkout without installing
    sys.path.insert(0, str(ROOT))

# the names the tests use (tests/test_rocm_validation.py, tests/test_compile_check.py)
from inductor_flydsl.cli.rocm.dense import adapt_shape, bench_ms, numerics_case  # noqa: E402
from inductor_flydsl.cli.rocm.grouped import grouped_numerics_case  # noqa: E402
from inductor_flydsl.cli.rocm.mx import mx_numerics_case  # noqa: E402
from inductor_flydsl.cli.rocm.report import markdown_report  # noqa: E402
from inductor_flydsl.cli.rocm.validate import Preflight, main, preflight  # noqa: E402

__all__ = ["Preflight", "adapt_shape", "bench_ms", "grouped_numerics_case", "main",
           "markdown_report", "mx_numerics_case", "numerics_case", "preflight"]

if __name__ == "__main__":
    sys.exit(main(prog="validate_rocm.py"))
