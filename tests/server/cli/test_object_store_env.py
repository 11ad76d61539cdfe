"""Object storage configured by the usual AWS_* variables alone, as README promises, and the
start-up error that tells plain http, no answer, access denied and no such bucket apart
(issue 44), against a real S3-compatible server (SeaweedFS)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import dreamwell
from tests.support.s3server import SeaweedS3

UNSET = ["DREAMWELL_STORAGE_OPTIONS", *(f"AWS_{v}" for v in ("PROFILE", "CONFIG_FILE"))]


def aws(s3: SeaweedS3, **changes: str) -> dict[str, str]:
    env = {
        "AWS_ENDPOINT": s3.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": s3.access_key,
        "AWS_SECRET_ACCESS_KEY": s3.secret_key,
        "DREAMWELL_EMBEDDER": "none",
    }
    return {k: v for k, v in (env | changes).items() if v}


def test_the_aws_variables_alone_reach_the_store(
    s3: SeaweedS3, s3_prefix: str, tmp_path: Path
) -> None:
    source = tmp_path / "m.jsonl"
    source.write_text(json.dumps({"content": "the bucket holds this memory"}) + "\n")
    where = ["--data-dir", s3.uri(s3_prefix), "--cache-dir", str(tmp_path / "cache")]
    done = dreamwell("import", str(source), *where, env=aws(s3), unset=UNSET)
    assert done.returncode == 0, done.stderr
    out = dreamwell("export", *where, env=aws(s3), unset=UNSET)
    assert out.returncode == 0, out.stderr
    assert "the bucket holds this memory" in out.stdout


def test_the_start_up_error_says_which_problem_it_is(
    s3: SeaweedS3, s3_prefix: str, tmp_path: Path
) -> None:
    cases = {
        "plain http is not allowed": (s3.uri(s3_prefix), {"AWS_ALLOW_HTTP": ""}),
        "does not answer": (s3.uri(s3_prefix), {"AWS_ENDPOINT": "http://127.0.0.1:9"}),
        "access denied": (s3.uri(s3_prefix), {"AWS_SECRET_ACCESS_KEY": "wrong-secret"}),
        "the bucket does not exist": ("s3://no-such-bucket-44/x", {}),
    }
    for said, (uri, changes) in cases.items():
        cache = tmp_path / said.replace(" ", "-")
        done = dreamwell(
            "export",
            "--data-dir",
            uri,
            "--cache-dir",
            str(cache),
            env=aws(s3, **changes),
            unset=UNSET,
        )
        assert done.returncode != 0, said
        assert done.stderr.count("\n") == 1 and said in done.stderr, (said, done.stderr)
