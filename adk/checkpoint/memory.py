"""``InMemoryCheckpointStore``: the runner's default, for pauses resumed within the same process."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable

from .store import _check_data, _check_id, _check_prefix, _kept

__all__ = ["InMemoryCheckpointStore"]


class InMemoryCheckpointStore:
    """Checkpoints in a dict, lost when the process ends.

    Each method runs to completion without awaiting, so concurrent tasks always see whole values,
    and the store can be shared between event loops. It holds nothing to release, so it has no
    ``aclose``. It deliberately has no ``__len__``: an empty store must not be falsy, or
    ``store or default`` would silently swap it for another one.
    """

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        # Makes ``_put_new``'s (``_replace``'s, ``_delete_if``'s) look and write one step for
        # event loops in several threads; ``put`` and ``delete`` take it too, or one from
        # another thread lands between that look and write (and is written over, or deleted).
        self._new = threading.Lock()

    async def get(self, id: str) -> bytes | None:
        return self._data.get(_check_id(id))

    async def put(self, id: str, data: bytes) -> None:
        key = _check_id(id)
        value = _check_data(data)
        with self._new:
            self._data[key] = value

    async def _put_new(self, id: str, data: bytes, keep: Callable[[bytes], bool]) -> bytes | None:
        """As ``store._PutNewStore._put_new``: one step under a lock, so new runs pausing at once
        under one id in loops of several threads cannot both pass the look."""
        key = _check_id(id)
        value = _check_data(data)
        with self._new:
            old = self._data.get(key)
            if _kept(old, value, keep):
                return old
            self._data[key] = value
        return None

    async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
        """As ``store._ReplacingStore._replace``: compared and written under the lock of
        ``_put_new``, one step for event loops in several threads too."""
        key = _check_id(id)
        value = _check_data(data)
        with self._new:
            now = self._data.get(key)
            if now != old and now != value:
                return False
            self._data[key] = value
        return True

    async def _delete_if(self, id: str, old: bytes) -> bool:
        """As ``store._DeletingIfStore._delete_if``: compared and deleted under the lock of
        ``_put_new``, one step for event loops in several threads too."""
        key = _check_id(id)
        looked = _check_data(old)
        with self._new:
            if self._data.get(key) != looked:
                return False
            del self._data[key]
        return True

    async def delete(self, id: str) -> None:
        key = _check_id(id)
        with self._new:
            self._data.pop(key, None)

    def ids(self, prefix: str | None = None) -> AsyncIterator[str]:
        """As ``ListingCheckpointStore.ids``: the ids held when the listing starts. ``list()``
        copies the keys in one step, so puts and deletes meanwhile, even from an event loop in
        another thread, cannot break it (iterating the dict itself could fail mid-way with
        "dictionary changed size during iteration")."""
        start = _check_prefix(prefix)
        return _each([key for key in list(self._data) if key.startswith(start)])

    def __repr__(self) -> str:
        return f"InMemoryCheckpointStore({len(self._data)} checkpoints)"


async def _each(ids: list[str]) -> AsyncIterator[str]:
    for id in ids:
        yield id
