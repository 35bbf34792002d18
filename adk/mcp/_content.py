"""Turning MCP content blocks into the text a chat model reads.

pyadk messages carry text. Text blocks and embedded text resources pass through; binary blocks
(images, audio, blobs) and resource links become short bracketed placeholders, so the model knows
something was there without receiving bytes it cannot use.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

__all__ = ["block_text", "blocks_text"]


def block_text(block: object) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return f"[image: {block.mime_type}]"
    if isinstance(block, AudioContent):
        return f"[audio: {block.mime_type}]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.name} <{block.uri}>]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return resource.text
        if isinstance(resource, BlobResourceContents):
            kind = resource.mime_type or "binary data"
            return f"[resource: {resource.uri} ({kind})]"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def blocks_text(blocks: Iterable[object]) -> str:
    return "\n".join(block_text(block) for block in blocks)
