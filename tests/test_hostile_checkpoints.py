"""Hostile checkpoint bytes, fed to every path that loads a checkpoint.

A real paused run's checkpoint (the ``parallel`` tree of ``faults``: three tool calls waiting for
approval and a custom agent asking a person) is damaged in every way a store, a disk or a person
editing it could damage it: cut short, bit-flipped, replaced by random bytes, its header nested
past what the parser can read, a version that is not this one, a body sealed again (its checksum
made to match) that is not shaped as pyadk writes one. Each is then loaded through
``Runner.resume`` and ``Runner.invoke_resume`` (from each store), ``list_pending``, the codec
itself and the ``pyadk checkpoint`` command.

What must hold, whatever the bytes: the only errors are ``CheckpointError`` (from ``resume``
and ``invoke_resume`` as they are raised, or as a ``RunError``'s cause; a listing shows it as the
entry's ``error``, the command prints it on one line), never a ``RecursionError``, a
``KeyError`` or another error of the reader's own; nothing of the run runs; the stored bytes are
still there, as they were. Bodies sealed again that still have the shape of a checkpoint may
resume (a person may edit one on purpose): then they resume as a checkpoint does.

Found so far: a header line nested deeper than Python's recursion limit (``[[[[...``, a few
hundred kilobytes) raised ``RecursionError`` out of ``decode_checkpoint``, so out of
``resume``, ``invoke_resume`` and the ``pyadk checkpoint show`` command, and ended a whole
``list_pending`` listing (and ``pyadk checkpoint list``) at that one checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from faults import APPROVE, TREES, Faults
from hypothesis import HealthCheck, given, settings

from adk import RunError, Runner
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore, list_pending
from adk.checkpoint._snapshot import parse_body
from adk.checkpoint.codec import FORMAT, VERSION, CheckpointError, decode_checkpoint
from adk.cli import main as pyadk

pytest_plugins = ["services"]

EXAMPLES = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

_paused: list[bytes] = []


async def _pause() -> bytes:
    store = InMemoryCheckpointStore()
    result = await Runner(TREES["parallel"](Faults(), True), store).invoke("go", checkpoint_id="cp")
    assert result.interrupt is not None and len(result.interrupt.point_ids) == 4
    data = await store.get("cp")
    assert data is not None
    return data


def paused_checkpoint() -> bytes:
    """The checkpoint of the ``parallel`` tree paused at its four points, made once (by a test
    on an event loop: ``await paused_first()``)."""
    if not _paused:
        _paused.append(asyncio.run(_pause()))
    return _paused[0]


async def paused_first() -> None:
    if not _paused:
        _paused.append(await _pause())


def parts() -> tuple[dict[str, Any], dict[str, Any]]:
    """The paused checkpoint's header and body, as JSON data."""
    head, _, payload = paused_checkpoint().partition(b"\n")
    return json.loads(head), json.loads(payload)


def sealed(payload: bytes, **header: Any) -> bytes:
    """``payload`` under a header whose checksum and size match it (as a person editing a
    checkpoint, or another program writing one, would make them), with ``header``'s keys."""
    fields: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "size": len(payload),
    }
    fields.update(header)
    return json.dumps(fields).encode() + b"\n" + payload


def sealed_body(body: Any) -> bytes:
    return sealed(json.dumps(body).encode())


def _edited(change: Callable[[dict[str, Any]], Any]) -> Callable[[], bytes]:
    def make() -> bytes:
        body = parts()[1]
        change(body)
        return sealed_body(body)

    return make


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        place: Any = body
        for key in path[:-1]:
            place = place[key]
        place[path[-1]] = value

    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda body: body.pop(key)


def _nested(depth: int, opening: bytes = b"[", closing: bytes = b"]") -> bytes:
    return opening * depth + closing * depth


def _flipped(at: int) -> Callable[[], bytes]:
    def make() -> bytes:
        data = bytearray(paused_checkpoint())
        data[at % len(data)] ^= 0x10
        return bytes(data)

    return make


