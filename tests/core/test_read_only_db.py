"""A tuning DB on a read-only folder (file and folder not writable, as on a shared
read-only mount) is served read-only: its hits are found, nothing is recorded, and one
warning says so.

The folder must really be read-only for the process that opens it. chmod does not stop
root, so when a write still succeeds after chmod (tests running as root), the check runs
in a subprocess inside a user and mount namespace (``unshare -rm``) where the folder is
bind-mounted read-only: the kernel refuses writes there even to root (EROFS). The test is
skipped, with the reason, only when neither way gives a read-only folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inductor_flydsl.db.store import CandidateResult, TuningDB
from inductor_flydsl.problems.problem import synthetic_problem
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.provenance.software import current_software, template_source_hash

REPO = Path(__file__).resolve().parents[2]
FLYDSL = {"template": "gemm_dense", "template_hash": template_source_hash("gemm_dense")}

CHECK = textwrap.dedent("""
    import sys, warnings
    from pathlib import Path
    from inductor_flydsl.db.layered import LayeredTuningDB
    from inductor_flydsl.telemetry.user_warnings import TuningDBWarning
    from inductor_flydsl.provenance.device import DeviceInfo
    from inductor_flydsl.problems.problem import synthetic_problem
    from inductor_flydsl.settings import Mode, Settings
    from inductor_flydsl.provenance.software import current_software
    from inductor_flydsl.db.store import CandidateResult

    path = Path(sys.argv[1])
    device = DeviceInfo(kind="rocm", arch="gfx950", name="MI355X", compute_units=256)
    problem = lambda m: synthetic_problem("mm", m, 4096, 4096, dtype="bfloat16", layout="nt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = LayeredTuningDB(Settings(db_path=path, mode=Mode.READWRITE, use_shipped=False))
        hit = db.lookup(device, current_software(), problem(8))
        miss = db.lookup(device, current_software(), problem(16))
        recorded = db.record_selection(device, current_software(), problem(16),
                                       [CandidateResult("c", "flydsl", "c", {}, 2.0)])
        again = db.lookup(device, current_software(), problem(8))
        db.close()
    messages = [str(w.message) for w in caught if issubclass(w.category, TuningDBWarning)]
    print("HIT", hit.candidate_id if hit else None)
    print("MISS", miss)
    print("RECORDED", recorded)
    print("AGAIN", again.candidate_id if again else None)
    print("WARNINGS", len(messages))
    for m in messages:
        print("WARNING", m)
""")


def _recorded_db(path: Path, *, unmerged_wal: bool = False) -> None:
    """A tuning DB holding one winner. ``unmerged_wal``: the winner is only in the -wal
    file (copied, with its -shm, while the writer still had it open, as a snapshot of a
    volume being written elsewhere): immutable mode would not see it."""
    source = path.with_name("writer.db") if unmerged_wal else path
    db = TuningDB.open(source, writable=True)
    if unmerged_wal:
        db.db.execute("PRAGMA wal_autocheckpoint=0")
    device = DeviceInfo(kind="rocm", arch="gfx950", name="MI355X", compute_units=256)
    db.record_selection(device, current_software(),
                        synthetic_problem("mm", 8, 4096, 4096, dtype="bfloat16", layout="nt"),
                        [CandidateResult("flydsl-best", "flydsl", "flydsl-best", FLYDSL, 1.0)])
    if unmerged_wal:
        for suffix in ("", "-wal", "-shm"):
            shutil.copy(f"{source}{suffix}", f"{path}{suffix}")
        assert path.with_name(path.name + "-wal").stat().st_size > 0
    db.close()
    if unmerged_wal:
        for leftover in source.parent.glob(source.name + "*"):
            leftover.unlink()


def _write_refused(folder: Path) -> bool:
    probe = folder / "probe"
    try:
        probe.write_text("x")
    except OSError:
        return True
    probe.unlink()
    return False


def _run_check(folder: Path, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", CHECK, str(db)]
    if not _write_refused(folder):  # root: chmod is not enough, use a read-only bind mount
        unshare = shutil.which("unshare")
        if unshare is None:
            pytest.skip("running as root and no `unshare`: cannot make a read-only folder")
        probe = subprocess.run([unshare, "-rm", "true"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip("running as root and user namespaces are unavailable "
                        f"({probe.stderr.decode().strip()}): cannot make a read-only folder")
        script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && '
                  '! touch "$1/probe" 2>/dev/null && shift && exec "$@"')
        command = [unshare, "-rm", "sh", "-c", script, "sh", str(folder), *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("unmerged_wal", [False, True], ids=["packed", "unmerged_wal"])
def test_read_only_folder_serves_hits_records_nothing_one_warning(
        tmp_path: Path, unmerged_wal: bool) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    db = folder / "tuning.db"
    _recorded_db(db, unmerged_wal=unmerged_wal)
    before = sorted(p.name for p in folder.iterdir())
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        done = _run_check(folder, db)
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "HIT flydsl-best" in lines
    assert "MISS None" in lines
    assert "RECORDED False" in lines
    assert "AGAIN flydsl-best" in lines
    assert "WARNINGS 1" in lines, done.stdout
    warning = next(line for line in lines if line.startswith("WARNING "))
    assert "read-only" in warning and "records nothing" in warning
    assert "not used" not in warning
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == before  # no -wal/-shm left behind
