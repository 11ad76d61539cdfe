"""Both LLM providers over HTTP against scripted fake servers on 127.0.0.1: good answers,
broken JSON, raw control characters, 429 then success, 500, time-outs, refused connections,
missing models, structured-output fallback, cancelling mid-answer, and the API key that
must never show."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dreamwell.dream.answers import ask_for, parse_answer, schema_for
from dreamwell.dream.budget import Metered, Stopped
from dreamwell.dream.llm import BadAnswer, LLMCancelled, LLMUnavailable, OllamaLLM, OpenAILLM
from dreamwell.dream.passes import ConsolidationPlan, Preferences, consolidation_pass
from dreamwell.server.config import Settings
from dreamwell.server.dream_llm import llm_for
from dreamwell.stores import MemoryEntry, utcnow
from tests.support.fake_ollama import fake_ollama, unreachable_host
from tests.support.fake_openai import Drip, Slow, Status, fake_openai

KEY = "sk-test-0123456789abcdef"
PLAN = json.dumps({"toDelete": [], "toSave": []})


def openai(url: str, timeout: float = 5.0, **kw: Any) -> OpenAILLM:
    return OpenAILLM(url, "fake-model", timeout, KEY, **kw)


def test_a_good_answer_comes_back_with_the_schema_and_the_key_sent() -> None:
    with fake_openai(PLAN) as (url, script):
        llm = openai(url)
        llm.check()
        plan = ask_for(llm, "sys", "Entries: ...", ConsolidationPlan, ["a" * 12, "b" * 12])
    assert plan.to_delete == [] and plan.to_save == []
    [request] = script.requests
    assert request["model"] == "fake-model" and request["stream"] is True
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["toDelete", "toSave"]
    sources = schema["properties"]["toSave"]["items"]["properties"]["sourceIds"]
    assert sources["items"]["enum"] == ["a" * 12, "b" * 12]
    assert script.headers[0]["Authorization"] == f"Bearer {KEY}"
    assert "<id of a shown entry>" in request["messages"][1]["content"]  # the example


@pytest.mark.parametrize("status", [400, 422, 500])
def test_an_endpoint_without_json_schema_falls_back_at_once_and_remembers(status: int) -> None:
    with fake_openai(PLAN, refuse_schema=True, refuse_status=status) as (url, script):
        llm = openai(url)
        started = time.monotonic()
        llm.ask("s", "p", {"type": "object"})
        llm.ask("s", "p", {"type": "object"})
        assert time.monotonic() - started < 5.0
    formats = [r["response_format"] for r in script.requests]
    assert formats[0]["type"] == "json_schema"
    assert formats[1] == {"type": "json_object", "schema": {"type": "object"}}
    assert formats[2] == formats[1] and len(formats) == 3


def test_broken_json_is_retried_once_quoting_the_error_then_fails() -> None:
    with fake_openai('{"toDelete": [', PLAN) as (url, script):
        notes: list[str] = []
        ask_for(openai(url), "s", "p", ConsolidationPlan, [], None, notes)
    assert "previous answer was rejected" in script.requests[1]["messages"][1]["content"]
    assert notes and "not valid JSON" in notes[0]
    with fake_openai("no json at all") as (url, script), pytest.raises(BadAnswer):
        ask_for(openai(url), "s", "p", ConsolidationPlan)
    assert len(script.requests) == 2


def test_an_empty_object_is_not_a_plan_and_placeholder_sentiments_fail() -> None:
    with pytest.raises(BadAnswer, match="toDelete"):
        parse_answer("{}", ConsolidationPlan)
    bad = {
        "preferences": [{"content": "x y z", "sentiment": "strong|mild|casual", "occurrences": 1}]
    }
    with pytest.raises(BadAnswer, match="sentiment"):
        parse_answer(json.dumps(bad), Preferences)


def test_raw_control_characters_fences_and_think_tags_are_accepted() -> None:
    raw = (
        "<think>plan {x}</think>```json\n"
        '{"preferences": [{"content": "Wants\nshort\tanswers", "sentiment": "mild",'
        ' "occurrences": 2, "sensitive": false}]}\n```'
    )
    with fake_openai(raw) as (url, _):
        answer = ask_for(openai(url), "s", "p", Preferences)
    assert answer.preferences[0].content == "Wants\nshort\tanswers"


def test_an_answer_cut_off_at_the_output_limit_keeps_its_finished_items() -> None:
    item = {"content": "Prefers prose to bullet points", "sentiment": "strong", "occurrences": 2}
    whole = json.dumps({"preferences": [item, item | {"content": "Uses kilometres"}]})
    cut = whole[: whole.rindex("Uses") + 2]  # mid-way through the second item
    answer = parse_answer("Sure! " + cut, Preferences)
    assert [p.content for p in answer.preferences] == ["Prefers prose to bullet points"]
    nested = '{"toDelete": [], "toSave": [{"content": "a \\" } b", "sourceIds": ["x"]}, {"con'
    assert [e.content for e in parse_answer(nested, ConsolidationPlan).to_save] == ['a " } b']


def test_429_is_asked_again_after_the_server_s_delay_within_the_cycle_s_wait_budget() -> None:
    with fake_openai(Status(429, retry_after="0"), PLAN) as (url, script):
        metered = Metered(openai(url), 10_000)
        assert metered.ask("s", "p", {}) == PLAN
    assert len(script.requests) == 2
    assert (metered.calls, metered.failed, metered.stopped) == (2, 1, "")


def test_the_waits_for_retry_after_add_up_to_the_cycle_s_wait_budget_then_it_stops() -> None:
    slow = Status(429, retry_after="0.6")
    with fake_openai(slow, slow, PLAN) as (url, script):
        metered = Metered(openai(url), 10_000, wait_budget=1.0)
        started = time.monotonic()
        with pytest.raises(LLMUnavailable, match="429"):
            metered.ask("s", "p", {})
    assert len(script.requests) == 2 and 0.6 <= time.monotonic() - started < 5
    assert "429" in metered.stopped and metered.wait_left == pytest.approx(0.4)


def test_a_429_without_retry_after_or_past_the_wait_budget_stops_the_cycle_s_questions() -> None:
    """One request each: the first failure ends the cycle's questions, later ones are not
    sent; the failed call is booked as failed and costs no tokens."""
    for status in (Status(429), Status(429, retry_after="3600"), Status(500)):
        with fake_openai(status, PLAN) as (url, script):
            metered = Metered(openai(url), 10_000)
            with pytest.raises(LLMUnavailable, match=str(status.code)):
                metered.ask("s", "p", {})
            with pytest.raises(Stopped, match="LLM stopped"):
                metered.ask("s", "p", {})
        assert len(script.requests) == 1, status
        assert (metered.calls, metered.failed, metered.tokens) == (1, 1, 0)
        assert str(status.code) in metered.stopped


def test_a_slow_server_times_out_with_a_clear_sentence() -> None:
    with fake_openai(Slow(5.0, PLAN)) as (url, _):
        started = time.monotonic()
        with pytest.raises(LLMUnavailable, match="gave no answer within"):
            openai(url, timeout=0.5).ask("s", "p", {})
    assert time.monotonic() - started < 4.0


def test_a_refused_connection_is_an_llm_error() -> None:
    for llm in (openai(unreachable_host() + "/v1"), OllamaLLM(unreachable_host(), "m", 5.0)):
        with pytest.raises(LLMUnavailable, match="unreachable"):
            llm.ask("s", "p", {})
        with pytest.raises(LLMUnavailable, match="unreachable"):
            llm.check()


def test_check_fails_when_the_model_is_missing() -> None:
    missing = pytest.raises(LLMUnavailable, match="does not serve model 'fake-model'")
    with fake_openai(models=["other-model"]) as (url, _), missing:
        openai(url).check()
    with fake_ollama() as (host, _):
        OllamaLLM(host, "fake", 5.0).check()  # fake:latest
        with pytest.raises(LLMUnavailable, match=r"has no model 'llama3\.2'.*ollama pull"):
            OllamaLLM(host, "llama3.2", 5.0).check()


def test_cancelling_mid_answer_closes_the_connection_and_stops_generation() -> None:
    text = PLAN + " " * 400
    cancel = threading.Event()
    with fake_openai(Drip(text, 0.02)) as (url, script):
        threading.Thread(
            target=lambda: script.streaming.wait(10) and cancel.set(), daemon=True
        ).start()
        started = time.monotonic()
        with pytest.raises(LLMCancelled):
            openai(url).ask("s", "p", {}, cancel)
        assert time.monotonic() - started < 5.0
        assert script.disconnected.wait(5.0)
    assert script.sent_chars < len(text)


def test_a_cancel_before_the_first_byte_returns_at_once() -> None:
    cancel = threading.Event()
    with fake_openai(Slow(5.0, PLAN)) as (url, _):
        timer = threading.Timer(0.3, cancel.set)
        timer.start()
        started = time.monotonic()
        with pytest.raises(LLMCancelled):
            openai(url, timeout=30.0).ask("s", "p", {}, cancel)
        assert time.monotonic() - started < 3.0


def test_a_pass_cancelled_before_its_call_sends_nothing(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    now = utcnow()
    snapshot = {
        i: MemoryEntry(i, f"fact {i}", None, (), now, now, now) for i in ("a" * 12, "b" * 12)
    }
    with fake_openai(PLAN) as (url, script), pytest.raises(LLMCancelled):
        consolidation_pass(snapshot, openai(url), tmp_path, [], now, None, cancel)
    assert script.requests == []


def test_the_api_key_never_appears_in_errors_logs_or_names(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with fake_openai(Status(401, echo_key=True)) as (url, script):
        llm = openai(url)
        with pytest.raises(LLMUnavailable) as failed:
            llm.ask("s", "p", {})
        with (
            fake_openai(Status(500, echo_key=True)) as (url2, _),
            pytest.raises(LLMUnavailable) as failed2,
        ):
            Metered(openai(url2), 10_000).ask("s", "p", {})
    assert KEY in json.dumps(script.headers)  # it was sent ...
    for text in (str(failed.value), str(failed2.value), caplog.text, llm.name):
        assert KEY not in text  # ... and never shown
    assert "rejected the API key" in str(failed.value) and "***" in str(failed.value)
    settings = Settings(llm_provider="openai", llm_base_url=url, llm_model="m", llm_api_key=KEY)
    assert KEY not in repr(settings) and KEY not in str(settings.model_dump())


def test_ollama_gets_context_and_output_limits_and_a_shown_id_enum() -> None:
    with fake_ollama(PLAN) as (host, script):
        llm = OllamaLLM(host, "fake", 5.0, max_tokens=512, context=4096)
        ask_for(llm, "s", "p", ConsolidationPlan, ["a" * 12])
    [request] = script.requests
    assert request["options"]["num_ctx"] == 4096 and request["options"]["num_predict"] == 512
    deletion = request["format"]["properties"]["toDelete"]["items"]["properties"]
    assert deletion["id"]["enum"] == ["a" * 12]
    assert "save:1" in deletion["supersededBy"]["enum"]


def test_settings_choose_the_provider_and_keep_the_old_ollama_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert llm_for(Settings()) is None
    old = llm_for(Settings(ollama_host="http://127.0.0.1:11434", ollama_model="qwen2.5"))
    assert isinstance(old, OllamaLLM) and old.name == "ollama:qwen2.5@http://127.0.0.1:11434"
    monkeypatch.setenv("DREAMWELL_LLM_PROVIDER", "openai")
    monkeypatch.setenv("DREAMWELL_LLM_BASE_URL", "http://127.0.0.1:1234/v1")
    monkeypatch.setenv("DREAMWELL_LLM_MODEL", "smollm2")
    monkeypatch.setenv("DREAMWELL_LLM_API_KEY", KEY)
    new = llm_for(Settings())
    assert isinstance(new, OpenAILLM) and new.name == "openai:smollm2@http://127.0.0.1:1234/v1"
    monkeypatch.delenv("DREAMWELL_LLM_MODEL")
    with pytest.raises(ValueError, match="llm_model is required"):
        llm_for(Settings())


def test_schema_marks_every_field_required_and_forbids_extra_keys() -> None:
    schema = schema_for(Preferences)
    item = schema["properties"]["preferences"]["items"]
    assert item["required"] == ["content", "sentiment", "occurrences", "sensitive"]
    assert item["additionalProperties"] is False
    assert item["properties"]["sentiment"]["enum"] == ["strong", "mild", "casual"]


def test_llm_flags_on_dream_and_serve_beat_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dreamwell.server.cli.main import parser as _parser
    from dreamwell.server.cli.parsing import settings_from

    LLM_FLAGS = ["llm_provider", "llm_base_url", "llm_model", "llm_api_key"]

    monkeypatch.setenv("DREAMWELL_LLM_MODEL", "from-env")
    flags = ["--llm-provider", "openai", "--llm-base-url", "http://127.0.0.1:1/v1"]
    for command in (["dream", "--once"], ["serve"]):
        args = _parser().parse_args([*command, *flags, "--llm-api-key", KEY])
        settings = settings_from(args, LLM_FLAGS)
        assert settings.llm_provider == "openai" and settings.llm_model == "from-env"
        assert settings.llm_api_key is not None and settings.llm_api_key.get_secret_value() == KEY
    args = _parser().parse_args(["dream", "--once", "--llm-base-url", "ftp://x"])
    with pytest.raises(SystemExit) as bad:
        settings_from(args, LLM_FLAGS)
    assert bad.value.code == 2
    assert capsys.readouterr().err.startswith("dreamwell: bad setting llm_base_url='ftp://x'")
