"""``import adk`` stays light: no heavy SDK, no optional backend, nothing loaded only for pausing.

Each check runs in a fresh interpreter, because the test process itself has long since imported
most of these modules. Timing is the benchmarks' job (``python -m benchmarks --only import``); these
tests pin what is imported, which is what keeps the time down and can be checked exactly.
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import adk

ROOT = Path(__file__).resolve().parent.parent

# Modules (and packages, with their submodules) that ``import adk`` must not load.
_NOT_AT_IMPORT = (
    # heavy SDKs, loaded by the adapters and backends that need them
    "openai",
    "mcp",
    "httpx",
    "httpx2",  # the openai SDK's HTTP library
    "redis",
    "asyncpg",
    "opentelemetry",
    "tenacity",
    "starlette",
    "uvicorn",
    "pyflink",
    # optional parts of adk itself
    "adk.actions",
    "adk.execution",
    "adk.models.openai",
    "adk.models._openai_tls",
    "adk.mcp",
    "adk.tracing",
    "adk.testing",
    "adk.cli",
    "adk.checkpoint.sqlite",
    "adk.checkpoint.redis",
    "adk.checkpoint.postgres",
    # public names only some programs use, loaded when first asked for (adk.__getattr__)
    "adk.agent_tool",
    "adk.flow",
    "adk.workflows",
    "adk.resources",
    "adk.callbacks",
    # private modules only pausing, resuming, listing pauses, approvals or an event's JSON form need
    # (the packages' __getattr__ loads them on first use)
    "adk._approval",
    "adk._event_json",
    "adk._instrument",
    "adk._preflight",
    "adk.checkpoint._claim",
    "adk.checkpoint._pending",
    "adk.checkpoint._points",
    "adk.checkpoint._progress",
    "adk.checkpoint._snapshot",
    # standard-library modules only pausing, resuming or a backend needs
    "sqlite3",
    "json",
    "hashlib",
    "_hashlib",
    # pydantic's serializer markers (PlainSerializer, field_serializer): 8.9M instructions to
    # import, which the parts' base64 data does without (adk.messages._Base64)
    "pydantic.functional_serializers",
    # pydantic imports this when it first builds a model's validator (to look for plugins): its
    # absence shows that no model is built at import (they use defer_build)
    "importlib.metadata",
)

_PROBE = """
import sys

watched = sys.argv[1:]


def hits():
    return {m for m in sys.modules if any(m == w or m.startswith(w + ".") for w in watched)}


# What adk's own dependencies load is not adk's doing: some pydantic releases import `secrets`
# (and with it hashlib) from pydantic.types. Take that baseline first.
import asyncio
from pydantic import BaseModel, ConfigDict


class _Probe(BaseModel):
    model_config = ConfigDict(defer_build=True)
    x: int = 0


baseline = hits()
import adk

print("loaded:" + ",".join(sorted(hits() - baseline)))

# The deferred pieces load on first use: a checkpoint round trip needs hashlib.
from adk.checkpoint.codec import decode_checkpoint, encode_checkpoint

assert decode_checkpoint(encode_checkpoint({"a": [1, "x"]})) == {"a": [1, "x"]}
print("hashlib after a checkpoint:", "hashlib" in sys.modules)
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_import_adk_loads_nothing_heavy_or_deferred() -> None:
    child = _python(_PROBE, *_NOT_AT_IMPORT)
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert lines[0] == "loaded:", f"import adk loaded {lines[0].removeprefix('loaded:')}"
    assert lines[1] == "hashlib after a checkpoint: True"


def test_every_public_name_imports_from_adk() -> None:
    namespace: dict[str, object] = {}
    exec("from adk import *", namespace)  # the lazily loaded names too (OpenAIChatModel)
    assert [name for name in adk.__all__ if name not in namespace] == []
    assert len(adk.__all__) >= 50


