"""A stored checkpoint changed in place, as the tests that resume what some other writer left do:
an older pyadk that wrote fewer fields, a bug that saved something malformed, a tamperer who
sealed the body again. Kept here once so those tests read, change and write a checkpoint the same
way (through the codec, back under its own id, with a valid checksum) and spell out only what they
change. Tests that save the changed body under another id, or write bytes of their own, do that
themselves."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from adk.checkpoint import CheckpointStore
from adk.checkpoint.codec import decode_checkpoint, encode_checkpoint


@contextlib.asynccontextmanager
async def rewrite_checkpoint(
    store: CheckpointStore, checkpoint_id: str
) -> AsyncIterator[dict[str, Any]]:
    """The decoded body of the checkpoint ``checkpoint_id`` in ``store``, for the block to change;
    encoded and put back under the same id when the block ends, and left as it was if the block
    raises::

        async with rewrite_checkpoint(store, paused.checkpoint_id) as body:
            del body["usage"]  # as a pyadk before usage totals wrote it
    """
    data = await store.get(checkpoint_id)
    assert data is not None, f"no checkpoint {checkpoint_id!r} to rewrite"
    body = decode_checkpoint(data, checkpoint_id)
    yield body
    await store.put(checkpoint_id, encode_checkpoint(body))
