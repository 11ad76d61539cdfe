"""What is never written: `<private>…</private>` spans and secrets of the common shapes.

Everything a client hook receives, and every user message the `recall` prompt records, passes
through `redact` before it reaches a log or a memory, so neither the data directory nor the
dream's LLM sees it. Only shapes that are secrets by construction are matched (a provider's
key prefix, a PEM block, a JWT's three parts, a password inside a URL, an assignment to a
variable named like a secret), so git hashes, UUIDs and memory ids are left alone.
Standard library only: the hook's read path imports this.
"""

from __future__ import annotations

import re

MARK = "[REDACTED]"

# an opening tag (attributes allowed) or a closing one; spans nest
_PRIVATE_TAG = re.compile(r"<(/?)private(?:\s[^<>]*)?\s*>", re.I)
_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)", re.S
)
# provider tokens: the whole match is the secret
_TOKENS = re.compile(
    "|".join(
        [
            # OpenAI, Anthropic
            r"\bsk-(?:proj-|ant-(?:api\d\d-)?|live-|svcacct-)?[A-Za-z0-9_-]{20,}",
            r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{30,}",
            r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
            r"\bxox[abeprs]-[A-Za-z0-9-]{10,}",  # Slack
            r"\bAIza[0-9A-Za-z_-]{35}",  # Google API key
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bnpm_[A-Za-z0-9]{36}",  # npm
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
        ]
    )
)
_BEARER = re.compile(r"\b(Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=-]{12,}", re.I)
# scheme://[user]:password@host — the user may be empty (redis://:pw@host) and the password
# may hold '@' (the last '@' before the host ends it)
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s/]+(@[^\s@/]+)", re.I)
_KEY = (
    r"[A-Za-z0-9_.-]*?(?:secret|token|passw(?:or)?d|pwd|api[_-]?key|apikey|private[_-]?key"
    r"|access[_-]?key|auth[_-]?key|credentials?|client[_-]?secret|session[_-]?key)(?:[_-]?key)?"
)
# the value is a whole token not itself followed by '=' or ':' (then it is the key of the
# real assignment after a label: "aws credentials: aws_secret_access_key = …")
_ASSIGNMENT = re.compile(
    rf"""(?<![A-Za-z0-9_])({_KEY}["']?\s*(?:=|:)\s*)"""
    r"""("[^"\n]+"|'[^'\n]+'|[^\s"',;]+(?![^\s"',;])(?!(?<=[:=])\s+\S))(?!["']?\s*[=:])""",
    re.I,
)


def _assignment(match: re.Match[str]) -> str:
    value = match.group(2).strip("\"'")
    if value == MARK or len(value) < 3 or value.lower() in ("true", "false", "none", "null"):
        return match.group(0)
    return match.group(1) + MARK


def _drop_private(text: str) -> str:
    """`text` without its `<private>` spans, nested ones whole, an unclosed one to the end;
    a closing tag with no opening one is kept as text."""
    kept: list[str] = []
    depth = at = 0
    for tag in _PRIVATE_TAG.finditer(text):
        if depth == 0:
            kept.append(text[at : tag.start()])
            at = tag.start()
        if tag.group(1):
            if depth == 0:
                continue  # a stray closing tag: text
            depth -= 1
        else:
            depth += 1
        if depth == 0:
            at = tag.end()
    if depth == 0:
        kept.append(text[at:])
    return "".join(kept)


def redact(text: str) -> str:
    """`text` without its `<private>` spans and with every recognised secret replaced by
    `[REDACTED]`; the rest is kept as it was."""
    if not text:
        return text
    text = _drop_private(text)
    text = _PEM.sub(MARK, text)
    text = _TOKENS.sub(MARK, text)
    text = _BEARER.sub(lambda m: m.group(1) + m.group(2) + MARK, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MARK + m.group(2), text)
    return _ASSIGNMENT.sub(_assignment, text)


_PRIVATE_OPENING = re.compile(r"<private\b", re.I)


def redact_counted(text: str) -> tuple[str, int]:
    """`redact(text)` and how many spans it took out: `<private>` spans dropped plus secrets
    replaced (a secret inside a private span goes with the span, counted once)."""
    out = redact(text)
    private = len(_PRIVATE_OPENING.findall(text)) - len(_PRIVATE_OPENING.findall(out))
    secrets = out.count(MARK) - text.count(MARK)
    return out, max(0, private) + max(0, secrets)
