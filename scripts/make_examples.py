#!/usr/bin/env python3
"""Build the example models shipped in examples/ (deterministic; rerun to regenerate).

    python3 scripts/make_examples.py

examples/tiny_cnn.onnx: a small image classifier with a symbolic batch dim, built with
onnx.helper the way torch.onnx.export lays such a model out (Conv/Relu/MaxPool/GlobalAveragePool/
Flatten/Gemm/Softmax, opset 17, producer pytorch), checked with onnx.checker.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_cnn() -> onnx.ModelProto:
    rng = np.random.RandomState(0)

    def init(name, *shape):
        return numpy_helper.from_array((rng.randn(*shape) * 0.1).astype(np.float32), name)

    inits = [
        init("conv1.weight", 8, 3, 3, 3),
        init("conv1.bias", 8),
        init("conv2.weight", 16, 8, 3, 3),
        init("conv2.bias", 16),
        init("fc.weight", 10, 16),
        init("fc.bias", 10),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["/conv1/Conv_output_0"],
                         name="/conv1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["/conv1/Conv_output_0"], ["/relu1/Relu_output_0"], name="/relu1/Relu"),
        helper.make_node("MaxPool", ["/relu1/Relu_output_0"], ["/pool/MaxPool_output_0"],
                         name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["/pool/MaxPool_output_0", "conv2.weight", "conv2.bias"],
                         ["/conv2/Conv_output_0"], name="/conv2/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["/conv2/Conv_output_0"], ["/relu2/Relu_output_0"], name="/relu2/Relu"),
        helper.make_node("GlobalAveragePool", ["/relu2/Relu_output_0"], ["/gap/GlobalAveragePool_output_0"],
                         name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["/gap/GlobalAveragePool_output_0"], ["/Flatten_output_0"],
                         name="/Flatten", axis=1),
        helper.make_node("Gemm", ["/Flatten_output_0", "fc.weight", "fc.bias"], ["logits"],
                         name="/fc/Gemm", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="/Softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "main_graph",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="pytorch", producer_version="2.5.1")
    model.ir_version = 8
    model.doc_string = "onnx-doctor example: a tiny CNN classifier"
    helper.set_model_props(model, {"source": "scripts/make_examples.py", "task": "image-classification"})
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    out = os.path.join(ROOT, "examples")
    os.makedirs(out, exist_ok=True)
    onnx.save(tiny_cnn(), os.path.join(out, "tiny_cnn.onnx"))
    print("wrote examples/tiny_cnn.onnx")


if __name__ == "__main__":
    main()
