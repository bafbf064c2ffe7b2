#!/usr/bin/env python3
"""Writes the small models the `verify` and `compare` end-to-end tests use, into tests/fixtures/:

- dyn_reshape_ok.onnx: x[batch,3,4] -> Reshape to [batch, 12] with the batch taken from Shape(x)
  (correctly dynamic);
- dyn_reshape_baked.onnx: the same with the shape constant [2, 12] baked at export (batch was 2);
- dyn_range_baked.onnx: x[batch,seq] + Range(0, 5) cast to float: the sequence length 5 baked
  into a Range with constant bounds.

Run: python3 scripts/gen_verify_fixtures.py
"""
import os

import onnx
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")


def save(model, name):
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(OUT, name))


def reshape(baked):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 12])
    if baked:
        nodes = [
            helper.make_node("Constant", [], ["shape"], name="/model/Constant",
                             value=helper.make_tensor("shape", TensorProto.INT64, [2], [2, 12])),
            helper.make_node("Reshape", ["x", "shape"], ["r"], name="/model/Reshape"),
            helper.make_node("Relu", ["r"], ["y"], name="/model/Relu"),
        ]
    else:
        nodes = [
            helper.make_node("Shape", ["x"], ["s"], name="/model/Shape", start=0, end=1),
            helper.make_node("Constant", [], ["rest"], name="/model/Constant",
                             value=helper.make_tensor("rest", TensorProto.INT64, [1], [-1])),
            helper.make_node("Concat", ["s", "rest"], ["shape"], name="/model/Concat", axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["r"], name="/model/Reshape"),
            helper.make_node("Relu", ["r"], ["y"], name="/model/Relu"),
        ]
    g = helper.make_graph(nodes, "reshape", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="gen_verify_fixtures")


def range_baked():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])
    c = lambda n, v: helper.make_node("Constant", [], [n], name=f"/pos/{n}",
                                      value=helper.make_tensor(n, TensorProto.INT64, [], [v]))
    nodes = [
        c("start", 0), c("limit", 5), c("delta", 1),
        helper.make_node("Range", ["start", "limit", "delta"], ["pos"], name="/pos/Range"),
        helper.make_node("Cast", ["pos"], ["posf"], name="/pos/Cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "posf"], ["y"], name="/Add"),
    ]
    g = helper.make_graph(nodes, "range", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="gen_verify_fixtures")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    save(reshape(False), "dyn_reshape_ok.onnx")
    save(reshape(True), "dyn_reshape_baked.onnx")
    save(range_baked(), "dyn_range_baked.onnx")
    print("wrote tests/fixtures/dyn_*.onnx")
