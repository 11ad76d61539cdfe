"""Tool and prompt arguments checked before any handler runs, refused in plain sentences.

The SDK validates tool arguments leniently (`true` becomes 1, `"5"` becomes 5, unknown names are
dropped) and words its refusals in validator internals (`tags.constrained-str: ...`); an unknown
prompt or a missing prompt argument reaches a 2026-07-28 client as `Internal server error`.
Here arguments are validated strictly, unknown names are refused by name, and each problem is
one sentence about one argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from dreamwell.server.mcp import sdk

TAGS = "'tags' must be text like 'a, b' or a list of up to 32 strings of at most 64 characters"
_WHOLE = "'{f}' must be a whole number such as 5, not text, a fraction or true/false"


def arg_model(mcp: MCPServer[Any], name: str) -> type[BaseModel] | None:
    """The pydantic model the SDK validates a tool's arguments with (None if unknown)."""
    tool = sdk.tool(mcp, name)
    model = getattr(getattr(tool, "fn_metadata", None), "arg_model", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _sentence(field: str, error: ErrorDetails) -> str:
    kind, ctx = error["type"], error.get("ctx", {})
    if field == "tags":
        return TAGS
    if kind == "missing":
        return f"'{field}' is required"
    if kind == "string_too_short":
        return f"'{field}' must not be empty"
    if kind == "string_too_long":
        return f"'{field}' is longer than {ctx.get('max_length')} characters"
    if kind == "greater_than_equal":
        return f"'{field}' must be at least {ctx.get('ge')}"
    if kind == "less_than_equal":
        return f"'{field}' must be at most {ctx.get('le')}"
    if kind.startswith("int"):
        return _WHOLE.format(f=field)
    if kind.startswith("str") or kind.startswith("string"):
        return f"'{field}' must be text"
    return f"'{field}' is not valid"


def tool_refusal(mcp: MCPServer[Any], tool: str, args: Any) -> str | None:
    """Why these arguments are refused (None: they are fine, or the tool is unknown)."""
    model = arg_model(mcp, tool)
    if model is None:
        return None
    if not isinstance(args, Mapping):
        problems = ["arguments must be a JSON object"]
    else:
        known = _names(model)
        unknown = sorted(str(k) for k in args if k not in known)
        problems = []
        if unknown:
            problems.append(
                f"unknown argument{'s' if len(unknown) > 1 else ''} "
                + ", ".join(f"'{u}'" for u in unknown)
                + f" ({tool} takes {', '.join(known) or 'no arguments'})"
            )
        try:
            model.model_validate(dict(args), strict=True)
        except ValidationError as err:
            seen: set[str] = set()
            for item in err.errors(include_url=False, include_input=False):
                field = str(item["loc"][0]) if item["loc"] else "arguments"
                if field not in seen and field not in unknown:
                    seen.add(field)
                    problems.append(_sentence(field, item))
    if not problems:
        return None
    return f"Invalid arguments for {tool}: " + "; ".join(problems) + ". Nothing was changed."


def check_prompt(mcp: MCPServer[Any], params: Mapping[str, Any]) -> None:
    """Raise MCPError (invalid params) for an unknown prompt or bad argument names, in both
    protocol eras alike."""
    name = str(params.get("name", ""))
    prompt = sdk.prompt(mcp, name)
    if prompt is None:
        known = ", ".join(sorted(p.name for p in sdk.prompts(mcp)))
        raise MCPError(INVALID_PARAMS, f"Unknown prompt '{name}'. Prompts: {known}.")
    args = params.get("arguments") or {}
    if not isinstance(args, Mapping):
        raise MCPError(INVALID_PARAMS, f"Arguments of prompt '{name}' must be a JSON object.")
    declared = prompt.arguments or []
    names = [a.name for a in declared]
    unknown = sorted(str(k) for k in args if k not in names)
    if unknown:
        raise MCPError(
            INVALID_PARAMS,
            f"Prompt '{name}' has no argument {', '.join(repr(u) for u in unknown)}; "
            f"its arguments are: {', '.join(names) or 'none'}.",
        )
    missing = [a.name for a in declared if a.required and a.name not in args]
    if missing:
        raise MCPError(
            INVALID_PARAMS,
            f"Prompt '{name}' needs the argument {', '.join(repr(m) for m in missing)}.",
        )
    not_text = [str(k) for k, v in args.items() if not isinstance(v, str)]
    if not_text:
        raise MCPError(
            INVALID_PARAMS,
            f"Prompt arguments are text; {', '.join(repr(k) for k in not_text)} is not.",
        )
