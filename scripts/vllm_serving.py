#!/usr/bin/env python3
"""``inductor-flydsl vllm-serving`` from a source checkout: vLLM throughput and latency
with and without the plugin on a ROCm GPU. The code is the package's
(``inductor_flydsl/cli/vllm_serving.py``; its docstring says what it measures).

    python scripts/vllm_serving.py --model /models/Llama-3.2-1B [--json out.json]

Exit codes: 0 measured; 2 bad input; 3 vLLM does not import; 4 no ROCm GPU; 5 a run failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a source checkout without installing
    sys.path.insert(0, str(ROOT))

from inductor_flydsl.cli.vllm_serving import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="vllm_serving.py"))
