"""Append-only JSONL logs in the data directory, read by the dream worker.

- `conversation.jsonl`, appended by the host agent (or `dreamwell log conversation`):
  `{"ts", "session", "role": "user" | "assistant", "content"}`
- `feedback.jsonl`, appended by the host agent (or `dreamwell log feedback`):
  `{"ts", "session", "kind": "Correction" | "helpful" | "harmful" | ..., "memory_id"?, "detail"}`
- `recall.jsonl`, appended by the server on every search_memory:
  `{"ts", "caller", "query", "ids": [...]}`

Appends and takes hold the log's lock, so a line appended while the dream worker takes the log
lands in the next take instead of being lost.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from dreamwell.stores.model import utcnow

CONVERSATION = "conversation.jsonl"
FEEDBACK = "feedback.jsonl"
RECALL = "recall.jsonl"
MAX_LINE = 64 * 1024


class JsonlLog:
    def __init__(self, data_dir: Path, name: str) -> None:
        self.path = data_dir / name
        self._lock = FileLock(str(data_dir / f".{name}.lock"), timeout=15)

    def append(self, record: Mapping[str, Any], now: datetime | None = None) -> None:
        line = json.dumps({"ts": (now or utcnow()).isoformat(), **record}, ensure_ascii=False)
        if len(line) > MAX_LINE:
            raise ValueError(f"a log line is limited to {MAX_LINE} characters")
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (line + "\n").encode("utf-8"))
            finally:
                os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        """Every well-formed record (a torn or foreign line is skipped, never fatal)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                out.append(record)
        return out

    def take(self) -> list[dict[str, Any]]:
        """Read every record and empty the log, atomically with respect to appends."""
        with self._lock:
            records = self.read()
            if self.path.exists():
                self.path.unlink()
        return records
