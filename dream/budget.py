"""A dream cycle's LLM spend (SPEC §10): every call counted, and a cap on tokens, input plus
output (`dream_budget_tokens`). `Metered` wraps the cycle's LLM; a question that would not
fit what is left is refused before it is sent (an LLMError, so the pass treats it as any
failed call), and `verdict` tells the cycle whether a pass was skipped or cut short by it.

Tokens are what the backend reports (`last_tokens`: Claude Code's `usage`), else an
estimate: characters sent and received divided by four."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from dreamwell.dream.llm import LLM, LLMError
from dreamwell.dream.report import BUDGET, PassResult

CHARS_PER_TOKEN = 4


class BudgetSpent(LLMError):
    """The cycle's token budget has no room for this question."""


@dataclass(frozen=True)
class Mark:
    """The counters when a pass began."""

    calls: int
    refused: int


class Metered:
    """The cycle's LLM, counted and capped; the same `LLM` protocol."""

    def __init__(self, llm: LLM, budget: int) -> None:
        self.llm, self.budget = llm, budget
        self.calls = self.tokens = self.refused = 0

    @property
    def name(self) -> str:
        return self.llm.name

    def check(self) -> None:
        self.llm.check()

    @property
    def spent(self) -> bool:
        return self.tokens >= self.budget

    def reason(self) -> str:
        return f"{BUDGET} spent: {self.tokens:,} of {self.budget:,} tokens"

    def ask(
        self,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> str:
        need = (len(system) + len(prompt)) // CHARS_PER_TOKEN
        if self.tokens + need > self.budget:
            self.refused += 1
            raise BudgetSpent(
                f"{BUDGET}: this question needs ~{need:,} tokens, "
                f"{max(0, self.budget - self.tokens):,} of {self.budget:,} are left"
            )
        self.calls += 1
        answer = ""
        try:
            answer = self.llm.ask(system, prompt, schema, cancel)
            return answer
        finally:
            told = getattr(self.llm, "last_tokens", 0)
            sent = len(system) + len(prompt) + len(answer)
            self.tokens += told if isinstance(told, int) and told > 0 else sent // CHARS_PER_TOKEN

    def mark(self) -> Mark:
        return Mark(self.calls, self.refused)


def verdict(llm: object, began: Mark | None, result: PassResult) -> None:
    """After a pass: one the budget refused before it asked anything is skipped, one it cut
    short is partial; both say so (and leave their inputs for a later cycle)."""
    if not isinstance(llm, Metered) or began is None or llm.refused == began.refused:
        return
    if llm.calls == began.calls and not result.changes:
        result.status, result.reason = "skipped", llm.reason()
    else:
        result.status, result.reason = "partial", f"cut short: {llm.reason()}"


def refused_since(llm: object, began: Mark | None) -> bool:
    return isinstance(llm, Metered) and began is not None and llm.refused > began.refused


def mark(llm: object) -> Mark | None:
    return llm.mark() if isinstance(llm, Metered) else None


def spent(llm: object) -> str:
    """Why an LLM pass is skipped before it starts ('' when there is budget left)."""
    return llm.reason() if isinstance(llm, Metered) and llm.spent else ""
