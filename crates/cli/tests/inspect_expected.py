"""For each model path on stdin, print one JSON line of what onnx (Python) counts."""
import json
import sys

import numpy as np
import onnx
from onnx import helper


def value(v):
    t = v.type
    if not t.HasField("tensor_type"):
        return {"name": v.name, "dtype": None, "shape": None}
    tt = t.tensor_type
    dtype = helper.tensor_dtype_to_string(tt.elem_type).split(".")[-1].lower() if tt.elem_type else "?"
    shape = None
    if tt.HasField("shape"):
        shape = [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
        ]
    return {"name": v.name, "dtype": dtype, "shape": shape}


for line in sys.stdin:
    path = line.strip()
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    ops = {}
    for n in g.node:
        key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
        ops[key] = ops.get(key, 0) + 1
    print(json.dumps({
        "path": path,
        "ir_version": m.ir_version,
        "producer": m.producer_name,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
        "nodes": len(g.node),
        "initializers": len(g.initializer),
        "parameters": sum(int(np.prod(t.dims, dtype=np.int64)) for t in g.initializer),
        "ops": ops,
        "inputs": [value(v) for v in g.input],
        "outputs": [value(v) for v in g.output],
    }))
