"""The dream worker: refines long-term memory while the agent is idle."""

from dreamwell.dream.cycle import DreamBusy, DreamCancelled, DreamOptions, run_cycle, undo
from dreamwell.dream.llm import LLM, LLMError, OllamaLLM, OpenAILLM, make_llm
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
    "OpenAILLM",
    "Report",
    "make_llm",
    "render",
    "run_cycle",
    "undo",
]
