"""A data directory on object storage: `s3://bucket/prefix` (also `gs://`, `az://`).

This module owns the URI, the options given with it (LanceDB's `storage_options` names:
`endpoint`, `region`, `allow_http`, `aws_access_key_id`, ...; the usual `AWS_*`, `GOOGLE_*`
and `AZURE_*` variables work too), the one object-store client and LanceDB connection per
location, the reachability check, and where each location's local cache lives.

A remote data directory is a local cache directory with the usual layout (`stores/layout.py`)
plus the marker `remote.json` that names the location (and the options that are not secrets:
keys come from the environment or the settings of each process). What lives where in the
object store is said in `stores/longterm/shared/log.py` (long-term memory's log) and the modules
that keep the other stores there.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamwell.stores.errors import StoreError
from dreamwell.stores.model import check_tenant

SCHEMES = ("s3", "gs", "az", "abfs", "abfss")
_URI = re.compile(r"(s3|gs|az|abfss?)://([^/?#\s]+)(/[^?#\s]*)?")
MARKER = "remote.json"
_SECRET = re.compile(r"secret|key|token|password|credential|sas", re.IGNORECASE)
# an HTTP status of refusal, not the digits of a port or an address (:40312, 10.0.4.13)
_DENIED = re.compile(
    r"invalidaccesskeyid|signaturedoesnotmatch|accessdenied|(?<![\d.:])40[13](?!\d)"
)
# A call against a store that does not answer fails within seconds (a hung store: about 20 s
# for a save, measured), instead of LanceDB's and obstore's defaults (30 s a request, retried
# for up to 3 minutes): a client hears an error before its own time-out.
DEFAULTS = {
    "timeout": "5s",
    "connect_timeout": "2s",
    "client_max_retries": "1",
    "client_retry_timeout": "5",
}


def is_uri(text: str) -> bool:
    return text.split("://", 1)[0].lower() in SCHEMES and "://" in text


def parse(text: str) -> str:
    """The URI normalised (no trailing slash), or InvalidInput-like ValueError in one line."""
    match = _URI.fullmatch(text.strip().rstrip("/"))
    if match is None:
        raise ValueError(
            f"{text!r} is not an object-store location like s3://bucket/prefix "
            f"(schemes: {', '.join(SCHEMES)})"
        )
    return f"{match.group(1)}://{match.group(2)}{(match.group(3) or '').rstrip('/')}"


@dataclass(frozen=True)
class Remote:
    uri: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, uri: str, options: dict[str, Any] | None = None) -> Remote:
        given = {
            k.lower(): str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in (options or {}).items()
        }
        return cls(parse(uri), tuple(sorted({**DEFAULTS, **given}.items())))

    def tenant(self, name: str) -> Remote:
        return (
            self if name == "" else Remote(f"{self.uri}/tenants/{check_tenant(name)}", self.options)
        )

    def child(self, name: str) -> str:
        return f"{self.uri}/{name}"

    @property
    def scheme(self) -> str:
        return self.uri.split("://", 1)[0]

    def storage_options(self) -> dict[str, str]:
        """The options as LanceDB takes them."""
        return dict(self.options)

    def public(self) -> dict[str, str]:
        """The options that may be written to disk (not keys, tokens or passwords)."""
        return {k: v for k, v in self.options if not _SECRET.search(k)}


def describe(exc: BaseException) -> str:
    """An object-store error in one line that says what to do."""
    text = str(exc)
    low = text.lower()
    if "nosuchbucket" in low or "bucket does not exist" in low:
        return "the bucket does not exist; create it or fix the URI"
    if _DENIED.search(low):
        return (
            "access denied: check the credentials "
            "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or storage_options)"
        )
    if "url scheme is not allowed" in low or ("builder error" in low and " http://" in low):
        return (
            "plain http is not allowed for this endpoint: use https, or allow it "
            '(AWS_ALLOW_HTTP=true or storage_options {"allow_http": "true"})'
        )
    if any(
        w in low
        for w in ("connection refused", "error sending request", "dns", "timed out", "timeout")
    ):
        return "the object store does not answer (is its endpoint right and is it running?)"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first[:300]


# ---- the local cache and its marker ----------------------------------------------------------
def cache_path(cache_dir: Path, uri: str) -> Path:
    """Where this machine keeps the derived cache of `uri`: readable and one per location."""
    uri = parse(uri)
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", uri.split("://", 1)[1]).strip("-")[:60]
    digest = hashlib.sha256(uri.encode()).hexdigest()[:8]
    return cache_dir / f"{slug}-{digest}"


attached: dict[Path, Remote] = {}


def of(root: Path) -> Remote | None:
    """The remote location whose cache `root` is (or whose tenant's cache), None if local."""
    root = root.resolve()
    found = attached.get(root)
    if found is not None:
        return found
    if (root / MARKER).is_file():
        return _from_marker(root)
    if root.parent.name == "tenants" and (parent := of(root.parent.parent)) is not None:
        return parent.tenant(root.name)
    return None


def _from_marker(root: Path) -> Remote:
    try:
        data = json.loads((root / MARKER).read_text(encoding="utf-8"))
        return Remote.of(str(data["uri"]), dict(data.get("options") or {}))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"{root / MARKER} is unreadable ({exc}); start `serve` with --data-dir <uri> again"
        ) from exc
