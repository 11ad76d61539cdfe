"""The dream worker's LLM: Ollama's chat API or any OpenAI-compatible chat endpoint (LM Studio,
llama.cpp's server, vLLM, LocalAI, hosted APIs), both over httpx (answers: dream/answers.py).

The only dream module that speaks HTTP. Every failure is an LLMError whose text says what went
wrong in one sentence and never holds the API key. Calls stream the answer so that a caller
can cancel one: the socket is shut, which stops the server's generation too.

A call is one request: a 429 or 5xx is not retried here but raised with the server's
`retry-after` (None without one), and the cycle's guard (dream/budget.py) decides whether to
wait for it or to stop asking for the rest of the cycle — one breaker for every backend.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import suppress
from email.utils import parsedate_to_datetime
from typing import Any, Literal, Protocol

import httpx

logger = logging.getLogger(__name__)


class LLMError(Exception):
    """The LLM could not be reached or gave no usable answer."""


class LLMUnavailable(LLMError):
    """Transport or HTTP failure: refused, time-out, rejected key, missing model, 5xx.
    `retry_after`: the seconds the server asked the client to wait (429/503), else None."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMCancelled(LLMError):
    """The caller cancelled the call; the connection was closed."""


class BadAnswer(LLMError):
    """The model answered, but not with the JSON asked for (worth one retry)."""


