"""A document library MCP server over stdio, for the LlamaIndex review-workflow port
(``tests/test_app_review_flow.py``): ``python library_server.py``.

``retrieve`` gives a document's passages for a question (a structured result, as a LlamaIndex
retriever's nodes), an unknown document is a tool error; ``define`` explains a term of the
glossary, the tool the drafting model calls.
"""

from __future__ import annotations

import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel


class Passage(BaseModel):
    node_id: str
    text: str


class Passages(BaseModel):
    """One object, not a bare list: a list result reaches the caller as one JSON text per item,
    joined by newlines, which no ``json.loads`` reads (docs/llamaindex.md)."""

    passages: list[Passage]


DOCUMENTS = {
    "lease-7": [
        "The tenant pays rent on the first day of each month.",
        "The garden is shared with the neighbours.",
        "Rent rises by the index once a year.",
        "Pets need the landlord's written consent.",
    ],
    "nda-2": [
        "Confidential information excludes what is public.",
        "The agreement ends after two years.",
        "Either party may end it with notice.",
    ],
}

GLOSSARY = {
    "rent": "the monthly payment for the use of the property",
    "notice": "a written warning given before ending an agreement",
}


def build_server() -> MCPServer:
    server = MCPServer("library", log_level="WARNING")

    @server.tool()
    def retrieve(doc_id: str, question: str) -> Passages:
        """The passages of a document, for a question about it."""
        if doc_id not in DOCUMENTS:
            raise ToolError(f"no document {doc_id} in the library")
        found = [Passage(node_id=f"{doc_id}#{n}", text=t) for n, t in enumerate(DOCUMENTS[doc_id])]
        return Passages(passages=found)

    @server.tool()
    def define(term: str) -> str:
        """What a term of the glossary means."""
        return GLOSSARY.get(term, f"{term}: not in the glossary")

    return server


if __name__ == "__main__":
    build_server().run("stdio")
