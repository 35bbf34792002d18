"""``RedisCheckpointStore``: checkpoints as Redis string values (``pip install pyadk[redis]``).

Atomicity comes from Redis itself: a checkpoint is one ``SET``, and the server applies a command only
once it has received all of it, so a connection lost mid-write leaves the previous value. Operations
are idempotent, so the client retries lost connections (three times, 20 ms–0.5 s backoff) before
reporting a ``CheckpointStoreError``; a Redis that is down fails within about a second. A Redis
that stops answering (a stopped process, a network partition that drops packets) fails each
operation after ``timeout`` seconds: a cancelled command's connection is closed, never reused
with its answer still to come.

A claim (one resume of a checkpoint at a time, across processes) is a key beside the checkpoint's,
``prefix + id + "\\x00claim"`` (ids never contain NUL, so it cannot collide with a checkpoint key),
holding the owner and expiring with Redis's own ``PX``; taking and releasing it are Lua scripts,
atomic on the server.
A claim is a key with an expiry, the first a Redis full under a ``volatile-*`` policy evicts, and
then two resumes may run at once: the store asks the server's ``maxmemory*`` settings at its first
claim and warns when it evicts (docs/interrupts.md, checkpoints and stores).

``ids`` walks the keyspace with ``SCAN`` (never ``KEYS``, which blocks the server for as long as
it takes to list every key), matching the store's key prefix and the ids' prefix, string keys
only, a batch (``_SCAN_COUNT`` keys asked for) per command; claim keys and keys no ``put`` could
have written are left out. ``SCAN`` may return a key twice (when the server resizes its table
mid-walk), so the ids listed so far are remembered to list each once: about 100 bytes per id,
never the checkpoints.

Only this module imports ``redis``; ``adk.checkpoint`` loads it on first use of the class.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._loop_clients import LoopClients
from .store import (
    CheckpointStoreError,
    _check_data,
    _check_heads,
    _check_id,
    _check_owner,
    _check_prefix,
    _ClosableStore,
    _InUse,
    _kept,
    _listable,
    _positive_seconds,
    _redact,
    _store_error,
)

__all__ = ["RedisCheckpointStore"]

T = TypeVar("T")

logger = logging.getLogger("adk.checkpoint")

# KEYS[1]: the claim key; ARGV: owner, milliseconds. 1 when taken (free, lapsed or renewed).
_CLAIM = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
# A renewal (``_renew``): 1 only when the key still holds the owner (not lapsed: Redis drops
# a lapsed key, so one taken and released meanwhile is not taken again).
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS[1]: the checkpoint key; ARGV: "1" and the bytes looked at, or "0" and "" for none; the
# new bytes; milliseconds to expiry ("" for none). 1 when written (``_put_new``).
_PUT_NEW = """
local now = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if now ~= ARGV[2] then return 0 end
elseif now then
  return 0
