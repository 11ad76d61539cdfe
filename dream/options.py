"""How a dream cycle is asked to run (`DreamOptions`), how it is stopped (its `cancel` event,
checked between steps and before each batch of writes: `check_cancel`, which also confirms
the cycle still holds its lease), and the ways it does not run (`DreamBusy`,
`DreamCancelled`, `DreamFenced`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from dreamwell.dream.rules import DecayPolicy


class DreamBusy(Exception):
    """Another cycle holds this data directory, or tool traffic never paused."""


class DreamCancelled(Exception):
    """The cycle was asked to stop (the server is shutting down)."""


class DreamFenced(DreamCancelled):
    """The cycle lost its lease to another replica: it stopped before its next write."""


@dataclass(frozen=True)
class DreamOptions:
    decay: DecayPolicy = field(default_factory=DecayPolicy)
    quiet_seconds: float = 30.0  # wait while tool calls arrived this recently
    max_wait_seconds: float = 3600.0
    batch: int = 200
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)
    progress: Callable[[str], None] | None = field(default=None, compare=False)  # pass names
    skills_auto_approve: bool = False  # new skills from the dream are active, not candidates
    # raises LeaseLost when another replica took the cycle's lease over (set by the cycle)
    confirm: Callable[[], None] | None = field(default=None, compare=False)
    budget_tokens: int = 200_000  # the cycle's LLM spend, input + output (dream_budget_tokens)


def check_cancel(options: DreamOptions) -> None:
    if options.cancel.is_set():
        raise DreamCancelled("the dream cycle was cancelled")
    if options.confirm is not None:
        from dreamwell.stores import LeaseLost

        try:
            options.confirm()
        except LeaseLost as exc:
            raise DreamFenced(f"the dream cycle stopped before its next write: {exc}") from exc
