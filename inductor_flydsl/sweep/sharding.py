"""Which shard of a sweep this process runs, from the scheduler that started it.

``--shard auto`` reads, in this order:
- SLURM job arrays: ``SLURM_ARRAY_TASK_ID`` and ``SLURM_ARRAY_TASK_COUNT`` (the task ids
  need not start at 0: ``SLURM_ARRAY_TASK_MIN`` is subtracted when set);
- torchrun (and other launchers that set them): ``RANK`` and ``WORLD_SIZE``, with
  ``LOCAL_RANK`` choosing the GPU on the node.

Shards are 1-based (``K/N``), as ``--shard K/N`` takes them. Nothing here schedules work:
the scheduler starts one sweep per shard, each writes its own DB (``{shard}`` in ``--db``
becomes K), and ``inductor-flydsl db merge`` joins them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .items import ItemError

SHARD_PLACEHOLDER = "{shard}"


@dataclass(frozen=True)
class ShardFromEnv:
    k: int  # 1-based
    n: int
    source: str  # "slurm" or "torchrun"
    local_rank: int | None = None  # torchrun's GPU on this node


def _int(environ: Mapping[str, str], name: str) -> int:
    try:
        return int(environ[name])
    except ValueError:
        raise ItemError(f"--shard auto: {name}={environ[name]!r} is not an integer") from None


def shard_from_environment(environ: Mapping[str, str]) -> ShardFromEnv:
    """The shard the scheduler's variables name; ItemError when none are set or bad."""
    if "SLURM_ARRAY_TASK_ID" in environ or "SLURM_ARRAY_TASK_COUNT" in environ:
        if "SLURM_ARRAY_TASK_COUNT" not in environ or "SLURM_ARRAY_TASK_ID" not in environ:
            raise ItemError("--shard auto: SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT "
                            "must both be set (run under sbatch --array)")
        task, count = _int(environ, "SLURM_ARRAY_TASK_ID"), _int(
            environ, "SLURM_ARRAY_TASK_COUNT")
        first = _int(environ, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in \
            environ else 0
        k, n, source, local = task - first + 1, count, "slurm", None
    elif "RANK" in environ or "WORLD_SIZE" in environ:
        if "RANK" not in environ or "WORLD_SIZE" not in environ:
            raise ItemError("--shard auto: RANK and WORLD_SIZE must both be set (torchrun)")
        k, n, source = _int(environ, "RANK") + 1, _int(environ, "WORLD_SIZE"), "torchrun"
        local = _int(environ, "LOCAL_RANK") if "LOCAL_RANK" in environ else None
    else:
        raise ItemError("--shard auto: no scheduler variables found (SLURM_ARRAY_TASK_ID/"
                        "SLURM_ARRAY_TASK_COUNT or RANK/WORLD_SIZE); use --shard K/N")
    if n < 1 or not 1 <= k <= n:
        raise ItemError(f"--shard auto ({source}): shard {k} of {n} is out of range "
                        "(sbatch --array ids must be consecutive)")
    return ShardFromEnv(k, n, source, local)


def shard_db_path(path: Path, shard: tuple[int, int] | None) -> Path:
    """``{shard}`` in the DB path becomes the shard number K."""
    text = str(path)
    if SHARD_PLACEHOLDER not in text:
        return path
    if shard is None:
        raise ItemError(f"--db {text}: {SHARD_PLACEHOLDER} needs --shard K/N or --shard auto")
    return Path(text.replace(SHARD_PLACEHOLDER, str(shard[0])))
