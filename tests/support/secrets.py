"""A corpus of secrets of every shape stores/redact.py recognises (made up, never valid):
each as it stands in text a user might hand us, and the part that must never be stored."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Shape:
    name: str
    text: str  # the secret in its usual surroundings
    secret: str  # what must never reach a file
    tag: str | None = ""  # the shape as a tag ('' the text; None: it cannot be one)
    whole: bool = False  # the text is nothing but a secret (a memory of it alone is refused)

    def __str__(self) -> str:
        return self.name

    @property
    def as_tag(self) -> str | None:
        return self.text if self.tag == "" else self.tag


SHAPES = [
    # the twelve common shapes outside QA found unrecognised (qa-turn5 LOW 10)
    Shape("db-pass", "DB_PASS=Hunter2Horse9", "Hunter2Horse9"),
    Shape("pass", "PASS=Tr0ub4dorBattery", "Tr0ub4dorBattery"),
    Shape(
        "slack-webhook",
        "post to https://hooks.slack.com/services/T0123ABCD/B0456EFGH/aBcDeFgHiJkLmNoPqRsTuVwX",
        "aBcDeFgHiJkLmNoPqRsTuVwX",
    ),
    Shape(
        "slack-xapp",
        "xapp-1-A0123ABCD45-1234567890123-0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "xapp-1-A0123ABCD45-1234567890123-0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        whole=True,
    ),
    Shape(
        "sendgrid",
        "SG.aBcDeFgHiJkLmNoPqRsTuV.aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFg",
        "SG.aBcDeFgHiJkLmNoPqRsTuV.aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFg",
        whole=True,
    ),
    Shape(
        "pypi",
        "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZjEyLTM0NTYtNzg5MC1hYmNkLWVmMTIzNDU2Nzg5MAACKlsz",
        "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZjEyLTM0NTYtNzg5MC1hYmNkLWVmMTIzNDU2Nzg5MAACKlsz",
        whole=True,
    ),
    Shape(
        "stripe-whsec",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        whole=True,
    ),
    Shape(
        "azure-account-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;"
        "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBH==;"
        "EndpointSuffix=core.windows.net",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq",
        "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZ==",
    ),
    Shape("curl-user", "curl -u alice:S3cretCurlPw https://api.example.com", "S3cretCurlPw"),
    Shape(
        "telegram-bot",
        "bot token 1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
        "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
    ),
    Shape(
        "docker-auth",
        '{"auths": {"r.io": {"auth": "YWxpY2U6czNjcmV0cHcx"}}}',
        "YWxpY2U6czNjcmV0cHcx",
    ),
    Shape(
        "putty-key",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 2\n"
        "AAAAC3NzaC1lZDI1NTE5\nAAAAIHnEm\nPrivate-Lines: 1\nAAAAIQCvPuTTYprivateBlob42\n"
        "Private-MAC: 8a9b0c1d2e3f4a5b",
        "AAAAIQCvPuTTYprivateBlob42",
        None,  # lines: no tag holds them
        whole=True,
    ),
    # a label named like a secret before the quoted assignment (qa-turn5 LOW 10)
    Shape("quoted-password", 'password: PASSWORD="hunter2 xyz"', "hunter2 xyz"),
    Shape("quoted-secret-key", "SECRET_KEY: SECRET_KEY='dj4ngo insecure'", "dj4ngo insecure"),
    Shape("quoted-token", 'token: TOKEN="t0k3n value"', "t0k3n value"),
    Shape("quoted-api-key", 'api_key: API_KEY="k3y value"', "k3y value"),
    # shapes recognised before, now checked in every stored field too
    Shape(
        "github",
        "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5",
        "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5",
        whole=True,
    ),
    Shape("aws", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", whole=True),
    Shape(
        "openai",
        "sk-proj-4fQ9xZ2LmN8pR7tY1uV3wA5bC6dE0gH2jK4lM6nP8qS",
        "sk-proj-4fQ9xZ2LmN8pR7tY1uV3wA5bC6dE0gH2jK4lM6nP8qS",
        whole=True,
    ),
    Shape("url-password", "postgres://app:S3cr3tPgPass@db:5432/main", "S3cr3tPgPass"),
    Shape("bearer", "Authorization: Bearer abc123def456ghi789jkl", "abc123def456ghi789jkl"),
]


def leaked(root: Path, secrets: Iterable[str]) -> list[str]:
    """The secrets some file under `root` holds: as raw bytes, JSON-escaped, or lower-cased
    (the full-text index's form)."""
    blobs = [p.read_bytes() for p in root.rglob("*") if p.is_file()]
    found = []
    for secret in secrets:
        forms = {secret, secret.lower(), secret.replace('"', '\\"'), secret.replace("\n", "\\n")}
        if any(form.encode() in blob for form in forms for blob in blobs):
            found.append(secret)
    return found
