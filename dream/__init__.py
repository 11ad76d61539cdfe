"""The dream worker: refines long-term memory while the agent is idle."""

from dreamwell.dream.cycle import DreamBusy, DreamCancelled, DreamOptions, run_cycle, undo
from dreamwell.dream.llm import LLM, LLMError, OllamaLLM
from dreamwell.dream.report import Report, render
from dreamwell.dream.rules import DecayPolicy

__all__ = [
    "LLM",
    "DecayPolicy",
    "DreamBusy",
    "DreamCancelled",
    "DreamOptions",
    "LLMError",
    "OllamaLLM",
    "Report",
    "render",
    "run_cycle",
    "undo",
]
