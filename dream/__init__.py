"""The dream worker: refines long-term memory while the agent is idle.

Importing the package is cheap: each name loads its module (and the LLM client, httpx) on
first use (PEP 562), so a server that is not dreaming never imports them."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dreamwell.dream.cycle import DreamBusy, DreamCancelled, DreamOptions, run_cycle, undo
    from dreamwell.dream.llm import LLM, LLMError, OllamaLLM, OpenAILLM, make_llm
    from dreamwell.dream.report import Report, render
    from dreamwell.dream.rules import DecayPolicy

# name -> the module that defines it, imported on first access
_LAZY = {
    **dict.fromkeys(["DreamBusy", "DreamCancelled", "DreamOptions", "run_cycle", "undo"], "cycle"),
    **dict.fromkeys(["LLM", "LLMError", "OllamaLLM", "OpenAILLM", "make_llm"], "llm"),
    **dict.fromkeys(["Report", "render"], "report"),
    "DecayPolicy": "rules",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    qualified = f"{__name__}.{module}"
    __import__(qualified)  # what an import statement calls, so `-X importtime` reports it
    value = getattr(sys.modules[qualified], name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "LLM",
    "DecayPolicy",
    "DreamBusy",
    "DreamCancelled",
    "DreamOptions",
    "LLMError",
    "OllamaLLM",
    "OpenAILLM",
    "Report",
    "make_llm",
    "render",
    "run_cycle",
    "undo",
]
