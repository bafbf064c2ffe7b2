"""Compare `onnx-doctor shapes` output with onnx.shape_inference (data_prop=True).

Reads "original<TAB>ours" lines on stdin. For every main-graph value onnx infers a fully static
shape for (value_info and graph outputs), our file must give the same element type and dims.
Prints one JSON object: counts, and per producing op the values we missed or got wrong.
"""
import json
import sys
import warnings

import onnx
from onnx import shape_inference

warnings.simplefilter("ignore")


def static_types(graph):
    out = {}
    for v in list(graph.value_info) + list(graph.output):
        t = v.type
        if not t.HasField("tensor_type") or not t.tensor_type.elem_type or not t.tensor_type.HasField("shape"):
            continue
        dims = t.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            out[v.name] = (t.tensor_type.elem_type, [d.dim_value for d in dims])
    return out


total = matched = 0
missing, wrong, examples = {}, {}, []
for line in sys.stdin:
    original, ours = line.rstrip("\n").split("\t")
    m = onnx.load(original)
    producer = {o: n.op_type for n in m.graph.node for o in n.output}
    declared = static_types(m.graph)
    try:
        inferred = shape_inference.infer_shapes(m, data_prop=True)
    except Exception:
        continue
    theirs = static_types(inferred.graph)
    try:
        mine = static_types(onnx.load(ours).graph)
    except Exception as e:
        mine = {}
    for name, (elem, dims) in theirs.items():
        if name not in producer:
            continue
        total += 1
        op = producer[name]
        got = mine.get(name)
        if got == (elem, dims):
            matched += 1
        elif got is None:
            missing[op] = missing.get(op, 0) + 1
        else:
            wrong[op] = wrong.get(op, 0) + 1
            if len(examples) < 40:
                examples.append(f"{original}: {name} ({op}): onnx {elem} {dims}, ours {got[0]} {got[1]}")
print(json.dumps({"values": total, "matched": matched, "missing": missing, "wrong": wrong, "examples": examples}))
