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
from collections.abc import Iterable, Mapping
from typing import Any

from dreamwell.stores.errors import InvalidInput

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
            r"\bxapp-\d-[A-Za-z0-9-]{10,}",  # Slack app-level token
            r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",  # SendGrid
            r"\bpypi-[A-Za-z0-9_-]{40,}",  # PyPI
            r"\bwhsec_[A-Za-z0-9+/=]{20,}",  # Stripe webhook signing secret
            r"(?<![\w:/.-])\d{8,10}:[A-Za-z0-9_-]{35}(?![\w-])",  # Telegram bot
            r"\bAIza[0-9A-Za-z_-]{35}",  # Google API key
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bnpm_[A-Za-z0-9]{36}",  # npm
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
        ]
    )
)
# a Slack incoming webhook: the URL is the credential (the path after /services/)
_SLACK_HOOK = re.compile(
    r"(\bhttps?://hooks\.slack(?:-gov)?\.com/)(?:services|workflows|triggers)/[\w/-]+"
)
# PuTTY's private key file: everything from its header to its MAC (or to the end)
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d+:.*?(?:Private-(?:MAC|Hash):\s*[0-9A-Fa-f]+|\Z)", re.S)
# `curl -u user:password` / `--user user:password` (the user stays)
_CURL_USER = re.compile(r"""((?:^|\s)(?:-u|--user)(?:\s+|=)["']?[^\s:"']+:)[^\s"']+""")
# docker's config.json: "auth" is base64 of user:password, "identitytoken" a token
_DOCKER_AUTH = re.compile(r"""("(?:auth|identitytoken)"\s*:\s*")[A-Za-z0-9+/=._-]{8,}(")""", re.I)
_BEARER = re.compile(r"\b(Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=-]{12,}", re.I)
# scheme://[user]:password@host — the user may be empty (redis://:pw@host) and the password
# may hold '@' (the last '@' before the host ends it). A scheme (and below, a key) starts only
# where a run of its characters starts: starting inside `a-a-a-…` at every `-` scanned the
# rest of the run each time (40 KB took minutes)
_URL_PASSWORD = re.compile(
    r"(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s/]+(@[^\s@/]+)", re.I
)
_KEY = (
    r"[A-Za-z0-9_.-]*?(?:secret|token|passw(?:or)?d|pwd|api[_-]?key|apikey|private[_-]?key"
    r"|access[_-]?key|auth[_-]?key|credentials?|client[_-]?secret|session[_-]?key"
    r"|account[_-]?key|shared[_-]?access[_-]?key|passphrase"
    # PASS alone only as a segment (DB_PASS, smtp.pass) or as an assignment (PASS=…):
    # "compass", "bypass" and "tests pass: 3" are not secrets
    r"|(?<=[_.-])pass(?![A-Za-z])|(?<![A-Za-z0-9])pass(?=[\"']?\s*=))(?:[_-]?key)?"
)
# the value is a whole token not itself followed by '=' or ':' (then it is the key of the
# real assignment after a label: "aws credentials: aws_secret_access_key = …")
_ASSIGNMENT = re.compile(
    rf"""(?<![A-Za-z0-9_.-])({_KEY}["']?\s*(?:=|:)\s*)"""
    r"""("[^"\n]+"|'[^'\n]+'|[^\s"',;]+(?![^\s"',;])(?!["'])(?!(?<=[:=])\s+\S))"""
    r"""(?!["']?\s*[=:])""",
    re.I,
)


def _assignment(match: re.Match[str]) -> str:
    value = match.group(2).strip("\"'")
    if MARK in value or len(value) < 3 or value.lower() in ("true", "false", "none", "null"):
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
    text = _PUTTY.sub(MARK, text)
    text = _TOKENS.sub(MARK, text)
    text = _SLACK_HOOK.sub(lambda m: m.group(1) + MARK, text)
    text = _DOCKER_AUTH.sub(lambda m: m.group(1) + MARK + m.group(2), text)
    text = _CURL_USER.sub(lambda m: m.group(1) + MARK, text)
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


def redact_content(text: str, what: str = "content") -> tuple[str, int]:
    """`redact_counted(text)`, refusing text that was nothing but `<private>` spans and
    secrets (a memory reading "[REDACTED]" tells no one anything)."""
    kept, spans = redact_counted(text)
    if spans and not any(ch.isalnum() for ch in kept.replace(MARK, "")):
        raise InvalidInput(
            f"{what} is empty once its <private> spans and secrets are taken out; "
            "nothing was saved."
        )
    return kept, spans


def redact_category(category: str | None) -> tuple[str | None, int]:
    """A category path with each secret in it replaced by the segment `redacted` (a category
    allows no brackets), and how many there were."""
    if not category:
        return category, 0
    out, spans = redact_counted(category)
    if not spans:
        return category, 0
    segments = out.replace(MARK, "redacted").split("/")
    return "/".join(s for s in segments if s) or None, spans


def redact_tags(tags: str | Iterable[str] | None) -> tuple[list[str] | None, int]:
    """Tags (a comma-separated string or a list) each redacted; a tag that was nothing but a
    secret is left out. Anything that is not text is passed on for the store to refuse."""
    if tags is None:
        return None, 0
    out: list[Any] = []
    count = 0
    for tag in tags.split(",") if isinstance(tags, str) else tags:
        if not isinstance(tag, str):
            out.append(tag)
            continue
        kept, spans = redact_counted(tag)
        count += spans
        if not spans or kept.replace(MARK, "").strip():
            out.append(kept)
    return out, count


def redact_memory(
    content: str, category: str | None, tags: str | Iterable[str] | None, what: str = "content"
) -> tuple[str, str | None, list[str] | None, int]:
    """Every field of a memory or a working-memory entry redacted: (content, category, tags,
    how many spans were taken out in all). Refuses content that was nothing but secrets."""
    kept, in_content = redact_content(content, what)
    category, in_category = redact_category(category)
    tag_list, in_tags = redact_tags(tags)
    return kept, category, tag_list, in_content + in_category + in_tags


def refuse_secret(text: str, what: str) -> str:
    """A name (a working-memory key) must not be a secret: it cannot be redacted without
    losing the entry it names."""
    if redact(text) != text:
        raise InvalidInput(
            f"{what} holds a secret or a <private> span; nothing was saved. Name the entry "
            "plainly and keep the secret out of memory."
        )
    return text


def redact_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A log record with every text value in it (nested too) redacted; keys are kept."""
    return {key: _redact_value(value) for key, value in record.items()}


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return redact_record(value)
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return value
