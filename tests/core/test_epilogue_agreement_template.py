"""The rule "with the plugin on, the final code uses the kernels plain Inductor picks",
with Inductor steered towards the C++ GEMM template (the epilogue fused into it): plugin
off, on with a fresh DB and on with it warm agree (the checks and how they run:
epilogue_agreement.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core import epilogue_agreement as checks

pytestmark = checks.MARKS


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> dict:
    return checks.run_modes("template", tmp_path_factory, shared_builds)


test_same_kernels_counters_and_outputs = checks.test_same_kernels_counters_and_outputs
test_the_steered_kernel_really_ran = checks.test_the_steered_kernel_really_ran
test_warm_db_serves_every_gemm_and_repeats_every_epilogue_decision = \
    checks.test_warm_db_serves_every_gemm_and_repeats_every_epilogue_decision
test_recorded_winner_is_inductors_choice_and_both_timings_are_kept = \
    checks.test_recorded_winner_is_inductors_choice_and_both_timings_are_kept
test_epilogue_decisions_recorded_per_epilogue = \
    checks.test_epilogue_decisions_recorded_per_epilogue
