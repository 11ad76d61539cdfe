"""The dream worker's LLM: Ollama through the `ollama` client, answers parsed leniently.

The only dream module that imports `ollama`. A bad answer (no JSON, wrong shape, HTTP error,
time-out) raises LLMError, and the pass that asked changes nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

T = TypeVar("T", bound="Answer")
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)


class LLMError(Exception):
    """The LLM could not be reached or gave no usable answer."""


def _squash(name: str) -> str:
    return name.replace("_", "").lower()


class Answer(BaseModel):
    """Base of LLM answer models: keys match case-insensitively, camelCase or snake_case."""

    model_config = ConfigDict(alias_generator=_squash, populate_by_name=True, extra="ignore")


class LLM(Protocol):
    @property
    def name(self) -> str: ...

    def check(self) -> None:
        """Raise LLMError when the LLM cannot be reached."""
        ...

    def ask(self, system: str, prompt: str, schema: dict[str, Any]) -> str:
        """The raw text answer; raises LLMError."""
        ...


class OllamaLLM:
    def __init__(self, host: str, model: str, timeout: float) -> None:
        self._host, self._model, self._timeout = host, model, timeout
        self._client: Any = None

    @property
    def name(self) -> str:
        return f"ollama:{self._model}@{self._host}"

    def _connect(self) -> Any:
        import ollama

        if self._client is None:
            self._client = ollama.Client(host=self._host, timeout=self._timeout)
        return self._client

    def check(self) -> None:
        try:
            self._connect().list()
        except Exception as exc:  # refused, time-out, HTTP error
            raise LLMError(f"{self.name} is unreachable: {type(exc).__name__}: {exc}") from exc

    def ask(self, system: str, prompt: str, schema: dict[str, Any]) -> str:
        try:
            response = self._connect().chat(
                model=self._model,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": prompt},
                ],
                format=schema,
                options={"temperature": 0},
            )
            return str(response.message.content or "")
        except Exception as exc:  # connection refused, time-out, HTTP 500, bad payload
            raise LLMError(f"{self.name}: {type(exc).__name__}: {exc}") from exc


def _keys_squashed(value: Any) -> Any:
    if isinstance(value, dict):
        return {_squash(str(k)): _keys_squashed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys_squashed(v) for v in value]
    return value


def parse_answer(text: str, model: type[T]) -> T:
    """Strip <think>…</think>, take the outermost {…}, match keys case-insensitively, and
    validate; raises LLMError on anything else."""
    body = _THINK.sub("", text)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise LLMError("the answer holds no JSON object")
    try:
        data = json.loads(body[start : end + 1])
        return model.model_validate(_keys_squashed(data))
    except (ValueError, ValidationError) as exc:
        raise LLMError(f"the answer is not a valid {model.__name__}: {exc}") from exc


def ask_for(llm: LLM, system: str, prompt: str, model: type[T]) -> T:
    return parse_answer(llm.ask(system, prompt, model.model_json_schema(by_alias=False)), model)
