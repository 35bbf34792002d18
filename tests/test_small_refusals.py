"""Small refusals where a tool, an agent or a supervisor is made: a wrong argument fails there,
naming what was wrong and whose, not later inside a run (or never, taken for something else)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adk
from adk import BaseAgent, Runner, SequentialAgent
from adk.actions import Event, OutputEvent
from adk.testing import ScriptedModel
from prebuilt import PlanExecute, ReActAgent


def lookup(city: str) -> str:
    """Look a city up."""
    return city


@pytest.mark.parametrize("flag", ["no", "False", 0, 1, None])
def test_a_non_bool_thread_flag_is_refused_naming_it(flag: Any) -> None:
    # "no" is truthy: the tool ran in a thread without a word, the opposite of what was written.
    with pytest.raises(TypeError, match=r"tool 'lookup': thread must be True or False"):
        adk.tool(thread=flag)(lookup)
    with pytest.raises(TypeError, match=r"tool 'lookup': thread must be True or False"):
        adk.FunctionTool(lookup, thread=flag)


def test_bool_thread_flags_are_taken() -> None:
    assert adk.tool(thread=False)(lookup)._thread is False
    assert adk.FunctionTool(lookup, thread=True)._thread is True


@pytest.mark.parametrize("description", [5, ["Look up."], b"Look up."])
def test_a_tool_description_that_is_not_a_str_is_refused_naming_the_tool(
    description: Any,
) -> None:
    with pytest.raises(TypeError, match=r"tool 'lookup': description must be a str"):
        adk.tool(description=description)(lookup)
    with pytest.raises(TypeError, match=r"tool 'find': description must be a str"):
        adk.FunctionTool(lookup, name="find", description=description)


def test_an_agent_description_that_is_not_a_str_is_refused_naming_the_agent() -> None:
    model = ScriptedModel([])
    with pytest.raises(TypeError, match=r"ReActAgent 'helper': description must be a str"):
        ReActAgent("helper", model, description=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"agent 'custom': description must be a str"):
        BaseAgent("custom", description=b"custom")  # type: ignore[arg-type]
    step = ReActAgent("step", model)
    with pytest.raises(TypeError, match=r"SequentialAgent 'seq': description must be a str"):
        SequentialAgent("seq", [step], description=["steps"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"PlanExecute 'plan': description must be a str"):
        PlanExecute.from_model(model, name="plan", description=1)  # type: ignore[arg-type]


async def test_an_agent_description_of_none_is_taken_as_none_given() -> None:
    """None (``description=config.get("description")``, a subclass defaulting it to None) was
    read as no description by the transfer tool and tracing, its readers, until the refusal of
    non-str descriptions refused it too, breaking such agents where they are made."""
    worker = BaseAgent("worker", description=None)  # type: ignore[arg-type]
    flow = SequentialAgent("seq", [ReActAgent("step", ScriptedModel([]))], description=None)  # type: ignore[arg-type]
    helper = ReActAgent("helper", ScriptedModel([]), description=None)  # type: ignore[arg-type]
    assert (worker.description, flow.description, helper.description) == ("", "", "")
    model = ScriptedModel(["ok"])
    await Runner(ReActAgent("boss", model, sub_agents=[helper])).invoke("hi")
    (transfer,) = [spec for spec in model.requests[0].tools if spec.name == "transfer_to_agent"]
    assert "- helper: (no description)" in transfer.description


_CATALOG = {"en": "Handles invoices.", "fr": "Gère les factures."}
_LANGUAGE: list[str | None] = [None]  # the active language: none where the agents are made


class _LazyText:
    """A lazy translation string, as Django's gettext_lazy or Babel's LazyString make one: an
    object, no str, read in the active language each time it is made text (reading it where no
    language is active fails, as Django's does before its translations load)."""

    def __str__(self) -> str:
        language = _LANGUAGE[0]
        if language is None:
            raise RuntimeError("translations are not loaded yet")
        return _CATALOG[language]


async def test_an_agent_description_that_is_a_lazy_translation_string_is_read_per_run() -> None:
    """An agent's description made with gettext_lazy was taken (the transfer tool lists it as
    text, in each run's language) until the refusal of non-str descriptions refused it where the
    agent is made, often at import, where making it text is not yet possible. It is kept as
    given: the transfer tool reads it per run and tracing records its text."""
    billing = ReActAgent("billing", ScriptedModel(["paid"], cycle=True), description=_LazyText())  # type: ignore[arg-type]
    assert isinstance(BaseAgent("clerk", description=_LazyText()).description, _LazyText)  # type: ignore[arg-type]
    model = ScriptedModel(["hello"], cycle=True)
    boss = ReActAgent("boss", model, sub_agents=[billing])
    listed = []
    for language in ("en", "fr"):
        _LANGUAGE[0] = language
        try:
            await Runner(boss).invoke("hi")
        finally:
            _LANGUAGE[0] = None
        (transfer,) = [
            spec for spec in model.requests[-1].tools if spec.name == "transfer_to_agent"
        ]
        listed.append(transfer.description.splitlines()[-1])
    assert listed == ["- billing: Handles invoices.", "- billing: Gère les factures."]

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _LANGUAGE[0] = "fr"
    try:
        await Runner(billing, tracer_provider=provider).invoke("pay")
    finally:
        _LANGUAGE[0] = None
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent billing"]
    assert span.attributes is not None
    assert span.attributes["gen_ai.agent.description"] == "Gère les factures."
    provider.shutdown()


# -- pydantic's wording where it did not say what to do --------------------------------------------


def test_an_option_model_options_lack_says_where_a_providers_option_goes() -> None:
    """``ModelOptions(top_p=0.9)`` said only "Extra inputs are not permitted": top_p is a real
    option, so the reader was left to guess that ``extra`` takes it. Still a ValidationError."""
    with pytest.raises(pydantic.ValidationError) as caught:
        adk.ModelOptions(temperature=0.2, top_p=0.9)
    text = str(caught.value)
    assert "ModelOptions has no field 'top_p' (its fields: temperature, max_tokens," in text
    assert "a provider's own option goes in extra: extra={'top_p': ...}" in text
    with pytest.raises(pydantic.ValidationError, match=r"RetryPolicy has no field 'max_atempts' "):
        adk.RetryPolicy(max_atempts=5)
    with pytest.raises(pydantic.ValidationError, match="greater than or equal to 0") as caught:
        adk.ModelOptions(temperature=-1, seed=7)  # every problem is still told
    assert "has no field 'seed'" in str(caught.value)


def test_a_misspelt_field_set_on_a_retry_policy_names_its_fields() -> None:
    """``model.retry.max_atempts = 1`` (a field set in place, which counts since b6ba07d) said
    "Object has no attribute 'max_atempts'", where the same typo as an argument names the fields;
    a value out of range keeps pydantic's wording, and nothing is changed either way."""
    policy = adk.RetryPolicy()
    pattern = r"RetryPolicy has no field 'max_atempts' \(its fields: max_attempts, initial_delay,"
    with pytest.raises(pydantic.ValidationError, match=pattern):
        policy.max_atempts = 1  # type: ignore[attr-defined]
    with pytest.raises(pydantic.ValidationError, match="greater than or equal to 1"):
        policy.max_attempts = 0
    assert policy == adk.RetryPolicy()


def test_another_providers_name_for_an_option_model_options_has_names_the_field() -> None:
    """A Google ADK port's ``GenerateContentConfig(max_output_tokens=, stop_sequences=)`` (also
    Anthropic's and OpenAI's own names) were told to go in ``extra``, sent to the server as they
    are: Chat Completions refuses ``max_output_tokens``, and the limit the adapter sends under the
    server's own name (``max_tokens``) was never set."""
    for name, field in (
        ("max_output_tokens", "max_tokens"),
        ("max_completion_tokens", "max_tokens"),
        ("stop_sequences", "stop"),
    ):
        with pytest.raises(pydantic.ValidationError) as caught:
            adk.ModelOptions(**{name: 1})
        text = str(caught.value)
        assert f"ModelOptions has no field {name!r}" in text
        assert f"it is {field!r} here: ModelOptions({field}=...)" in text
        assert "goes in extra" not in text


async def test_a_runs_model_options_mapping_with_a_providers_option_says_where_it_goes() -> None:
    runner = Runner(ReActAgent("r", ScriptedModel(["never"])))
    with pytest.raises(
        adk.RunError, match=r"(?s)model_options is invalid.*extra=\{'top_p': \.\.\.\}"
    ):
        await runner.invoke("hi", options={"model_options": {"top_p": 0.9}})


class _Note(Event):
    text: str
    level: int = 0


def test_an_event_given_its_fields_by_position_says_to_name_them() -> None:
    """``OutputEvent("done")`` (Flink Agents' Java ``new OutputEvent(x)``) failed with
    ``BaseModel.__init__() takes 1 positional argument but 2 were given``."""
    with pytest.raises(TypeError, match=r"^OutputEvent takes its fields by name, not by position "):
        OutputEvent("done")
    with pytest.raises(TypeError, match=r"e\.g\. _Note\(text=\.\.\.\); its fields: text, level$"):
        _Note("hi", 2)
    assert OutputEvent(output="done").output == "done" and _Note(text="hi").level == 0
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        _Note(txt="hi")  # validation is pydantic's as before
