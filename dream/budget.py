"""A dream cycle's LLM spend and its circuit breaker (docs/dreaming.md): every call counted, a cap
on tokens, input plus output (`dream_budget_tokens`), and a stop at the first failure.

`Metered` wraps the cycle's LLM (any backend: Ollama, OpenAI-compatible, Claude Code, the
client's model). Before a question is sent, its cost is estimated from above — everything
sent (system, prompt and schema: UTF-8 bytes / 3, more than any tokenizer counts for text),
the backend's own wrapping (`overhead_tokens`) and the longest answer it may give
(`max_output_tokens`) — and a question that could cross the budget is refused (an LLMError,
so the pass treats it as any failed call). So what is spent never exceeds the budget.

A call that fails is booked as failed: the tokens the backend reports it spent (Claude Code
reports its usage even for a failure), else none. The first failure — a rejected key, a
rate limit, an overloaded or broken server, a time-out, an answer outside the schema — ends
the cycle's questions (`stopped` names the cause): each later question is refused without
being sent. A server that said how long to wait (`retry-after`) is waited for and asked
again, while the cycle's waits stay within `WAIT_BUDGET`. `verdict` tells the cycle whether a
pass was skipped or cut short by the budget or the stop."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from dreamwell.dream.llm import LLM, LLMCancelled, LLMError, LLMUnavailable
from dreamwell.dream.report import BUDGET, STOPPED, PassResult

BYTES_PER_TOKEN = 3  # an estimate from above: English text is ~4 characters a token
OVERHEAD_TOKENS = 50  # a backend that does not say what it adds around the question
MAX_OUTPUT_TOKENS = 2048  # ... nor how long an answer may be
WAIT_BUDGET = 120.0  # seconds a cycle may wait for servers that asked it to (retry-after)


class BudgetSpent(LLMError):
    """The cycle's token budget has no room for this question."""


class Stopped(LLMError):
    """An earlier call of this cycle failed: no more questions until the next cycle."""


@dataclass(frozen=True)
class Mark:
    """The counters when a pass began."""

    calls: int
    refused: int
    failed: int = 0


def _size(text: str) -> int:
    return -(-len(text.encode("utf-8", "replace")) // BYTES_PER_TOKEN)


class Metered:
    """The cycle's LLM, counted, capped and stopped at its first failure; the same `LLM`
    protocol."""

    def __init__(self, llm: LLM, budget: int, wait_budget: float = WAIT_BUDGET) -> None:
        self.llm, self.budget = llm, budget
        self.calls = self.tokens = self.refused = self.failed = 0
        self.stopped = ""  # the failure that ended the cycle's questions
        self.wait_left = wait_budget

    @property
    def name(self) -> str:
        return self.llm.name

    def check(self) -> None:
        self.llm.check()

    @property
    def spent(self) -> bool:
        return self.tokens >= self.budget

    def reason(self) -> str:
        if self.stopped:
            return f"{STOPPED} after a failure earlier in this cycle"
        return f"{BUDGET} spent: {self.tokens:,} of {self.budget:,} tokens"

    def need(self, system: str, prompt: str, schema: dict[str, Any]) -> int:
        """The most this question can cost: what is sent, the backend's wrapping, the
        longest answer."""
        sent = _size(system) + _size(prompt) + _size(json.dumps(schema, ensure_ascii=False))
        overhead = getattr(self.llm, "overhead_tokens", OVERHEAD_TOKENS)
        output = getattr(self.llm, "max_output_tokens", MAX_OUTPUT_TOKENS)
        return int(sent + overhead + output)

    def _admit(self, need: int) -> None:
        if self.stopped:
            self.refused += 1
            raise Stopped(self.reason())
        if self.tokens + need > self.budget:
            self.refused += 1
            raise BudgetSpent(
                f"{BUDGET}: this question may need ~{need:,} tokens, "
                f"{max(0, self.budget - self.tokens):,} of {self.budget:,} are left"
            )

    def ask(
        self,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> str:
        need = self.need(system, prompt, schema)
        while True:
            self._admit(need)
            try:
                return self._one(system, prompt, schema, cancel, need)
            except LLMCancelled:
                raise
            except LLMError as exc:
                self._after_failure(exc, cancel)

    def _one(
        self,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        cancel: threading.Event | None,
        need: int,
    ) -> str:
        self.calls += 1
        failed = True
        answer = ""
        try:
            answer = self.llm.ask(system, prompt, schema, cancel)
            failed = False
            return answer
        except LLMCancelled:  # stopped by the cycle, not a failure of the LLM
            failed = False
            raise
        finally:
            told = getattr(self.llm, "last_tokens", 0)
            if isinstance(told, int) and told > 0:
                self.tokens += told
            elif not failed:  # an estimate of what was sent and received, within `need`
                self.tokens += min(need, _size(system) + _size(prompt) + _size(answer))
            self.failed += failed

    def _after_failure(self, exc: LLMError, cancel: threading.Event | None) -> None:
        """Wait for a server that said when to come back (within the cycle's wait budget),
        else stop the cycle's questions and raise."""
        wait = exc.retry_after if isinstance(exc, LLMUnavailable) else None
        if wait is not None and wait <= self.wait_left:
            self.wait_left -= wait
            if (cancel or threading.Event()).wait(wait):
                raise LLMCancelled(f"{self.name}: cancelled") from exc
            return
        text = str(exc).strip()
        self.stopped = text.splitlines()[0][:300] if text else type(exc).__name__
        raise exc

    def mark(self) -> Mark:
        return Mark(self.calls, self.refused, self.failed)


def verdict(llm: object, began: Mark | None, result: PassResult) -> None:
    """After a pass: one the budget (or the stop) refused before it asked anything is
    skipped, one it cut short is partial, one whose call stopped the cycle's questions failed;
    each says so (and leaves its inputs for a later cycle)."""
    if not isinstance(llm, Metered) or began is None:
        return
    if llm.stopped and llm.failed > began.failed and result.status == "ran":
        # the failure that stopped the cycle's questions happened in this pass
        result.status = "partial" if result.changes else "failed"
        result.reason = llm.stopped
    if llm.refused == began.refused:
        return
    if llm.calls == began.calls and not result.changes:
        result.status, result.reason = "skipped", llm.reason()
    elif result.status != "failed":
        result.status, result.reason = "partial", f"cut short: {llm.reason()}"


def refused_since(llm: object, began: Mark | None) -> bool:
    return isinstance(llm, Metered) and began is not None and llm.refused > began.refused


def mark(llm: object) -> Mark | None:
    return llm.mark() if isinstance(llm, Metered) else None


def spent(llm: object) -> str:
    """Why an LLM pass is skipped before it starts ('' when it may ask): the budget is
    spent, or an earlier failure stopped the cycle's questions."""
    if isinstance(llm, Metered) and (llm.spent or llm.stopped):
        return llm.reason()
    return ""


def stopped(llm: object) -> str:
    """The failure that stopped the cycle's questions ('' when none did)."""
    return llm.stopped if isinstance(llm, Metered) else ""
