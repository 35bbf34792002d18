"""``FlinkExecutionEnvironment`` on a real (local MiniCluster) Flink: tests/flink_job.py runs as a
job script in its own process, as a user's would, and prints its outputs. Its two runs start in the
background as soon as the session has collected these tests (tests/flink_runs.py), so that they
use the CPU core pytest leaves idle; each test reads its run's outputs when its turn comes.

Needs the ``flink`` extra and Java; ``.ci/test`` installs both. Elsewhere the test is skipped when
either is missing, except in CI, where a missing one is a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections import defaultdict
from typing import Any

import pytest
from flink_runs import finished

_missing = [
    what
    for what, present in (
        ("PyFlink (pip install 'pyadk[flink]')", importlib.util.find_spec("pyflink") is not None),
        ("Java", shutil.which("java") is not None),
    )
    if not present
]
if _missing and not os.environ.get("CI"):
    pytest.skip(f"needs {' and '.join(_missing)}", allow_module_level=True)

pytest_plugins = ["flink_runs"]


def _outputs(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The outputs of the run the test's ``flink_run`` marker names (started in the background)."""
    done = finished(request)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outputs


@pytest.mark.timeout(360)
@pytest.mark.flink_run()
def test_a_keyed_stream_runs_in_order_per_key_with_memory_tools_and_a_failed_record(
    request: pytest.FixtureRequest,
) -> None:
    jobs = _outputs(request)
    _check_per_key(jobs["async"])
    # Records of different keys overlapped inside the async operator.
    assert max(o["output"]["most"] for o in jobs["async"] if o["output"]) >= 2
    # The same outcome with each key's session in Flink's keyed state.
    _check_per_key(jobs["durable"])
    # A stream of the user's own type, without a key: each record on its own.
    assert sorted(o["output"] for o in jobs["unkeyed"]) == ["AB", "CD", "EF"]
    _check_scores(jobs["scores"], durable=False)
    _check_scores(jobs["scores_durable"], durable=True)
    _check_checkpointed(jobs["checkpointed"])
    # Enabled after apply: refused before the job runs, where it used to lose memory on restore.
    *refused, durable = jobs["late_checkpointing"]
    assert durable is None and len(refused) == 2
    for message in refused:
        assert "(checkpointing is enabled), but did not when the agent was applied" in message
        assert "before apply" in message and "durable_memory=True" in message
    for durable in ("resumed", "resumed_durable"):
        _check_resumed(jobs[durable])
    # An agent holding its own model, applied as it is: refused naming it and the part, where
    # PyFlink's pickling said only "cannot pickle '_thread.RLock' object".
    for message in jobs["unshippable"]:
        assert message is not None
        assert message.startswith(
            "apply cannot ship agent 'ledger' to the Flink workers: its attribute 'resources' "
            "(adk.resources.Resources) cannot be pickled (TypeError: cannot pickle"
        )
        assert "give apply a function that builds the agent in each worker" in message
    # An event class naming a class defined after it in the script reached the workers.
    assert [o["output"] for o in jobs["notes"]] == ["GH"]
    plain, checkpointing, savepoint = jobs["restore_reasons"]
    assert plain is None and checkpointing == "checkpointing is enabled"
    assert savepoint == (
        "it starts from the savepoint or checkpoint "
        "execution.state-recovery.path=file:///savepoints/savepoint-1"
    )
    # A name, uid and parallelism set on to_datastream()'s stream reach the agent's operator (they
    # reached only the map after it, which raises a record's failure: PyFlink's chaining of the
    # two kept the operator's own uid, none, and the operator kept the job's parallelism).
    settings = jobs["operator_settings"]
    [agent] = [vertex for vertex in settings if vertex[2]]
    assert agent[0].startswith("agent") and agent[1] == 3, settings
    assert not any("async wait operator" in vertex[0] for vertex in settings), settings


@pytest.mark.timeout(360)
@pytest.mark.flink_run("pipelines")
def test_a_failing_key_function_and_the_ticket_pipeline_run_on_flink(
    request: pytest.FixtureRequest,
) -> None:
    jobs = _outputs(request)
    for durable in ("bad_keys", "bad_keys_durable"):
        _check_bad_keys(jobs[durable])
    _check_tickets(jobs["tickets"])


def _check_tickets(jobs: dict[str, list[dict[str, Any]]]) -> None:
    """examples/ticket_pipeline.py's plan on Flink: the refund pauses and the customer's next
    ticket runs; the ticket without text fails alone; approved through the next job's resumes,
    the refund is issued under the paused run's id. (Memory starts again in the second job: it
    lives in the first job's operator.)"""
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for output in jobs["first"]:
        by_key[output["key"]].append(output)
    paused, second = by_key["acme"]
    [point] = paused["interrupt"]["points"]
    assert point["info"]["arguments"] == {"ticket": "T1", "amount": 120}
    assert second["output"]["ticket"] == "T2" and second["output"]["tickets_so_far"] == 1
    [failed] = by_key["zeta"]
    assert "ValueError: ticket T4 has no text" in failed["error"]["message"]
    later = {o["output"]["ticket"]: o for o in jobs["later"]}
    assert set(later) == {"T1", "T5", "T6"}
    assert later["T1"]["output"]["note"] == "refund 120 issued"
    assert later["T1"]["run_id"] == paused["run_id"]


