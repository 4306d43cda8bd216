"""The shipped compile catalog is the current record of the full emulator run of every
template (tests/catalog_sample.py says why and how), and a covering sample reproduces it."""

from __future__ import annotations

from pathlib import Path

import pytest

from inductor_flydsl.flydsl_backend.builds import catalog, toolchain
from tests.catalog_sample import (
    ARCHS,
    covering_sample,
    refresh_command,
    reproduce,
    stale_jobs,
)

pytest.importorskip("flydsl")
TEMPLATES = ("gemm_dense", "gemm_grouped", "gemm_mx")


@pytest.mark.parametrize("template", TEMPLATES)
def test_shipped_rows_are_the_current_templates_full_emulator_run(template: str) -> None:
    jobs = catalog.build_jobs(ARCHS, template=template)
    assert jobs
    stale = stale_jobs(jobs, template)
    assert not stale, (f"{len(stale)} of {len(jobs)} {template} jobs: run "
                       f"`{refresh_command(template)}`\n" + "\n".join(stale[:20]))


def test_the_sample_covers_every_arch_variant_and_config_value() -> None:
    jobs = catalog.build_jobs(ARCHS)
    sample = covering_sample(jobs)
    accepted = [j for j in jobs if j.rejected is None]
    for field in ("arch", "dtype", "layout", "op"):
        assert {getattr(j, field) for j in sample} == {getattr(j, field) for j in accepted}
    for name in dict(accepted[0].config):
        values = {dict(j.config).get(name) for j in accepted}
        assert {dict(j.config).get(name) for j in sample} == values, name
    assert len(sample) < len(accepted) / 4  # the point: far fewer compiles


@pytest.mark.slow
@pytest.mark.skipif(toolchain.find_ld_lld() is None, reason="no AMDGPU-capable ld.lld")
@pytest.mark.parametrize("template", TEMPLATES)
def test_a_covering_sample_compiled_now_is_correct_and_reproduces_its_rows(
        template: str, tmp_path: Path) -> None:
    sample = covering_sample(catalog.build_jobs(ARCHS, template=template))
    problems = reproduce(sample, template, tmp_path)
    assert not problems, (f"run `{refresh_command(template)}` if the template changed\n"
                          + "\n".join(problems))
