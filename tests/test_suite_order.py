"""The suite's scheduling list (tests/conftest.py ``LONGEST_FIRST``) names test files that
exist: a renamed file would silently lose its place at the front."""

from __future__ import annotations

from tests.conftest import LONGEST_FIRST, REPO


def test_longest_first_names_existing_test_files() -> None:
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [p for p in LONGEST_FIRST if not (REPO / p).is_file()] == []
