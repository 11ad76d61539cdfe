"""LLM answers: one camelCase-aliased pydantic model per answer gives the JSON schema sent to
the model (every field required, shown ids as an enum built per prompt) and the prompt's
example; answers are parsed leniently (think tags, code fences, outermost braces, raw control
characters in strings, keys in any case) and a bad one is asked for once more."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from dreamwell.dream.llm import LLM, BadAnswer

T = TypeVar("T", bound="Answer")
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


class Answer(BaseModel):
    """Base of LLM answer models: camelCase on the wire, snake_case in Python; keys match
    case-insensitively and with or without underscores when parsing."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


def _keys_squashed(value: Any) -> Any:
    if isinstance(value, dict):
        return {_squash(str(k)): _keys_squashed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys_squashed(v) for v in value]
    return value


def _squash(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _lookup(model: type[BaseModel]) -> dict[str, str]:
    return {_squash(n): (f.alias or n) for n, f in model.model_fields.items()}


def _realias(value: Any, model: type[BaseModel]) -> Any:
    """Map squashed keys back to the model's aliases, recursing into nested Answer models."""
    if not isinstance(value, dict):
        return value
    names = _lookup(model)
    out: dict[str, Any] = {}
    for key, item in value.items():
        alias = names.get(key)
        if alias is None:
            continue
        field = next(f for n, f in model.model_fields.items() if (f.alias or n) == alias)
        inner = _inner_model(field.annotation)
        if inner is not None:
            item = (
                [_realias(v, inner) for v in item]
                if isinstance(item, list)
                else _realias(item, inner)
            )
        out[alias] = item
    return out


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _json_candidates(text: str) -> Iterator[str]:
    body = _THINK.sub("", text)
    body = re.sub(r"^.*?</think>", "", body, flags=re.S | re.I)  # an unclosed opening tag
    yield from _FENCE.findall(body)
    start, end = body.find("{"), body.rfind("}")
    if start >= 0:  # without a closing brace, json says where the (cut off) answer broke
        yield body[start : end + 1] if end > start else body[start:]
        yield from _salvaged(body[start:])


def _salvaged(text: str, tries: int = 3) -> Iterator[str]:
    """An answer cut off at the output limit, closed after its last complete object: the
    items it finished count, the one it was writing is dropped."""
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
            if ch == "}" and stack:
                cuts.append((i + 1, "".join(reversed(stack))))
    for at, closing in reversed(cuts[-tries:]):
        yield text[:at] + closing


def parse_answer(text: str, model: type[T]) -> T:
    """Strip <think>…</think> and code fences, take the outermost {…}, accept raw control
    characters inside strings, match keys leniently and validate; raises BadAnswer."""
    problem = "the answer holds no JSON object"
    for candidate in _json_candidates(text):
        try:
            data = json.loads(candidate, strict=False)
        except ValueError as exc:
            problem = f"the answer is not valid JSON: {exc}"
            continue
        try:
            return model.model_validate(_realias(_keys_squashed(data), model))
        except ValidationError as exc:
            errors = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            problem = f"the answer is not a valid {model.__name__}: {errors}"
    raise BadAnswer(problem)


SHOWN_ID = "shownId"  # json_schema_extra marker: the value must be one of the shown ids
SAVE_REF = "save:"  # "save:N" names the N-th entry of the answer's toSave list
SAVE_REFS = 8


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.split("/")[-1]], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("$defs", "title")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _constrain(node: Any, ids: list[str] | None) -> None:
    if isinstance(node, list):
        for item in node:
            _constrain(item, ids)
        return
    if not isinstance(node, dict):
        return
    marker = node.pop(SHOWN_ID, None)
    if marker and ids is not None:
        allowed = list(ids)
        if marker == "or-save":
            allowed += [f"{SAVE_REF}{n}" for n in range(1, SAVE_REFS + 1)]
        target = node["items"] if node.get("type") == "array" else node
        target.pop("type", None)
        target["enum"] = allowed
    if node.get("type") == "object" and isinstance(node.get("properties"), dict):
        node["required"] = list(node["properties"])
        node["additionalProperties"] = False
    for value in node.values():
        _constrain(value, ids)


def schema_for(model: type[BaseModel], ids: list[str] | None = None) -> dict[str, Any]:
    """The JSON schema sent to the model: camelCase keys, every field required, no extra keys,
    and fields marked `shownId` limited to `ids` (an enum built per prompt)."""
    raw = model.model_json_schema(by_alias=True)
    schema: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    _constrain(schema, ids)
    return schema


def example_for(model: type[BaseModel]) -> str:
    """The prompt's example answer, from the same model: each field's first `examples` value."""
    return json.dumps(_example(model), ensure_ascii=False)


def _example(model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        inner = _inner_model(field.annotation)
        if field.examples:
            value: Any = field.examples[0]
        elif inner is not None:
            value = [_example(inner)]
        else:
            value = None
        out[field.alias or name] = value
    return out


def ask_for(
    llm: LLM,
    system: str,
    prompt: str,
    model: type[T],
    ids: list[str] | None = None,
    cancel: threading.Event | None = None,
    notes: list[str] | None = None,
) -> T:
    """Ask, parse leniently, and on a bad answer ask once more quoting what was wrong.
    Raises BadAnswer after two bad answers, LLMUnavailable/LLMCancelled on transport."""
    schema = schema_for(model, ids)
    full = f"{prompt}\n\nAnswer with JSON only, shaped like: {example_for(model)}"
    try:
        return parse_answer(llm.ask(system, full, schema, cancel), model)
    except BadAnswer as first:
        if notes is not None:
            notes.append(f"retried a bad answer ({str(first)[:200]})")
        again = (
            f"{full}\n\nYour previous answer was rejected: {str(first)[:300]}\n"
            "Answer again with one JSON object only."
        )
        return parse_answer(llm.ask(system, again, schema, cancel), model)
