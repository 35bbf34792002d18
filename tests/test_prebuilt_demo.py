"""The README's first command, ``python examples/demo.py``, offline and against a real HTTP server
speaking the OpenAI protocol; and the snippets of docs/prebuilt.md, which must run as written."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from openai_server import Call, OpenAIServer, Reply

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo.py"


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PYADK_MODEL")
    }
    env.update(NO_COLOR="1", **extra)
    return env


def test_demo_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    expected = [
        "(offline: scripted model replies",
        "[user] I'm going to Lisbon",
        "[travel_desk] Let me check the forecast first.",
        '[travel_desk] calls transfer_to_agent({"agent_name": "weather"})',
        "--- travel_desk hands over to weather ---",
        '[weather] calls get_weather({"city": "Lisbon"})',
        "[weather] get_weather returned 21 C and sunny",
        "[weather] Next week in Lisbon: 21 C and sunny.",
        "--- weather hands over to travel_desk ---",
        "[currency] convert_currency returned 200.00 EUR = 216.00 USD",
        "--- currency hands over to travel_desk ---",
        "[itinerary] add_to_itinerary returned added as entry #1",
        "--- itinerary hands over to travel_desk ---",
        "[travel_desk] All set! Lisbon will be 21 C and sunny",
        "itinerary: ['Trip to Lisbon next week']",
    ]
    position = 0
    for line in expected:
        found = out.find(line, position)
        assert found >= 0, f"missing (in order): {line!r}\n---\n{out}"
        position = found + len(line)
    assert "\033[" not in out  # no colours when not on a terminal


async def test_demo_runs_against_an_openai_compatible_server() -> None:
    script = [
        Reply(
            text="Checking the weather.",
            tool_calls=[Call("transfer_to_agent", '{"agent_name": "weather"}')],
        ),
        Reply(tool_calls=[Call("get_weather", '{"city": "Oslo"}')]),
        Reply(text="Oslo: 4 C with rain."),
        Reply(text="Take an umbrella to Oslo."),
    ]
    async with OpenAIServer(script, model="demo-model") as server:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(DEMO),
            "Weather in Oslo?",
            cwd=ROOT,
            env=clean_env(OPENAI_BASE_URL=server.base_url, PYADK_MODEL="demo-model"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(60):
            stdout, stderr = await process.communicate()
        bodies = server.bodies
    out = stdout.decode()
    assert process.returncode == 0, stderr.decode()
    assert "(model: demo-model)" in out
    assert "[travel_desk] Checking the weather." in out
    assert "--- travel_desk hands over to weather ---" in out
    assert "[weather] get_weather returned 4 C with rain" in out
    assert "[weather] Oslo: 4 C with rain." in out
    assert "[travel_desk] Take an umbrella to Oslo." in out
    assert len(bodies) == 4
    assert all(b["model"] == "demo-model" and b["stream"] is True for b in bodies)
    transfer = next(t for t in bodies[0]["tools"] if t["function"]["name"] == "transfer_to_agent")
    enum = transfer["function"]["parameters"]["properties"]["agent_name"]["enum"]
    assert enum == ["weather", "currency", "itinerary"]
    # The worker's second call carries its tool result back to the model.
    assert bodies[2]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": bodies[2]["messages"][-2]["tool_calls"][0]["id"],
        "content": "4 C with rain",
    }


def test_docs_snippets_run() -> None:
    text = (ROOT / "docs" / "prebuilt.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    assert len(blocks) >= 5
    runner = (
        "import json, sys\n"
        "for i, code in enumerate(json.loads(sys.stdin.read())):\n"
        "    exec(compile(code, f'docs/prebuilt.md block {i + 1}', 'exec'), {'__name__': '__main__'})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", runner],
        input=json.dumps(blocks),
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