# name -> the damaged bytes, and what the refusal says (a regular expression)
HOSTILE: dict[str, tuple[Callable[[], bytes], str]] = {
    "empty": (lambda: b"", "not a pyadk checkpoint"),
    "a newline": (lambda: b"\n", "not a pyadk checkpoint"),
    "random bytes": (lambda: bytes(range(256)) * 4, "not a pyadk checkpoint"),
    "a pickle": (lambda: b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.", "not a pyadk"),
    "invalid UTF-8 header": (lambda: b"\xff\xfe\xfd\n{}", "not a pyadk checkpoint"),
    "header only": (lambda: paused_checkpoint().partition(b"\n")[0], "not a pyadk checkpoint"),
    "cut in the header": (lambda: paused_checkpoint()[:40], "not a pyadk checkpoint"),
    "cut in the body": (lambda: paused_checkpoint()[:-50], "checksum does not match"),
    "one byte short": (lambda: paused_checkpoint()[:-1], "checksum does not match"),
    "a byte more": (lambda: paused_checkpoint() + b" ", "checksum does not match"),
    "a bit flipped in the header": (_flipped(5), "not a pyadk checkpoint|checksum|version"),
    "a bit flipped in the body": (_flipped(-30), "checksum does not match"),
    "header nested past the recursion limit": (
        lambda: _nested(200_000) + b"\n{}",
        "not a pyadk checkpoint",
    ),
    "header object nested past the recursion limit": (
        lambda: b'{"a":' * 200_000 + b"1" + b"}" * 200_000 + b"\n{}",
        "not a pyadk checkpoint",
    ),
    "header with a key nested past the recursion limit": (
        lambda: b'{"format":"pyadk.checkpoint","x":' + _nested(200_000) + b"}\n{}",
        "not a pyadk checkpoint",
    ),
    "header a list": (lambda: b'["pyadk.checkpoint", 1]\n{}', "not a pyadk checkpoint"),
    "header of another format": (lambda: b'{"format":"other","version":1}\n{}', "not a pyadk"),
    "version 0": (lambda: sealed(b"{}", version=0), "format version 0"),
    "a newer version": (lambda: sealed(b"{}", version=VERSION + 1), "a newer pyadk wrote it"),
    "version as text": (lambda: sealed(b"{}", version="1"), "format version '1'"),
    "version true": (lambda: sealed(b"{}", version=True), "format version True"),
    "version 1.0": (lambda: sealed(b"{}", version=1.0), "format version 1.0"),
    "version of 5000 digits": (
        lambda: b'{"format":"pyadk.checkpoint","version":' + b"9" * 5000 + b"}\n{}",
        "not a pyadk checkpoint",
    ),
    "a huge size claimed": (
        lambda: sealed(paused_checkpoint().partition(b"\n")[2], size=10**18),
        "",  # the size is the listing's hint only: this one resumes
    ),
    "no checksum": (
        lambda: paused_checkpoint().replace(b'"sha256"', b'"sha257"', 1),
        "checksum does not match",
    ),
    "body nested past the recursion limit": (
        lambda: sealed(_nested(200_000)),
        "nested deeper than 200 levels",
    ),
    "body nested past the depth limit": (
        _edited(_set(("session", "deep"), json.loads(_nested(300)))),
        "nested deeper than 200 levels",
    ),
    "body a list": (lambda: sealed(b"[]"), "body is not an object"),
    "body not JSON": (lambda: sealed(b"{not json"), "is corrupt"),
    "body invalid UTF-8": (lambda: sealed(b'{"agent": "\xff"}'), "is corrupt"),
    "body empty object": (lambda: sealed(b"{}"), "malformed"),
    "no agent": (_edited(_drop("agent")), "malformed"),
    "agent a list": (_edited(_set(("agent",), ["par_then"])), "malformed"),
    "another root agent": (_edited(_set(("agent",), "someone")), "belongs to agent 'someone'"),
    "no points": (_edited(_drop("points")), "malformed|no pending"),
    "points empty": (_edited(_set(("points",), [])), "malformed|no pending"),
    "points an object": (_edited(_set(("points",), {})), "malformed"),
    "a point a string": (_edited(_set(("points", 0), "agent:x")), "malformed"),
    "a point without an id": (_edited(lambda b: b["points"][0].pop("id")), "malformed"),
    "a point's address a string": (_edited(_set(("points", 0, "address"), "a")), "malformed"),
    "history an object": (_edited(_set(("history",), {})), "malformed|history"),
    "a history entry a number": (_edited(_set(("history", 0), 7)), "malformed|history"),
    "a message of another shape": (
        _edited(_set(("history", 0, "message", "data"), {"role": 7})),
        "invalid value of type 'adk.Message'",
    ),
    "a message's role unknown": (
        _edited(_set(("history", 0, "message", "data", "role"), "wizard")),
        "invalid value of type 'adk.Message'",
    ),
    "an unregistered type": (
        _edited(_set(("session", "x"), {"__adk_type__": "os.system", "data": "rm -rf /"})),
        "unregistered type 'os.system'",
    ),
    "a tagged float that is not one": (
        _edited(_set(("session", "x"), {"__adk_type__": "float", "data": "1e999"})),
        "not a tagged float",
    ),
    "root input not a list": (_edited(_set(("root_input",), "go")), "malformed|root input"),
    "no root input": (_edited(_drop("root_input")), "malformed"),
    "session a list": (_edited(_set(("session",), [])), "malformed|session"),
    "states a list": (_edited(_set(("states",), [])), "malformed|states"),
    "usage negative": (_edited(_set(("usage",), {"input_tokens": -1})), "malformed|usage"),
    "turns of another shape": (_edited(_set(("turns",), {"max_turns": 0})), "malformed|turns"),
}


def hostile(name: str) -> bytes:
    return HOSTILE[name][0]()


APPROVALS = {
    "agent:par_then/agent:par/agent:ask": APPROVE,
    "agent:par_then/agent:par/agent:a/tool:work#a_0": APPROVE,
    "agent:par_then/agent:par/agent:a/tool:work#a_1": APPROVE,
    "agent:par_then/agent:par/agent:b/tool:work#b_0": APPROVE,
}


def refusal(error: BaseException) -> CheckpointError:
    """The ``CheckpointError`` a resume refused with, raised or as a ``RunError``'s cause;
    anything else fails the test, naming what came out."""
    if isinstance(error, RunError) and isinstance(error.__cause__, CheckpointError):
        return error.__cause__
    if isinstance(error, CheckpointError):
        return error
    raise AssertionError(f"not a CheckpointError: {type(error).__name__}: {error}") from error


async def resume_refused(store: Any, data: bytes, invoke: bool) -> CheckpointError | None:
    """Resume ``cp`` (holding ``data``) in ``store``: the refusal, or None if it resumed. A
    refusal must leave the bytes as they were and nothing run."""
    await store.put("cp", data)
    faults = Faults()
    runner = Runner(TREES["parallel"](faults, True), store)
    approvals = {key: value for key, value in APPROVALS.items() if key.encode() in data}
    try:
        if invoke:
            await runner.invoke_resume("cp", approvals)
        else:
            async for event in runner.resume("cp", approvals):
                if event.error is not None:  # found as the paused agents were reached
                    assert event.error.type == "CheckpointError", event.error
                    assert faults.log == [], f"failed after running {faults.log}"
                    assert await store.get("cp") == data, "a failed resume changed the checkpoint"
                    return CheckpointError(event.error.message)
    except (RunError, CheckpointError) as exc:
        found = refusal(exc)
        assert faults.log == [], f"refused after running {faults.log}"
        assert await store.get("cp") == data, "a refused resume changed or lost the checkpoint"
        return found
    except ValueError as exc:  # answers that do not fit the points of an edited checkpoint
        assert "Nothing ran and the checkpoint is kept" in str(exc), exc
        assert faults.log == [] and await store.get("cp") == data
        return None
    return None


def check_refusal(name: str, error: CheckpointError | None) -> None:
    pattern = HOSTILE[name][1]
    if not pattern:
        return
    assert error is not None, f"{name}: resumed"
    text = str(error)
    assert "checkpoint 'cp'" in text, f"{name}: the refusal does not name the checkpoint: {text}"
    assert re.search(pattern, text), f"{name}: {text!r} does not match {pattern!r}"


# -- every load path, every store -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_codec_refuses_each_damage_with_a_checkpoint_error(name: str) -> None:
    try:
        parse_body(decode_checkpoint(hostile(name), "cp"), "cp")
    except CheckpointError as exc:
        if "belongs to agent" not in HOSTILE[name][1]:  # the runner's check, not the codec's
            check_refusal(name, exc)
        return
    assert not HOSTILE[name][1] or "belongs to agent" in HOSTILE[name][1], f"{name}: parsed"


@pytest.mark.parametrize("store_kind", ["memory", "sqlite", "redis", "postgres"])
async def test_resuming_each_damaged_checkpoint_is_refused_from_every_store(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """``resume`` and ``invoke_resume``; the refusal names the checkpoint and what is wrong."""
    await paused_first()
    store: Any
    if store_kind == "memory":
        store = InMemoryCheckpointStore()
    elif store_kind == "sqlite":
        store = SQLiteCheckpointStore(tmp_path / "checkpoints.db")
    elif store_kind == "redis":
        from adk.checkpoint import RedisCheckpointStore

        url = request.getfixturevalue("redis_server").url
        store = RedisCheckpointStore(url, prefix=f"fz{uuid.uuid4().hex[:12]}:")
    else:
        from adk.checkpoint import PostgresCheckpointStore

        dsn = request.getfixturevalue("postgres_server").dsn
        store = PostgresCheckpointStore(dsn, table=f"fz_{uuid.uuid4().hex[:12]}")
    try:
        for name in sorted(HOSTILE):
            data = hostile(name)
            for invoke in (False, True):
                check_refusal(name, await resume_refused(store, data, invoke))
            await store.delete("cp")
    finally:
        closer = getattr(store, "aclose", None)
        if closer is not None:
            await closer()


async def test_a_listing_shows_each_damaged_checkpoint_with_its_error_and_goes_on() -> None:
    """One damaged checkpoint among others is an entry with its error; the listing lists the
    sound ones around it and changes nothing."""
    await paused_first()
    store = InMemoryCheckpointStore()
    sound = paused_checkpoint()
    names = sorted(HOSTILE)
    await store.put("a-sound", sound)
    for number, name in enumerate(names):
        await store.put(f"b-{number:03}", hostile(name))
    await store.put("c-sound", sound)
    stored = dict(store._data)
    for rebuild in (True, False):
        listing = list_pending(store) if rebuild else _quick_listing(store)
        entries = {entry.checkpoint_id: entry async for entry in listing}
        assert entries["a-sound"].error is None and entries["c-sound"].error is None
        for number, name in enumerate(names):
            entry = entries.get(f"b-{number:03}")
            if entry is None or entry.error is None:
                # Sealed again in the shape of a checkpoint, or damaged where a listing does not
                # read (the body, behind a summary that still checks out): resumes refuse those.
                continue
            assert isinstance(entry.error, CheckpointError), (name, entry.error)
            assert f"checkpoint 'b-{number:03}'" in str(entry.error), (name, entry.error)
    assert store._data == stored


def _quick_listing(store: Any) -> Any:
    """The listing ``pyadk checkpoint list`` reads (points not rebuilt)."""
    from adk.checkpoint._pending import _listing

    return _listing(store, None, None, rebuild=False)


def test_the_command_reports_each_damaged_checkpoint_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pyadk checkpoint show`` exits 1 with ``pyadk: <the CheckpointError>``, no traceback;
    ``list`` prints it as the entry's error and exits 0; the file keeps every checkpoint."""
    path = tmp_path / "checkpoints.db"
    names = sorted(HOSTILE)

    async def fill() -> None:
        store = SQLiteCheckpointStore(path)
        try:
            for number, name in enumerate(names):
                await store.put(f"cp-{number:03}", hostile(name))
        finally:
            await store.aclose()

    asyncio.run(fill())
    for number, name in enumerate(names):
        status = pyadk(["checkpoint", "show", f"cp-{number:03}", "--sqlite", str(path)])
        out, err = capsys.readouterr()
        if status == 0:  # sealed again in the shape of a checkpoint: shown
            assert json.loads(out)["checkpoint_id"] == f"cp-{number:03}"
            continue
        assert status == 1, (name, err)
        assert err.startswith(f"pyadk: checkpoint 'cp-{number:03}' "), (name, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (name, err)
    assert pyadk(["checkpoint", "list", "--sqlite", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    listed = [json.loads(line) for line in out.splitlines()]
    assert any(entry.get("error") for entry in listed)

    async def read_back() -> list[bytes | None]:
        store = SQLiteCheckpointStore(path)
        try:
            return [await store.get(f"cp-{number:03}") for number in range(len(names))]
        finally:
            await store.aclose()

    assert asyncio.run(read_back()) == [hostile(name) for name in names]


# -- random damage ------------------------------------------------------------------------------


def _json_values() -> st.SearchStrategy[Any]:
    """JSON values leaning to what a checkpoint's reader looks for: its keys and tags."""
    keys = st.sampled_from(
        [
            *("__adk_type__", "data", "tagged", "role", "content", "id", "address", "info"),
            *("agent", "run_path", "message", "seq", "points", "history", "x", ""),
        ]
    )
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=8)
        | st.sampled_from(["adk.Message", "adk.InterruptPoint", "float", "dict", "nan", "user"])
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
        max_leaves=12,
    )


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _places(item, (*path, index))
    return found


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A real checkpoint's bytes damaged at random: cut, bits flipped, bytes spliced in, or its
    body edited at random places (values replaced by random JSON, keys dropped) and sealed
    again."""
    data = paused_checkpoint()
    kind = draw(st.sampled_from(["cut", "flip", "splice", "edit", "edit"]))
    if kind == "cut":
        return data[: draw(st.integers(0, len(data) - 1))]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            out[draw(st.integers(0, len(out) - 1))] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    if kind == "splice":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
    body = copy.deepcopy(parts()[1])
    places = [p for p in _places(body) if p]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(places))
        parent: Any = body
        try:
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and draw(st.booleans()):
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(_json_values())
        except (KeyError, IndexError, TypeError):  # an earlier edit removed the place
            pass
    return sealed_body(body)


@settings(EXAMPLES, max_examples=150)
@given(data=damaged())
def test_randomly_damaged_checkpoints_resume_or_are_refused_without_running(data: bytes) -> None:
    """Through the codec, a listing and both resumes: only ``CheckpointError``; refused, the
    checkpoint is kept as it was and nothing ran."""
    with contextlib.suppress(CheckpointError):
        parse_body(decode_checkpoint(data, "cp"), "cp")

    async def load() -> None:
        store = InMemoryCheckpointStore()
        await store.put("cp", data)
        entries = [entry async for entry in list_pending(store)]
        entries += [entry async for entry in _quick_listing(store)]
        for entry in entries:
            assert entry.error is None or isinstance(entry.error, CheckpointError)
        for invoke in (False, True):
            await resume_refused(InMemoryCheckpointStore(), data, invoke)

    asyncio.run(load())