class LLM(Protocol):
    @property
    def name(self) -> str: ...

    def check(self) -> None:
        """Raise LLMError unless the server answers and serves the configured model."""
        ...

    def ask(
        self,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> str:
        """The raw text answer; raises LLMError (LLMCancelled when `cancel` was set)."""
        ...


class _Redactor:
    def __init__(self, secret: str | None) -> None:
        self._secret = secret

    def __call__(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        return text


def retry_after(value: str | None) -> float | None:
    """The seconds a `Retry-After` header asks for (a number or an HTTP date), None when
    there is none or it cannot be read."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class _HTTPChat:
    """Shared by both providers: one streamed POST with a time-out and cancelling."""

    provider = "llm"

    def __init__(
        self,
        base_url: str,
        model: str,
        timeout: float,
        api_key: str | None = None,
        max_tokens: int = 2048,
        context: int = 8192,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._model, self._timeout, self._key = model, timeout, api_key
        self._max_tokens, self._context = max_tokens, context
        self._redact = _Redactor(api_key)
        self.max_output_tokens = max_tokens  # what one answer may spend (the cycle's budget)
        self.overhead_tokens = 50  # the request's own wrapping around system and prompt

    @property
    def name(self) -> str:
        host = re.sub(r"//[^/@]*@", "//", self._base)  # never show user:password@
        return f"{self.provider}:{self._model}@{host}"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"} if self._key else {}

    def _fail(
        self, what: str, exc: BaseException | None = None, wait: float | None = None
    ) -> LLMUnavailable:
        detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
        return LLMUnavailable(self._redact(f"{self.name} {what}{detail}"), wait)

    def _get(self, path: str) -> httpx.Response:
        try:
            with httpx.Client(timeout=min(self._timeout, 30.0), headers=self._headers()) as c:
                return c.get(self._base + path)
        except httpx.ConnectError as exc:
            raise self._fail("is unreachable (connection refused or no such host)", exc) from exc
        except httpx.TimeoutException as exc:
            raise self._fail("did not answer in time", exc) from exc
        except httpx.HTTPError as exc:
            raise self._fail("is unreachable", exc) from exc

    def _rejected(self, response: httpx.Response) -> LLMUnavailable:
        body = self._redact(response.text[:300].strip())
        if response.status_code in (401, 403):
            return self._fail(f"rejected the API key (HTTP {response.status_code}): {body}")
        if response.status_code == 404:
            return self._fail(f"has no model {self._model!r} or no such path (HTTP 404): {body}")
        wait = retry_after(response.headers.get("Retry-After"))
        if response.status_code == 429:
            return self._fail(f"is rate-limited (HTTP 429): {body}", wait=wait)
        return self._fail(f"answered HTTP {response.status_code}: {body}", wait=wait)

    def _post(
        self, path: str, body: dict[str, Any], cancel: threading.Event | None
    ) -> Iterator[Any]:
        """Stream the JSON chunks of one answer (one request, never retried here). Raises
        _Status for an HTTP error, so a caller can fall back to a simpler request."""
        if cancel is not None and cancel.is_set():
            raise LLMCancelled(f"{self.name}: cancelled")
        with _Call(self._timeout, self._headers(), cancel) as call:
            try:
                with call.client.stream("POST", self._base + path, json=body) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise _Status(response)
                    yield from _chunks(response, call, self._timeout)
            except httpx.ConnectError as exc:
                raise self._fail("is unreachable (connection refused)", exc) from exc
            except httpx.TimeoutException as exc:
                raise self._fail(f"gave no answer within {self._timeout:.0f} s", exc) from exc
            except (httpx.HTTPError, OSError) as exc:
                if call.cancelled:
                    raise LLMCancelled(f"{self.name}: cancelled") from exc
                raise self._fail("broke the connection", exc) from exc

    def _collect(
        self,
        path: str,
        body: dict[str, Any],
        cancel: threading.Event | None,
        text_of: Any,
    ) -> str:
        parts: list[str] = []
        for chunk in self._post(path, body, cancel):
            parts.append(text_of(chunk))
        return "".join(parts)


def _format_refused(response: httpx.Response) -> bool:
    """The server refused the request's response_format (400/422, or a 5xx naming it)."""
    if response.status_code < 400:
        return False
    return response.status_code in (400, 422) or "response_format" in response.text[:2000]


class _Status(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


class _Call:
    """One HTTP client per call. When `cancel` is set, a watcher shuts the socket down, which
    wakes a blocked read at once and tells the server the client left."""

    def __init__(
        self, timeout: float, headers: Mapping[str, str], cancel: threading.Event | None
    ) -> None:
        self._cancel = cancel
        self._sockets: list[socket.socket] = []
        self._done = threading.Event()
        self.cancelled = False
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            headers=dict(headers),
            event_hooks={"request": [self._hook]},
        )

    def _hook(self, request: httpx.Request) -> None:
        request.extensions["trace"] = self._trace

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                self._sockets.append(sock)
                if self._cancel is not None and self._cancel.is_set():  # cancelled meanwhile
                    self.cancelled = True
                    with suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

    def _watch(self) -> None:
        assert self._cancel is not None
        while not self._done.is_set():
            if self._cancel.wait(0.05):
                self.cancelled = True
                for sock in self._sockets:
                    with suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return

    def check(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            self.cancelled = True
            raise LLMCancelled("cancelled")

    def __enter__(self) -> _Call:
        if self._cancel is not None:
            threading.Thread(target=self._watch, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self.client.close()


def _chunks(response: httpx.Response, call: _Call, timeout: float) -> Iterator[Any]:
    """JSON objects of a streamed answer: NDJSON (Ollama), SSE `data:` lines (OpenAI), or one
    plain JSON body from a server that ignored `stream`."""
    deadline = time.monotonic() + timeout
    for line in response.iter_lines():
        call.check()
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the answer took longer than the time-out")
        line = line.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if not line or line == "[DONE]" or line.startswith(":"):
            continue
        try:
            yield json.loads(line, strict=False)
        except ValueError:
            continue  # an event name, a comment or a keep-alive
    call.check()


class OllamaLLM(_HTTPChat):
    """Ollama's /api/chat with `format` (JSON schema), num_ctx and num_predict."""

    provider = "ollama"

    def check(self) -> None:
        response = self._get("/api/tags")
        if response.status_code >= 400:
            raise self._rejected(response)
        names = {
            str(m.get(k, ""))
            for m in response.json().get("models", [])
            if isinstance(m, dict)
            for k in ("name", "model")
        }
        wanted = {self._model, f"{self._model}:latest"}
        if not names & wanted:
            shown = ", ".join(sorted(names)[:10]) or "none"
            raise self._fail(
                f"has no model {self._model!r} (run `ollama pull {self._model}`; "
                f"installed: {shown})"
            )

    def ask(
        self,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> str:
        body = {
            "model": self._model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": prompt},
            ],
            "format": schema,
            "stream": True,
            "options": {
                "temperature": 0,
                "num_ctx": self._context,
                "num_predict": self._max_tokens,
            },
        }
        try:
            return self._collect("/api/chat", body, cancel, _ollama_text)
        except _Status as status:
            raise self._rejected(status.response) from None


def _ollama_text(chunk: Any) -> str:
    if isinstance(chunk, dict) and chunk.get("error"):
        raise LLMUnavailable(f"the model failed: {str(chunk['error'])[:200]}")
    message = chunk.get("message") if isinstance(chunk, dict) else None
    return str(message.get("content") or "") if isinstance(message, dict) else ""


def _openai_text(chunk: Any) -> str:
    if not isinstance(chunk, dict):
        return ""
    if chunk.get("error"):
        raise LLMUnavailable(f"the model failed: {str(chunk['error'])[:200]}")
    out = []
    for choice in chunk.get("choices") or []:
        part = choice.get("delta") or choice.get("message") or {}
        out.append(str(part.get("content") or ""))
    return "".join(out)


Mode = Literal["json_schema", "llama_schema", "json_object", "plain"]
MODES: tuple[Mode, ...] = ("json_schema", "llama_schema", "json_object", "plain")


class OpenAILLM(_HTTPChat):
    """POST {base_url}/chat/completions. Structured output as `json_schema` where supported;
    on HTTP 400/422 falls back to llama.cpp's `json_object`+schema, then `json_object`, then
    plain text (the mode that worked is remembered)."""

    provider = "openai"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mode = 0

    def check(self) -> None:
        response = self._get("/models")
        if response.status_code == 404:
            return  # the server lists no models; the first call will tell
        if response.status_code >= 400:
            raise self._rejected(response)
        data = response.json()
        items = data.get("data", []) if isinstance(data, dict) else []
        names = {str(m.get("id", "")) for m in items if isinstance(m, dict)}
        if names and self._model not in names:
            shown = ", ".join(sorted(names)[:10])
            raise self._fail(f"does not serve model {self._model!r} (it serves: {shown})")

    def _format(self, mode: Mode, schema: dict[str, Any]) -> dict[str, Any] | None:
        if mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            }
        if mode == "llama_schema":
            return {"type": "json_object", "schema": schema}
        if mode == "json_object":
            return {"type": "json_object"}
        return None

    def ask(
        self,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> str:
        while True:
            mode = MODES[self._mode]
            body: dict[str, Any] = {
                "model": self._model,
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": prompt},
                ],
                "temperature": 0,
                "max_tokens": self._max_tokens,
                "stream": True,
            }
            fmt = self._format(mode, schema)
            if fmt is not None:
                body["response_format"] = fmt
            try:
                return self._collect("/chat/completions", body, cancel, _openai_text)
            except _Status as status:
                if _format_refused(status.response) and self._mode < len(MODES) - 1:
                    logger.info(
                        "%s refused response_format %s; trying a simpler one", self.name, mode
                    )
                    self._mode += 1
                    continue
                raise self._rejected(status.response) from None


def make_llm(
    provider: str,
    base_url: str,
    model: str,
    timeout: float,
    api_key: str | None = None,
    max_tokens: int = 2048,
    context: int = 8192,
) -> OllamaLLM | OpenAILLM:
    """The LLM for settings `llm_provider` (ollama | openai)."""
    cls: type[OllamaLLM] | type[OpenAILLM] = OpenAILLM if provider == "openai" else OllamaLLM
    return cls(base_url, model, timeout, api_key, max_tokens=max_tokens, context=context)
