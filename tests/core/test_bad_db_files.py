"""Bad DB files: one warning, compilation continues as plain max-autotune, and the file is
never modified or deleted. Real torch.compile in this process, real SQLite files."""

from __future__ import annotations

import hashlib
import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch._inductor.config as inductor_config

import inductor_flydsl
from inductor_flydsl.db.store import TuningDB
from inductor_flydsl.telemetry.user_warnings import TuningDBWarning
from tests.conftest import builds_only_cache


def _good_db(path: Path) -> None:
    TuningDB.open(path, writable=True).close()


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _truncated(path: Path) -> None:
    _good_db(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _not_sqlite(path: Path) -> None:
    path.write_text("this is a text file, not a database\n" * 50)


def _foreign_schema(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("create table users (id integer primary key, name text)")
    conn.execute("insert into users (name) values ('alice')")
    conn.commit()
    conn.close()


def _newer_schema(path: Path) -> None:
    _good_db(path)
    conn = sqlite3.connect(path)
    conn.execute("update meta set value = '99' where key = 'schema_version'")
    conn.commit()
    conn.close()


def _garbage_after_header(path: Path) -> None:
    _good_db(path)
    data = bytearray(path.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)
    path.write_bytes(bytes(data))


CASES: dict[str, Callable[[Path], None]] = {
    "empty": _empty,
    "truncated": _truncated,
    "not_sqlite": _not_sqlite,
    "foreign_schema": _foreign_schema,
    "newer_schema": _newer_schema,
    "corrupt_pages": _garbage_after_header,
}


def _compile_frozen_linear() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU()).eval()
    x = torch.randn(8, 32)
    with torch.no_grad(), builds_only_cache(), inductor_config.patch(freezing=True):
        torch._dynamo.reset()
        y = torch.compile(model, mode="max-autotune")(x)
        return y, model(x)


@pytest.fixture
def plugin_off():
    yield
    inductor_flydsl.disable()
    torch._dynamo.reset()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("mode", ["readwrite", "readonly"])
def test_bad_file_warns_once_and_compile_continues(case: str, mode: str, tmp_path: Path,
                                                   plugin_off: None) -> None:
    path = tmp_path / f"{case}.db"
    CASES[case](path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    inductor_flydsl.enable(path, mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y, expected = _compile_frozen_linear()
    ours = [w for w in caught if issubclass(w.category, TuningDBWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert str(path) in str(ours[0].message)
    torch.testing.assert_close(y, expected)
    assert path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not path.with_name(path.name + "-wal").exists()


def test_missing_file_in_readonly_mode_is_not_created(tmp_path: Path, plugin_off: None) -> None:
    path = tmp_path / "absent" / "tuning.db"
    inductor_flydsl.enable(path, "readonly")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y, expected = _compile_frozen_linear()
    assert len([w for w in caught if issubclass(w.category, TuningDBWarning)]) == 1
    torch.testing.assert_close(y, expected)
    assert not path.exists() and not path.parent.exists()


def test_missing_file_in_readwrite_mode_is_created_and_filled(tmp_path: Path,
                                                              plugin_off: None) -> None:
    path = tmp_path / "tuning.db"  # a folder given is never created (issue 52)
    inductor_flydsl.enable(path, "readwrite")
    before = inductor_flydsl.stats()["recorded"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _compile_frozen_linear()
    assert not [w for w in caught if issubclass(w.category, TuningDBWarning)]
    assert inductor_flydsl.stats()["recorded"] == before + 1
    inductor_flydsl.disable()
    conn = sqlite3.connect(path)
    assert conn.execute("select count(*) from winners").fetchone()[0] == 1
    conn.close()


def test_disk_full_keeps_rows_and_compiles(tmp_path: Path, plugin_off: None) -> None:
    """A DB on a tiny tmpfs that fills up: one warning, the compile goes on."""
    import subprocess

    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                      capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        path = mnt / "tuning.db"
        TuningDB.open(path, writable=True).close()
        filler = mnt / "filler"
        with open(filler, "wb", buffering=0) as f:  # fill the rest of the file system
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        inductor_flydsl.enable(path, "readwrite")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y, expected = _compile_frozen_linear()
        torch.testing.assert_close(y, expected)
        messages = [str(w.message) for w in caught if issubclass(w.category, TuningDBWarning)]
        assert len(messages) == 1 and ("full" in messages[0] or "write" in messages[0])
        inductor_flydsl.disable()
        filler.unlink()
        conn = sqlite3.connect(path)
        assert conn.execute("select value from meta where key = 'schema_version'").fetchone()
        conn.close()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_warnings_as_errors_never_fail_the_compile(tmp_path: Path, plugin_off: None) -> None:
    """Under ``-W error`` the plugin's own warning must not escape its hooks."""
    path = tmp_path / "junk.db"
    _not_sqlite(path)
    inductor_flydsl.enable(path, "readwrite")
    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningDBWarning)
        y, expected = _compile_frozen_linear()
    torch.testing.assert_close(y, expected)
    assert inductor_flydsl.stats()["errors"] == 0