def _check_bad_keys(outputs: list[dict[str, Any]]) -> None:
    """A ``from_datastream`` record whose key function failed in the workers' ``key_by`` failed
    the job with the bare KeyError: it is its failed output (``on_error="emit"``), key ``None``,
    saying it was the key, as locally, and the key's other records ran."""
    [failed] = [o for o in outputs if o["error"] is not None]
    assert failed["key"] is None and failed["run_id"] is None and failed["output"] is None
    assert failed["error"]["type"] == "KeyError"
    assert "the key function failed on it: 'user'" in failed["error"]["message"]
    assert sorted(o["output"] for o in outputs if o["error"] is None) == [1, 4]


def _check_resumed(jobs: dict[str, list[dict[str, Any]]]) -> None:
    """A pause of one job resumed through the next job's resumes stream: it ran as a record of
    its key (there none, so on the session saved at the pause) and its outputs joined the job's,
    under the paused run's id, beside the other key's record."""
    [paused] = jobs["paused"]
    assert paused["checkpoint_id"] and paused["interrupt"] is not None
    by_key = {o["key"]: o for o in jobs["later"]}
    assert by_key["bob"]["output"] == 2 and by_key["bob"]["error"] is None
    resumed = by_key["ann"]
    assert resumed["error"] is None and resumed["output"] == 500
    assert resumed["run_id"] == paused["run_id"]


def _check_checkpointed(jobs: dict[str, list[dict[str, Any]]]) -> None:
    """With checkpointing on, the async operator's memory (in the operator, not in Flink's state)
    would be lost by a restore: each record that would keep some fails, saying so, rather than
    leaving it to be lost quietly. An agent keeping no memory runs as usual."""
    from flink_job import RECORDS

    ledger = jobs["ledger"]
    assert len(ledger) == len(RECORDS) and all(o["output"] is None for o in ledger)
    errors = [o["error"] for o in ledger]
    failed = [e for e in errors if e["type"] == "ActionError"]  # record 5, before any memory
    assert len(failed) == 1 and "record 5 has a negative amount" in failed[0]["message"]
    refused = [e for e in errors if e["type"] == "RuntimeError"]
    assert len(refused) == len(RECORDS) - 1
    for error in refused:
        assert "keeps session values (memory) for its key" in error["message"]
        assert "(checkpointing is enabled)" in error["message"]
        assert "durable_memory=True" in error["message"]
    assert sorted(o["output"] for o in jobs["shout"]) == ["AB", "CD"]


def _check_scores(outputs: list[dict[str, Any]], durable: bool) -> None:
    """NaN or infinity from inside an agent never leaves as ``NaN`` (not JSON): the record fails
    saying where in its output. In the session it is kept: in the operator's memory, where a float
    is a float, or with durable memory as checkpoint JSON, which keeps it tagged (that record
    used to fail, its session writes dropped)."""
    by_key = {o["key"]: o for o in outputs}
    assert by_key["fine"]["output"] == {"score": 1.5}
    nan = by_key["nan"]
    assert nan["output"] is None and "NaN at output.score" in nan["error"]["message"]
    kept = by_key["kept"]
    assert kept["output"] == "kept" and kept["error"] is None, durable


def _check_per_key(outputs: list[dict[str, Any]]) -> None:
    from flink_job import CALL_USAGE, CUSTOMERS, RECORDS

    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for output in outputs:
        by_key[output["key"]].append(output)
    assert set(by_key) == set(CUSTOMERS)

    # Every record's outputs name its run (tracing's gen_ai.conversation.id), the failed one too.
    run_ids = [output["run_id"] for output in outputs]
    assert all(isinstance(run_id, str) and run_id for run_id in run_ids)
    assert len(set(run_ids)) == len(RECORDS)

    for customer in CUSTOMERS:
        records = [r for r in RECORDS if r["customer"] == customer]
        got = by_key[customer]
        assert len(got) == len(records), customer
        total, seen = 0, []
        for record, output in zip(records, got, strict=True):
            if record["amount"] < 0:  # the failed record: reported, its writes dropped
                assert output["output"] is None
                assert output["error"]["type"] == "ActionError"
                assert "record 5 has a negative amount" in output["error"]["message"]
                assert output["usage"] is None  # it failed before its model call
                continue
            # Its run's two model calls (the tool call, the answer), as a local run's output says.
            assert output["usage"] == (CALL_USAGE + CALL_USAGE).model_dump()
            # In arrival order per key, each record seeing the memory the previous one left; the
            # sum came back through the model's tool call.
            total += record["amount"]
            seen.append(record["n"])
            assert output["error"] is None
            assert output["output"]["seen"] == seen and output["output"]["total"] == total
