"""Write corrupted copies of valid models, ten kinds of corruption, and record whether onnx.checker
(full_check=True) rejects each.

    python3 check_mutants.py OUT_DIR MODEL...    → OUT_DIR/manifest.json

The manifest lists {"file", "kind", "original", "onnx_rejects", "onnx_error"} per mutant. A kind
that does not apply to a model (e.g. no attribute to retype) is skipped for that model.
"""
import json
import os
import sys
import warnings

import onnx
from onnx import TensorProto, helper, defs

warnings.simplefilter("ignore")


def first_since(op_type, domain):
    try:
        return min(s.since_version for s in defs.get_all_schemas_with_history()
                   if s.name == op_type and s.domain == domain)
    except ValueError:
        return None


FIRST = {}
for s in defs.get_all_schemas_with_history():
    key = (s.domain, s.name)
    FIRST[key] = min(FIRST.get(key, s.since_version), s.since_version)


def mutants(m):
    g = m.graph
    nodes = list(g.node)
    if nodes:
        n0 = nodes[-1]
        if n0.input and n0.input[0]:
            c = onnx.ModelProto(); c.CopyFrom(m)
            c.graph.node[-1].input[0] = "undefined_value_xyz"
            yield "undefined-input", c
        c = onnx.ModelProto(); c.CopyFrom(m)
        c.graph.node[0].op_type = "NoSuchOpXyz"
        yield "unknown-op", c
        if len(nodes) >= 2 and nodes[0].output and nodes[1].output and nodes[0].output[0] and nodes[1].output[0]:
            c = onnx.ModelProto(); c.CopyFrom(m)
            c.graph.node[1].output[0] = nodes[0].output[0]
            yield "duplicate-output", c
        elif g.input and nodes[0].output and nodes[0].output[0]:
            c = onnx.ModelProto(); c.CopyFrom(m)
            c.graph.node[0].output[0] = g.input[0].name
            yield "duplicate-output", c
        last = nodes[-1]
        if nodes[0].input and last.output and last.output[0]:
            c = onnx.ModelProto(); c.CopyFrom(m)
            c.graph.node[0].input[0] = last.output[0]
            yield "cycle", c
        for i, n in enumerate(nodes):
            for j, a in enumerate(n.attribute):
                if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT, onnx.AttributeProto.STRING, onnx.AttributeProto.INTS):
                    c = onnx.ModelProto(); c.CopyFrom(m)
                    ca = c.graph.node[i].attribute[j]
                    ca.type = onnx.AttributeProto.FLOAT if a.type != onnx.AttributeProto.FLOAT else onnx.AttributeProto.INT
                    yield "wrong-attribute-type", c
                    break
            else:
                continue
            break
        imports = {o.domain: o.version for o in m.opset_import}
        for n in nodes:
            first = FIRST.get((n.domain, n.op_type))
            if first and first > 1 and n.domain in ("", "ai.onnx"):
                c = onnx.ModelProto(); c.CopyFrom(m)
                for o in c.opset_import:
                    if o.domain in ("", "ai.onnx"):
                        o.version = first - 1
                yield "opset-too-low", c
                break
        for i, n in enumerate(nodes):
            try:
                s = defs.get_schema(n.op_type, imports.get(n.domain, 1), n.domain)
            except Exception:
                continue
            if s.max_input < 100 and n.input:
                c = onnx.ModelProto(); c.CopyFrom(m)
                while len(c.graph.node[i].input) <= s.max_input:
                    c.graph.node[i].input.append(n.input[0])
                yield "too-many-inputs", c
                break
        for inp in g.input:
            consumers = [n for n in nodes if inp.name in n.input]
            if inp.type.HasField("tensor_type") and consumers and inp.type.tensor_type.elem_type != TensorProto.STRING:
                c = onnx.ModelProto(); c.CopyFrom(m)
                for ci in c.graph.input:
                    if ci.name == inp.name:
                        ci.type.tensor_type.elem_type = TensorProto.STRING
                yield "input-dtype-outside-constraint", c
                break
    c = onnx.ModelProto(); c.CopyFrom(m)
    c.graph.output.append(helper.make_tensor_value_info("undefined_output_xyz", TensorProto.FLOAT, [1]))
    yield "undefined-graph-output", c
    c = onnx.ModelProto(); c.CopyFrom(m)
    c.ir_version = 99
    yield "unknown-ir-version", c


def main():
    out = sys.argv[1]
    manifest = []
    for k, path in enumerate(sys.argv[2:]):
        m = onnx.load(path)
        for kind, mutant in mutants(m):
            f = os.path.join(out, f"{k}-{kind}.onnx")
            with open(f, "wb") as fh:
                fh.write(mutant.SerializeToString())
            try:
                onnx.checker.check_model(mutant, full_check=True)
                rejects, error = False, ""
            except Exception as e:
                rejects, error = True, str(e).strip().splitlines()[0][:200]
            manifest.append({"file": f, "kind": kind, "original": path, "onnx_rejects": rejects, "onnx_error": error})
    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh)


if __name__ == "__main__":
    main()
