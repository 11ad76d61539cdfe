"""The dream worker: refines long-term memory while the agent is idle.

Importing the package is cheap: each name loads its module (and the LLM client, httpx) on
first use (PEP 562), so a server that is not dreaming never imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dreamwell.dream.claude_code import ClaudeCodeLLM
    from dreamwell.dream.cycle import run_cycle
    from dreamwell.dream.llm import LLM, LLMError, OllamaLLM, OpenAILLM, make_llm
    from dreamwell.dream.options import DreamBusy, DreamCancelled, DreamOptions
    from dreamwell.dream.report import Report, render
    from dreamwell.dream.rules import DecayPolicy
    from dreamwell.dream.undo import undo

# name -> the module that defines it, imported on first access
_LAZY = {
    **dict.fromkeys(["DreamBusy", "DreamCancelled", "DreamOptions"], "options"),
    "run_cycle": "cycle",
    "ClaudeCodeLLM": "claude_code",
    "undo": "undo",
    **dict.fromkeys(["LLM", "LLMError", "OllamaLLM", "OpenAILLM", "make_llm"], "llm"),
    **dict.fromkeys(["Report", "render"], "report"),
    "DecayPolicy": "rules",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "LLM",
    "ClaudeCodeLLM",
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
