"""What a warning logged once per key (a tool's name, say) remembers: the last keys warned about.

A process-wide set of them grew by one entry per distinct key for as long as the process ran: a
service whose tools are named per request or per tenant (tools made on the fly, MCP servers
listing names of their own) kept every name it ever warned about. The last ``kept`` are
remembered, as ``adk.mcp``'s ``ListingWarnings`` keeps a server's last listings: a key warned
about again after that many others is warned about again, once.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable

__all__ = ["Warned"]


class Warned:
    """Keys warned about, the last ``kept`` of them (oldest let go first); shared by event loops
    of several threads, so ``first`` holds a lock while it changes them."""

    __slots__ = ("_kept", "_lock", "_seen")

    def __init__(self, kept: int = 256) -> None:
        self._kept = kept
        self._seen: dict[Hashable, None] = {}
        self._lock = threading.Lock()

    def first(self, key: Hashable) -> bool:
        """Whether ``key`` is not among those remembered; it is from now on."""
        with self._lock:
            seen = self._seen
            if key in seen:
                return False
            seen[key] = None
            if len(seen) > self._kept:
                del seen[next(iter(seen))]
            return True

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def discard(self, key: Hashable) -> None:
        """Forget ``key``: it is warned about again (tests that look for the warning)."""
        with self._lock:
            self._seen.pop(key, None)

    def difference_update(self, keys: Iterable[Hashable]) -> None:
        """Forget each of ``keys``, as ``set.difference_update``."""
        for key in keys:
            self.discard(key)