end
if ARGV[4] == '' then
  redis.call('SET', KEYS[1], ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
end
return 1
"""
# KEYS[1]: the checkpoint key; ARGV: the bytes the writer last knew; the new bytes;
# milliseconds to expiry ("" for none). 1 when it holds the new bytes (``_replace``): written
# now, or already (a script the client sent again after its connection was lost had run).
_REPLACE = """
local now = redis.call('GET', KEYS[1])
if now == ARGV[2] then return 1 end
if now ~= ARGV[1] then return 0 end
if ARGV[3] == '' then
  redis.call('SET', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1
"""
# KEYS[1]: the checkpoint key; ARGV: the bytes the deleter last knew. 1 when deleted
# (``_delete_if``).
_DELETE_IF = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""
# KEYS: checkpoint keys, then (ARGV[2] "1") as many claim keys; ARGV[1]: the bytes to read of
# each checkpoint. Per checkpoint, {first bytes, length}, or false for none (``heads``); then,
# with claims, per claim key 1 when held, else 0 (``_heads_claimed``). A head shorter than
# asked for is the whole value, its own length: ``STRLEN`` only for longer ones (a Lua script's
# each redis.call costs the server more than a command sent to it). ``GETRANGE`` reads a missing
# key as an empty value, so only an empty one is looked up with ``EXISTS``. false, not nil: a
# Lua array ends at its first nil.
_HEADS = """
local last = tonumber(ARGV[1]) - 1
local count = #KEYS
if ARGV[2] == '1' then count = count / 2 end
local found = {}
for i = 1, count do
  local key = KEYS[i]
  local head = redis.call('GETRANGE', key, 0, last)
  if #head > last then
    found[i] = {head, redis.call('STRLEN', key)}
  elseif #head > 0 then
    found[i] = {head, #head}
  elseif redis.call('EXISTS', key) == 1 then
    found[i] = {'', 0}
  else
    found[i] = false
  end
end
for i = count + 1, #KEYS do
  found[i] = redis.call('EXISTS', KEYS[i])
end
return found
"""
_CLAIM_SUFFIX = "\x00claim"
_SCAN_COUNT = 1000
"""Keys each ``SCAN`` looks at (Redis's hint): few round trips, no long stall of the server."""
_GLOB_SPECIAL = str.maketrans({c: "\\" + c for c in "\\*?[]^"})
"""Escapes the characters ``SCAN MATCH`` reads as a pattern, so a prefix is taken literally."""


class RedisCheckpointStore(_ClosableStore):
    """Checkpoints under ``prefix + id`` in the Redis at ``url``
    (``redis://[[user]:password@]host:port/db``, ``rediss://`` for TLS, ``unix://`` for a socket).

    ``ttl`` (seconds) makes every checkpoint expire that long after its last ``put`` — a cap on
    how long a paused run can wait; ``None`` keeps checkpoints until they are deleted.
    ``claim_ttl``: seconds a resume's claim on a checkpoint lasts unless renewed (see
    ``ClaimingCheckpointStore``). ``timeout``: seconds an operation may take, retries included,
    before it fails with ``CheckpointStoreError``.

    Nothing connects until the first operation. ``aclose()`` waits for the operations in flight,
    then closes the connections; the next operation opens new ones. Connections belong to the
    event loop that opened them, so the store keeps a client per loop it is used on (one store
    shared by ``asyncio.run`` per request, from several threads at once too), each closed as its
    loop ends (by ``asyncio.run``; a hand-run loop closed without ``shutdown_asyncgens`` leaves its
    client to the garbage collector). ``aclose()`` closes the running loop's client.
    """

    def __init__(
        self,
        url: str,
        prefix: str = "pyadk:checkpoint:",
        ttl: float | None = None,
        *,
        claim_ttl: float = 30.0,
        timeout: float = 10.0,
    ) -> None:
        self.claim_ttl = _positive_seconds(claim_ttl, "claim_ttl")
        self._timeout = _positive_seconds(timeout, "timeout")
        if not isinstance(prefix, str):
            raise TypeError("prefix must be a str")
        if ttl is not None:
            ttl = _positive_seconds(ttl, "ttl (or None)")
        self._url = url
        self._where = _redact(url)
        self._prefix = prefix
        self._ttl_ms = None if ttl is None else max(1, round(ttl * 1000))
        self._eviction_checked = False  # see ``_check_eviction``
        self._heads_by_script = True  # see ``_read_heads``
        # Parses the URL now: bad URLs fail here; that client serves the first loop. Nothing is
        # connected until an operation runs.
        self._clients = LoopClients(self._new_client(), self._new_client, _close_client)

    @property
    def prefix(self) -> str:
        """Put before every checkpoint id to make its Redis key."""
        return self._prefix

    async def get(self, id: str) -> bytes | None:
        """The bytes under ``id``, or ``None``. With a URL that turns on ``decode_responses`` it
        raises ``CheckpointStoreError``: decoding to text has lost the bytes."""
        key = _check_id(id)
        value = await self._run("get", key, lambda redis: redis.get(self._prefix + key))
        if value is not None and not isinstance(value, bytes):
            # Only possible when the URL turns decode_responses on: the bytes are already lost.
            raise _store_error(
                "redis", "get", key, self._where, "got text instead of bytes (decode_responses?)"
            )
        return value

    async def put(self, id: str, data: bytes) -> None:
        """One ``SET`` of ``data`` under ``id``; with ``ttl``, each put restarts the expiry."""
        key = _check_id(id)
        value = _check_data(data)
        await self._run(
            "put", key, lambda redis: redis.set(self._prefix + key, value, px=self._ttl_ms)
        )

    async def _put_new(self, id: str, data: bytes, keep: Callable[[bytes], bool]) -> bytes | None:
        """As ``store._PutNewStore._put_new``: ``GET`` the key, then, unless ``keep`` keeps what
        is there, a Lua script that ``SET``s it only if it still holds what was looked at (the
        whole bytes compared on the server, so no other writer comes between); if not, it looks
        again (within ``timeout``). Not ``WATCH``/``MULTI``: redis-py's pipeline sends
        ``UNWATCH`` as it is left, cancelled too, so a server that stopped answering mid-way
        held it past ``timeout`` (and failed it in redis-py's words). Each command here is one
        the client retries as ``put``: a script that ran before its connection was lost finds
        the new bytes there, not the old, and the look again takes them as written."""
        key = _check_id(id)
        value = _check_data(data)
        name = self._prefix + key
        ttl = b"" if self._ttl_ms is None else str(self._ttl_ms).encode()

        async def run(redis: Redis) -> bytes | None:
            while True:
                old = await redis.get(name)
                if old is not None and not isinstance(old, bytes):
                    raise _store_error(
                        "redis", "put", key, self._where, "got text instead of bytes"
                    )
                if _kept(old, value, keep):
                    assert old is not None  # (``_kept``)
                    return old
                looked = (b"0", b"") if old is None else (b"1", old)
                if await _eval(redis, _PUT_NEW, name, *looked, value, ttl):
                    return None  # else written meanwhile: look again

        return await self._run("put", key, run)

    async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
        """As ``store._ReplacingStore._replace``: one Lua script comparing the whole bytes on
        the server and ``SET``ting the key (with ``ttl``, restarting its expiry as ``put``)."""
        key = _check_id(id)
        looked = _check_data(old)
        value = _check_data(data)
        ttl = b"" if self._ttl_ms is None else str(self._ttl_ms).encode()
        name = self._prefix + key

        async def run(redis: Redis) -> bool:
            return bool(await _eval(redis, _REPLACE, name, looked, value, ttl))

        return await self._run("put", key, run)

    async def _delete_if(self, id: str, old: bytes) -> bool:
        """As ``store._DeletingIfStore._delete_if``: one Lua script comparing the whole bytes on
        the server and deleting the key."""
        key = _check_id(id)
        looked = _check_data(old)
        name = self._prefix + key

        async def run(redis: Redis) -> bool:
            return bool(await _eval(redis, _DELETE_IF, name, looked))

        return await self._run("delete", key, run)

    async def delete(self, id: str) -> None:
        key = _check_id(id)
        await self._run("delete", key, lambda redis: redis.delete(self._prefix + key))

    def ids(self, prefix: str | None = None) -> AsyncIterator[str]:
        """As ``ListingCheckpointStore.ids``: ``SCAN`` over the keys under the store's prefix then
        ``prefix``, string keys only (``TYPE string``, Redis 6+); claim keys are not listed."""
        return self._ids(_check_prefix(prefix))

    async def _ids(self, prefix: str) -> AsyncIterator[str]:
        start = (self._prefix + prefix).encode()
        pattern = (self._prefix + prefix).translate(_GLOB_SPECIAL).encode() + b"*"
        skip = len(self._prefix.encode())
        seen: set[bytes] = set()
        cursor: int = 0
        while True:
            cursor, keys = await self._run(
                "ids", None, partial(_scan, cursor=cursor, pattern=pattern)
            )
            for raw in keys:
                key = raw if isinstance(raw, bytes) else str(raw).encode()
                if key in seen or not key.startswith(start):
                    continue
                seen.add(key)
                try:
                    id = key[skip:].decode("utf-8")
                except UnicodeDecodeError:
                    continue  # not written by put (its ids are text): someone else's key
                if _listable(id):  # not a claim key (a NUL), nor a key no get could read
                    yield id
            if not cursor:
                return

    async def claim(self, id: str, owner: str) -> bool:
        """As ``ClaimingCheckpointStore.claim``: a Lua script, atomic on the server, sets the claim
        key, which Redis expires itself (``PX``)."""
        key = _check_id(id)
        holder = _check_owner(owner)
        if not self._eviction_checked:
            await self._check_eviction()
        ttl_ms = str(max(1, round(self.claim_ttl * 1000)))
        taken = await self._run(
            "claim", key, lambda redis: _eval(redis, _CLAIM, self._claim_key(key), holder, ttl_ms)
        )
        return bool(taken)

    async def _renew(self, id: str, owner: str) -> bool:
        """Renew ``owner``'s claim on ``id`` only while it holds it (``claim`` takes a lapsed
        one too): False once another took it over, or it lapsed. The runner's renewals
        (``adk.checkpoint._claim``)."""
        key = _check_id(id)
        holder = _check_owner(owner)
        ttl_ms = str(max(1, round(self.claim_ttl * 1000)))
        held = await self._run(
            "claim", key, lambda redis: _eval(redis, _RENEW, self._claim_key(key), holder, ttl_ms)
        )
        return bool(held)

    async def release(self, id: str, owner: str) -> None:
        key = _check_id(id)
        holder = _check_owner(owner)
        await self._run(
            "release", key, lambda redis: _eval(redis, _RELEASE, self._claim_key(key), holder)
        )

    async def _claimed_ids(self, ids: list[str]) -> set[str]:
        """Which of ``ids`` a resume holds a claim on now (``list_pending``'s ``resuming``): one
        ``MGET`` of their claim keys (Redis drops lapsed ones itself)."""
        if not ids:
            return set()
        keys = [self._claim_key(id) for id in ids]
        holders = await self._run("ids", None, lambda redis: redis.mget(keys))
        return {id for id, holder in zip(ids, holders, strict=True) if holder is not None}

    async def heads(self, ids: list[str], limit: int) -> list[tuple[bytes, int] | None]:
        """The first ``limit`` bytes and the length of each of ``ids``' checkpoints
        (``list_pending`` reads their headers, not their histories), None for a missing key:
        one Lua script for them all (``_HEADS``), each key's head and length read at one
        instant; for a user that may not ``EVAL`` (``+@read`` only), one pipeline of read-only
        commands (``_piped_heads``)."""
        found, _ = await self._read_heads(_check_heads(ids, limit), limit, claims=False)
        return found

    async def _heads_claimed(
        self, ids: list[str], limit: int
    ) -> tuple[list[tuple[bytes, int] | None], set[str]]:
        """``heads`` and ``_claimed_ids`` at once (``list_pending``'s batch,
        ``_pending._read``): one script, one command and one round trip for the batch, the
        heads and claims read at one instant. A pipeline of ``GETRANGE``, ``STRLEN`` and
        ``EXISTS`` per key beside an ``MGET``, as this was, took two round trips on two
        connections and three commands per checkpoint for the client to pack and parse
        (docs/performance.md)."""
        return await self._read_heads(_check_heads(ids, limit), limit, claims=True)

    async def _read_heads(
        self, ids: list[str], limit: int, *, claims: bool
    ) -> tuple[list[tuple[bytes, int] | None], set[str]]:
        if not ids:
            return [], set()
        keys = [self._prefix + id for id in ids]
        if claims:
            keys += [self._claim_key(id) for id in ids]

        async def run(redis: Redis) -> list[Any]:
            if self._heads_by_script:
                call: Callable[..., Any] = redis.eval  # as ``_eval``, on many keys
                try:
                    found: Any = await call(
                        _HEADS, len(keys), *keys, str(limit), "1" if claims else "0"
                    )
                except NoPermissionError:
                    # A user that may only read (``+@read``: an operator's ``pyadk checkpoint
                    # list``, a dashboard) may not ``EVAL`` (``@scripting``): read as the
                    # read-only commands below from now on, as the listing did before the script.
                    self._heads_by_script = False
                else:
                    return list(found) if isinstance(found, list) else []
            return await _piped_heads(redis, keys, len(ids), limit)

        found = await self._run("get", None, run)
        if len(found) != len(keys):  # never, from the script: a reply this cannot pair with ids
            raise _store_error(
                "redis", "get", None, self._where, f"{len(found)} answers for {len(keys)} keys"
            )
        heads: list[tuple[bytes, int] | None] = []
        for item in found[: len(ids)]:
            if not item:  # false in Lua: no such key (deleted since it was listed)
                heads.append(None)
                continue
            head, size = item
            heads.append((head if isinstance(head, bytes) else b"", int(size)))
        if not claims:
            return heads, set()
        return heads, {id for id, there in zip(ids, found[len(ids) :], strict=True) if there}

    async def aclose(self) -> None:
        """Wait for the operations in flight (each ends within ``timeout``), then close the
        running loop's connections; idempotent. Those of loops still running in other threads
        close as those loops end (their sockets belong to them)."""
        await self._clients.aclose()

    def __repr__(self) -> str:
        return f"RedisCheckpointStore({self._where!r}, prefix={self._prefix!r})"

    async def _check_eviction(self) -> None:
        """Warn, once per store, when the server evicts keys when it is full: a claim is a key
        with an expiry, the first a ``volatile-*`` policy drops (managed Redis often has one), so
        another replica could take a checkpoint being resumed and both run its approved call; an
        ``allkeys-*`` policy drops paused runs too. Asked at the first claim rather than per
        operation; a server that does not answer is asked again at the next claim, one that
        refuses ``CONFIG`` (renamed or forbidden, as some managed Redis do) is not."""

        async def ask(redis: Redis) -> dict[Any, Any]:
            try:
                found: dict[Any, Any] = await redis.config_get("maxmemory*")
            except ResponseError:
                return {}
            return found

        # Taken before asking, so that claims made while it is asked do not ask (and warn) too.
        self._eviction_checked = True
        try:
            found = await self._run("claim", None, ask)
        except CheckpointStoreError:
            self._eviction_checked = False  # asked again at the next claim
            return  # the claim that follows reports the store's failure
        except BaseException:  # cancelled while asking: asked again at the next claim
            self._eviction_checked = False
            raise
        settings = {_text(name): _text(value) for name, value in found.items()}
        policy = settings.get("maxmemory-policy", "noeviction")
        if settings.get("maxmemory", "0") != "0" and policy != "noeviction":
            logger.warning(
                "the Redis of %r evicts keys when it is full (maxmemory %s, maxmemory-policy "
                "%s): a resume's claim, a key with an expiry, may be evicted, and a checkpoint "
                "then resumed twice at once (an approved call made twice)%s; give the "
                "checkpoints a Redis with maxmemory-policy noeviction",
                self,
                settings["maxmemory"],
                policy,
                # Checkpoints are keys with an expiry too when the store sets one (ttl=).
                ", and paused runs lost"
                if policy.startswith("allkeys") or self._ttl_ms is not None
                else "",
            )

    def _claim_key(self, key: str) -> str:
        return self._prefix + key + _CLAIM_SUFFIX

    async def _run(
        self, operation: str, key: str | None, command: Callable[[Redis], Awaitable[T]]
    ) -> T:
        """Run ``command`` on this loop's client within ``timeout``; failures become
        ``CheckpointStoreError``."""
        clients = self._clients
        client = clients.get() or await clients.bind()
        client.users += 1  # before any await: an aclose() now waits for this operation
        deadline = asyncio.timeout(self._timeout)
        try:
            async with deadline:
                return await command(client.redis)
        except TimeoutError as exc:  # before OSError, its base class
            reason: BaseException | str = exc
            if deadline.expired():
                reason = f"no answer within {self._timeout:g} s (timeout)"
            raise _store_error("redis", operation, key, self._where, reason) from exc
        except (RedisError, OSError) as exc:
            raise _store_error("redis", operation, key, self._where, exc) from exc
        finally:
            client.leave()

    def _new_client(self) -> _Client:
        options: dict[str, Any] = {
            "decode_responses": False,
            "socket_connect_timeout": min(5.0, self._timeout),
            "retry": Retry(ExponentialWithJitterBackoff(base=0.02, cap=0.5), retries=3),
            # redis-py 6 retries these by default; 5 (which apache-beam, in the flink extra, pins)
            # only when told: a pooled connection the server dropped is then replaced, not fatal.
            "retry_on_error": [RedisConnectionError, RedisTimeoutError],
        }
        redis: Redis = Redis.from_url(self._url, **options)  # untyped in redis-py 5
        return _Client(redis)


async def _close_client(client: _Client) -> None:
    """Close a loop's client once the operations using it have ended (on that loop: at its end,
    or by ``aclose``)."""
    try:
        await client.drained()
    finally:
        with contextlib.suppress(RedisError, OSError):  # the connections are gone either way
            await client.redis.aclose()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _eval(redis: Redis, script: str, key: str, *args: str | bytes) -> Awaitable[Any]:
    """Run a Lua script on one key."""
    # Typed as maybe-synchronous by redis-py (one signature for both clients): it awaits. Called
    # untyped because redis-py 5 (which PyFlink's Beam pins: the flink extra installs it) types
    # the keys and arguments as str only, where 6 on take bytes too; both send bytes as given.
    call: Callable[..., Any] = redis.eval
    pending: Any = call(script, 1, key, *args)
    awaitable: Awaitable[Any] = pending
    return awaitable


async def _piped_heads(redis: Redis, keys: list[str], count: int, limit: int) -> list[Any]:
    """``_HEADS``' answer from read-only commands, one pipeline (one round trip): ``GETRANGE``,
    ``STRLEN`` and ``EXISTS`` of each of the first ``count`` keys (checkpoints), then an ``MGET``
    of the rest (claims, if any). Not read at one instant as the script's: a key written or
    deleted between its reads is taken as there (its length, or an empty head, says so)."""
    pipe = redis.pipeline(transaction=False)
    for key in keys[:count]:
        pipe.getrange(key, 0, limit - 1)
        pipe.strlen(key)
        pipe.exists(key)
    if len(keys) > count:
        pipe.mget(keys[count:])
    answers: list[Any] = await pipe.execute()
    found: list[Any] = [
        [head, size] if there or size else None
        for head, size, there in zip(
            answers[0 : 3 * count : 3],
            answers[1 : 3 * count : 3],
            answers[2 : 3 * count : 3],
            strict=True,
        )
    ]
    if len(keys) > count:
        found += [0 if holder is None else 1 for holder in answers[-1]]
    return found


async def _scan(redis: Redis, cursor: int, pattern: bytes) -> tuple[int, list[Any]]:
    """One ``SCAN`` step: the next cursor (0 when the walk is over) and the keys it found."""
    found: Any = await redis.scan(cursor, match=pattern, count=_SCAN_COUNT, _type="string")
    next_cursor, keys = found
    return int(next_cursor), list(keys)


class _Client(_InUse):
    """One event loop's redis-py client and the operations using it now: it is closed only once
    they have ended, since a client closed under a running command reconnects to retry it and
    leaves that socket open."""

    __slots__ = ("redis",)

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        super().__init__()
