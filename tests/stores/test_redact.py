"""Private by default: secrets of the common shapes are redacted and `<private>` spans dropped,
while look-alikes that are not secrets (hashes, UUIDs, ids, ordinary settings) survive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import CONVERSATION, RECALL, JsonlLog, LongTermStore
from dreamwell.stores.redact import MARK, redact
from tests.support.calls import ok

# real-shaped (made up, never valid) secrets: none of these may survive
SECRETS = [
    "sk-proj-4fQ9xZ2LmN8pR7tY1uV3wA5bC6dE0gH2jK4lM6nP8qS",
    "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed-AbCdEfGhIjKl",
    "sk-1234567890abcdefABCDEF1234567890abcdefAB",
    "sk_live_51HfQ2kLmN8pR7tY1uV3wA5b",
    "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789",
    "glpat-xY7zA9bC1dE3fG5hJ7kL",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]
CONTEXTUAL = [  # (text, the secret part that must be gone, what must stay)
    ("curl -H 'Authorization: Bearer abc123def456ghi789jkl' x", "abc123def456ghi789jkl", "Bearer"),
    ("clone https://alice:hunter2pass@git.example.com/r.git", "hunter2pass", "git.example.com"),
    ("postgres://app:S3cr3t!x@db:5432/main", "S3cr3t!x", "db:5432/main"),
    ("OPENAI_API_KEY=abcd1234efgh5678", "abcd1234efgh5678", "OPENAI_API_KEY="),
    ("export GITHUB_TOKEN='tok-value-123'", "tok-value-123", "GITHUB_TOKEN="),
    ("DB_PASSWORD: correct horse", "correct", "DB_PASSWORD"),
    ('{"client_secret": "s3cr3t-value"}', "s3cr3t-value", "client_secret"),
    ("my password=opensesame now", "opensesame", "now"),
    # issue 45: shapes that leaked
    ("cache is redis://:s3cr3tRedisPw@cache:6379/0", "s3cr3tRedisPw", "@cache:6379/0"),
    ("postgres://app:p@ss@w0rd@db:5432/main", "ss@w0rd", "@db:5432/main"),
    ("mongodb+srv://ops:Zq9@x!@cluster0.example.net/db", "Zq9@x!", "cluster0.example.net"),
    (
        "aws credentials: aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI",
        "aws credentials: aws_secret_access_key = ",
    ),
    ("Secret: password: hunter2", "hunter2", "Secret: password: "),
    ("creds - DB_PASSWORD=Tr0ub4dor&3 ok", "Tr0ub4dor", "ok"),
    ("SECRET_KEY: 'django-insecure-abc123'", "django-insecure", "SECRET_KEY"),
]
PEM = (
    "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1b2c3d4\nZm9vYmFy\n"
    "-----END RSA PRIVATE KEY-----\nafter"
)
# look-alikes that must come through unchanged
SURVIVORS = [
    "commit 9fda2b5c1e0a4d3b8f7e6a5b4c3d2e1f0a9b8c7d fixed it",
    "short hash 9fda2b5 and 57d5e7f",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "memory id a1b2c3d4e5f6 was merged into 0f1e2d3c4b5a",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "MAX_TOKENS=2048 and token_count: 5",
    "the password policy says twelve characters",
    "ask for a token, then call the API",
    "https://example.com/path?q=1 and ssh://git@github.com/x/y",
    "sk-learn is a library; task-1234 is a ticket",
    "AKIA is how AWS keys start",
    "Bearer tokens go in the header",
    "eyJhbGciOiJIUzI1NiJ9 alone is just base64",
    "password=true",
    # issue 45: look-alikes of the new shapes
    "redis://cache:6379/0 and http://127.0.0.1:8080/health",
    "git@github.com:org/repo.git and mailto:alice@example.com",
    "scp build.tar alice@host:/srv/builds",
    "ssh://git@github.com:22/org/repo",
    "see https://example.com/@alice/post and http://[::1]:8080/",
    "the token: is a noun here",
    "a </private> closing tag alone stays",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_a_provider_token_is_redacted_wherever_it_stands(secret: str) -> None:
    out = redact(f"use {secret} for the call")
    assert secret not in out
    assert out == f"use {MARK} for the call"


@pytest.mark.parametrize(("text", "secret", "kept"), CONTEXTUAL)
def test_a_secret_in_context_is_redacted_and_its_context_kept(
    text: str, secret: str, kept: str
) -> None:
    out = redact(text)
    assert secret not in out
    assert kept in out
    assert MARK in out


@pytest.mark.parametrize("text", SURVIVORS)
def test_look_alikes_that_are_not_secrets_survive(text: str) -> None:
    assert redact(text) == text


def test_a_private_key_block_is_redacted_whole() -> None:
    out = redact(PEM)
    assert "MIIEpA" not in out and "Zm9vYmFy" not in out
    assert out == f"key:\n{MARK}\nafter"


def test_private_spans_are_dropped_even_unclosed_and_across_lines() -> None:
    text = "keep <private>my diagnosis\nis X</private> this <PRIVATE>and not this"
    assert redact(text) == "keep  this "


def test_private_spans_with_attributes_and_nesting_are_dropped_whole() -> None:
    assert redact('a <private reason="x">hid</private> b') == "a  b"
    assert redact("a <private>x <private>y</private> tail</private> b") == "a  b"
    assert redact("a <Private  note='n'>x <private>y</private> tail") == "a "


def test_empty_text_is_returned_as_is() -> None:
    assert redact("") == ""


@pytest.mark.anyio
async def test_the_recall_prompt_records_redacted_turns_and_what_it_showed(tmp_path: Path) -> None:
    saved = LongTermStore(tmp_path).save("Deploy the api with make deploy", category="ops")
    settings = Settings(data_dir=tmp_path, embedder="none", namespace="session/alice")
    message = "deploy the api, key AKIAIOSFODNN7EXAMPLE <private>my salary</private>"
    async with Client(build_server(settings)) as client:
        await client.get_prompt("recall", {"message": message})
        await ok(
            client, "search_memory", query="deploy api sk-1234567890abcdefABCDEF1234567890abcdefAB"
        )
    [turn] = JsonlLog(tmp_path, CONVERSATION).read()
    assert turn["content"] == f"deploy the api, key {MARK} "
    prompt, search = JsonlLog(tmp_path, RECALL).read()
    assert prompt["ids"] == [saved.entry.id] and prompt["via"] == "prompt"
    assert prompt["query"] == turn["content"] and search["query"] == f"deploy api {MARK}"
    assert "AKIA" not in (tmp_path / RECALL).read_text() + (tmp_path / CONVERSATION).read_text()


BACKTRACKING = ["a-", "a.", "key-", "token-", "a://", "a:b@"]


def test_text_built_to_backtrack_is_redacted_in_one_pass() -> None:
    """A hook prompt of 40 KB of `a-a-a-…` held redaction for 326 s (every `-` began a key or
    a URL scheme scanned to the end of the run). In a subprocess, since a regular expression
    holds the GIL: not a timing check, the bound is a hang guard hundreds of times what the
    passes take (tests/bench/redact_bench.py: ~0.2 s per 100 KB)."""
    script = (
        "from dreamwell.stores.redact import redact\n"
        f"for unit in {BACKTRACKING!r}:\n"
        "    text = unit * (100_000 // len(unit))\n"
        "    assert redact(text) == text, unit\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
