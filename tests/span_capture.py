"""The span-capturing fixtures shared by the tracing tests: ``exporter``, an in-memory span
exporter, and ``provider``, a tracer provider writing to it, for ``Runner(tracer_provider=...)``
so a test reads the spans its run made. A test module brings them in with
``from span_capture import exporter_fixture, provider_fixture``; the fixtures' names differ from
the functions' so a test's ``exporter``/``provider`` parameters shadow no imported name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture(name="exporter")
def exporter_fixture() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(name="provider")
def provider_fixture(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()
