"""The build pool's claim table: who builds each job (free, a thread of the parent,
closed, or a worker), one flag per job in shared memory under a process-shared lock, so
workers take their next job without asking the parent (:mod:`.build_pool`)."""

from __future__ import annotations

from typing import Any

FREE = 0
ELSEWHERE = -1  # taken by a thread of the parent; worker slot s takes a job as s + 1
CLOSED = -2  # nobody builds it (the pool gave up, or its caller did)
# Jobs a long-lived pool can be given over its life (an index is never reused, so a
# late claim can never hit another run's job); 64k int32 flags = 256 KiB shared memory.
CAPACITY = 1 << 16


class Claims:
    """Who builds each job: free, a parent thread, closed, or worker slot ``s`` (``s +
    1``). Shared by the parent's threads and the workers; made with the pool's context."""

    def __init__(self, context: Any, capacity: int) -> None:
        self._lock = context.Lock()
        self._state = context.RawArray("i", max(1, capacity))
        self.capacity = max(1, capacity)

    def take(self, index: int, owner: int = ELSEWHERE) -> bool:
        """Take job ``index`` for ``owner`` if nobody has; True when taken."""
        with self._lock:
            if self._state[index] != FREE:
                return False
            self._state[index] = owner
            return True

    def take_next(self, base: int, count: int, slot: int) -> int | None:
        """The first free job of ``base .. base + count - 1``, taken for worker ``slot``."""
        with self._lock:
            for index in range(base, base + count):
                if self._state[index] == FREE:
                    self._state[index] = slot + 1
                    return index
        return None

    def owners(self, base: int, count: int) -> list[int]:
        with self._lock:
            return list(self._state[base:base + count])
