"""A stdio MCP server written by hand (JSON-RPC lines), for what the ``mcp`` package's server will
not send: progress notifications whose numbers are ``NaN`` and ``1e999`` (an infinity once
parsed), as a server that does not follow MCP may write them. Its tool ``count`` reports
a NaN progress, then an infinite total, then a good report, and answers ``counted``; ``flood``
reports ``reports`` times (its argument, 0 to ``reports - 1`` of ``reports``), then answers
``flooded``, as a chatty server may."""

from __future__ import annotations

import json
import sys
from typing import Any


def send(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))


def progress(token: Any, numbers: str, message: str) -> None:
    # Written as text: json.dumps would refuse to write 1e999, and no JSON writer writes NaN.
    send(
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":'
        + json.dumps(token)
        + ","
        + numbers
        + ',"message":'
        + json.dumps(message)
        + "}}"
    )


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if request_id is None:  # a notification (initialized, cancelled): nothing to answer
            continue
        if method == "initialize":
            answer(
                request_id,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw-progress", "version": "1"},
                },
            )
        elif method == "tools/list":
            tool = {"name": "count", "description": "Counts.", "inputSchema": {"type": "object"}}
            flood = {"name": "flood", "description": "Floods.", "inputSchema": {"type": "object"}}
            answer(request_id, {"tools": [tool, flood]})
        elif method == "tools/call" and params.get("name") == "flood":
            token = (params.get("_meta") or {}).get("progressToken")
            reports = int(params["arguments"]["reports"])
            for step in range(reports if token is not None else 0):
                progress(token, f'"progress":{step},"total":{reports}', f"step {step}")
            answer(request_id, {"content": [{"type": "text", "text": "flooded"}]})
        elif method == "tools/call":
            token = (params.get("_meta") or {}).get("progressToken")
            if token is not None:
                progress(token, '"progress":NaN,"total":2', "counting")
                progress(token, '"progress":1,"total":1e999', "halfway")
                progress(token, '"progress":2,"total":2', "done")
            answer(request_id, {"content": [{"type": "text", "text": "counted"}]})
        elif method == "ping":
            answer(request_id, {})
        else:
            send(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {"code": -32601, "message": f"no method {method}"},
                    }
                )
            )


if __name__ == "__main__":
    main()
