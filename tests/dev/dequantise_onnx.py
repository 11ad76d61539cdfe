"""Rewrite a dynamically quantised ONNX graph into float matrix products (development only):
was the bench's bge-small-en-v1.5 worse than e5 because of its int8 activations?

    pip install onnx    # (1.21 here) in the dev venv; not a dreamwell dependency
    python tests/dev/dequantise_onnx.py MODEL_DIR OUT_DIR

Each ``MatMulInteger`` (with its ``DynamicQuantizeLinear`` input, ``Cast`` and scale ``Mul``)
becomes a ``MatMul`` of the float activations by the dequantised weights, ``(W - zero point)
x scale``: the weights keep their int8 values, the activations are no longer rounded to 8
bits. ``tokenizer.json`` is copied beside. tests/bench/candidate_embedders.py runs the
results (in /tmp/dreamwell-candidates/bge-dequantised and e5-dequantised) as
tune_hybrid.py's candidates "bge-deq" and "e5-deq" (docs/recall.md, "A stronger small
embedder?").
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper


def floated(graph: Any) -> tuple[set[str], list[Any]]:
    """The quantised products' nodes to drop (by their first output: protobuf's node objects
    are made afresh on each read) and the float MatMuls that replace them."""
    init = {i.name: i for i in graph.initializer}
    made_by = {o: n for n in graph.node for o in n.output}
    read_by = collections.defaultdict(list)
    for n in graph.node:
        for i in n.input:
            read_by[i].append(n)
    drop: set[str] = set()
    add = []
    for n in [n for n in graph.node if n.op_type == "MatMulInteger"]:
        aq, wq, _, wzp = n.input
        quantise = made_by[aq]
        (cast,) = read_by[n.output[0]]
        (scale,) = read_by[cast.output[0]]
        assert (quantise.op_type, cast.op_type, scale.op_type) == (
            "DynamicQuantizeLinear",
            "Cast",
            "Mul",
        ), n.name
        (wscale,) = [i for i in made_by[scale.input[1]].input if i in init]
        weights = [numpy_helper.to_array(init[k]).astype(np.float32) for k in (wq, wzp, wscale)]
        name = f"{wq}_dequantised"
        floats = (weights[0] - weights[1]) * weights[2]
        graph.initializer.append(numpy_helper.from_array(floats, name))
        add.append(helper.make_node("MatMul", [quantise.input[0], name], [scale.output[0]]))
        drop.update({n.output[0], cast.output[0], scale.output[0]})
    return drop, add


def pruned(graph: Any, nodes: list[Any]) -> list[Any]:
    """`nodes` less those nothing reads, in an order where each follows its inputs."""
    outputs = {o.name for o in graph.output}
    while True:
        read = {i for n in nodes for i in n.input} | outputs
        kept = [n for n in nodes if any(o in read for o in n.output)]
        if len(kept) == len(nodes):
            break
        nodes = kept
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    order: list[Any] = []
    while nodes:
        later = []
        for n in nodes:
            if all(i in ready for i in n.input):
                order.append(n)
                ready.update(n.output)
            else:
                later.append(n)
        assert len(later) < len(nodes), "the graph has a cycle"
        nodes = later
    return order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args()
    model = onnx.load(args.model_dir / "model.onnx")
    graph = model.graph
    drop, add = floated(graph)
    nodes = pruned(graph, [n for n in graph.node if n.output[0] not in drop] + add)
    del graph.node[:]
    graph.node.extend(nodes)
    read = {i for n in nodes for i in n.input}
    kept = [i for i in graph.initializer if i.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    onnx.save(model, args.out_dir / "model.onnx")
    onnx.checker.check_model(str(args.out_dir / "model.onnx"))
    shutil.copy(args.model_dir / "tokenizer.json", args.out_dir / "tokenizer.json")
    sys.stdout.write(f"{args.out_dir}: {len(add)} products in float\n")


if __name__ == "__main__":
    main()