def _bound_for_type_checkers(path: Path) -> set[str]:
    """The names a module binds where a type checker sees them: at its top level, and under
    ``if TYPE_CHECKING:`` (never in an ``else`` of it, nor in functions)."""
    names: set[str] = set()

    def bind(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                bind(node.body)

    bind(ast.parse(path.read_text()).body)
    return names


@pytest.mark.parametrize("module", ["adk", "adk.models", "adk.checkpoint", "adk.execution"])
def test_every_lazy_public_name_is_seen_by_type_checkers(module: str) -> None:
    # These packages load some names on first use through a module __getattr__, which type
    # checkers are not shown (it would make any name they look up Any): each public name must be
    # bound where they look, an import under TYPE_CHECKING for a lazy one
    # (tests/typed_usage/imports.py checks the types mypy then gives).
    package = importlib.import_module(module)
    assert package.__file__ is not None
    bound = _bound_for_type_checkers(Path(package.__file__))
    assert "__getattr__" not in bound
    assert [name for name in package.__all__ if name not in bound] == []


def test_the_event_driven_layer_loads_no_flink_until_asked() -> None:
    code = (
        "import sys, adk.actions, adk.execution\n"
        "print('pyflink' in sys.modules)\n"
        "from adk.execution import LocalExecutionEnvironment\n"
        "print('pyflink' in sys.modules)\n"
    )
    child = _python(code)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["False", "False"]


def test_the_deferred_modules_load_on_first_access() -> None:
    # What the framework reaches as package attributes (runner: ``checkpoint._claim.one_resume``,
    # ``adk._preflight.Preflight``) and what users import by name must load when first asked for,
    # in a fresh interpreter where nothing has loaded them yet; a name that is not there is still
    # an AttributeError.
    code = (
        "import sys, adk, adk.checkpoint as c\n"
        "print(adk._preflight.Preflight.__module__, adk._approval.__name__,"
        " adk._event_json.__name__)\n"
        "print(c._claim.one_resume.__module__, c._snapshot.__name__, c._points.__name__,"
        " c._pending.__name__)\n"
        "from adk.checkpoint import *\n"
        "print(list_pending.__module__, PendingCheckpoint.__module__)\n"
        "print(adk.workflows.LoopAgent.__name__, adk.callbacks.Callbacks.__name__,"
        " adk.flow.__name__, adk.resources.__name__, adk.agent_tool.__name__)\n"
        "from adk import SequentialAgent, with_sub_agents\n"
        "print(SequentialAgent.__module__, with_sub_agents.__module__, adk.AgentTool.__module__,"
        " adk.Resources.__module__, 'SequentialAgent' in vars(adk), 'LoopAgent' in vars(adk))\n"
        "for package, name in ((adk, '_nothing'), (c, '_nothing'), (c, 'codec_')):\n"
        "    try:\n"
        "        getattr(package, name)\n"
        "    except AttributeError as exc:\n"
        "        print(exc)\n"
    )
    child = _python(code)
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == [
        "adk._preflight adk._approval adk._event_json",
        "adk.checkpoint._claim adk.checkpoint._snapshot adk.checkpoint._points"
        " adk.checkpoint._pending",
        "adk.checkpoint._pending adk.checkpoint._pending",
        # the public modules import adk bound before they were lazy, reachable as they were
        "LoopAgent Callbacks adk.flow adk.resources adk.agent_tool",
        # a name once asked for is the package's own attribute: no hook on later lookups
        "adk.workflows adk.flow adk.agent_tool adk.resources True False",
        "module 'adk' has no attribute '_nothing'",
        "module 'adk.checkpoint' has no attribute '_nothing'",
        "module 'adk.checkpoint' has no attribute 'codec_'",
    ]


def test_a_runner_without_callbacks_or_tracing_loads_no_hook_machinery() -> None:
    # Callbacks and tracing attach through ``adk._instrument`` (which imports ``adk.callbacks``):
    # a runner given neither, with no OpenTelemetry configured, has no hooks and loads neither;
    # one given a callback loads them and calls it.
    code = (
        "import asyncio, sys, adk\n"
        "from adk.testing import ScriptedModel\n"
        "from prebuilt import ReActAgent\n"
        "watched = ('adk._instrument', 'adk.callbacks')\n"
        "runner = adk.Runner(ReActAgent('a', ScriptedModel(['hi'])))\n"
        "print(asyncio.run(runner.invoke('go')).text, runner._hooks, [m in sys.modules for m in watched])\n"
        "seen = []\n"
        "hooked = adk.Runner(ReActAgent('a', ScriptedModel(['hi'])),"
        " callbacks=[adk.Callbacks(on_event=seen.append)])\n"
        "asyncio.run(hooked.invoke('go'))\n"
        "print(len(seen), [m in sys.modules for m in watched])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_PYTHON_")}
    child = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["hi None [False, False]", "1 [True, True]"]


def test_the_frameworks_own_types_are_registered_without_a_pause() -> None:
    # ``adk.Message`` and ``adk.InterruptPoint`` are registered under stable names for checkpoints
    # and events' JSON. Registered where pausing is (``checkpoint._snapshot``, now loaded on
    # first use), a fresh program's ``to_dict`` of an event carrying a Message refused it.
    code = (
        "import sys, adk\n"
        "from adk.events import AgentOutput\n"
        "event = adk.AgentEvent(output=AgentOutput(custom=adk.Message.user('hi')))\n"
        "data = event.to_dict()\n"
        "back = adk.AgentEvent.from_dict(data).output.custom\n"
        "print(data['output']['custom_type'], type(back).__name__, back.content,"
        " 'adk.checkpoint._snapshot' in sys.modules)\n"
    )
    child = _python(code)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["adk.Message", "Message", "hi", "False"]


def test_import_prebuilt_builds_no_pydantic_model() -> None:
    # prebuilt's models (Plan, ExecutedStep and the adapter of a list of them) are built on first
    # use, as adk's are: building one at import costs its schema and pydantic's plugin lookup
    # (importlib.metadata) in every program, PlanExecute or not. A PlanExecute run builds them.
    code = (
        "import sys, adk, prebuilt\n"
        "from prebuilt._plan_state import _EXECUTED_STEPS\n"
        "print('importlib.metadata' in sys.modules, prebuilt.Plan.__pydantic_complete__)\n"
        "steps = _EXECUTED_STEPS.validate_python([{'step': 'a', 'result': 'b'}])\n"
        "print(prebuilt.Plan(steps=[' x ', ' ']).steps, steps[0].result)\n"
    )
    child = _python(code)
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["False False", "['x'] b"]
