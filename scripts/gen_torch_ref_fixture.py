#!/usr/bin/env python3
"""Writes tests/fixtures/torch_ref/: a small Conv-BatchNorm-ReLU-Linear module exported with the
TorchScript exporter (which folds the BatchNorm into the Conv), and two references written by
scripts/torch_reference.py with module-path intermediates: ref.npz (the exported weights) and
ref_bad.npz (the Linear's weight changed after export, so /head/Gemm is the first divergent node).
Needs torch; run once by hand: python3 scripts/gen_torch_ref_fixture.py
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_reference import save_reference  # noqa: E402

OUT = os.path.join(HERE, "..", "tests", "fixtures", "torch_ref")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.head(y.mean(dim=(2, 3)))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    m = Block()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    m.eval()
    x = torch.randn(2, 3, 8, 8)
    torch.onnx.export(m, (x,), os.path.join(OUT, "model.onnx"), input_names=["x"],
                      output_names=["logits"], opset_version=17, dynamo=False)
    save_reference(m, (x,), os.path.join(OUT, "ref.npz"), ["x"], ["logits"], intermediates=True)
    with torch.no_grad():
        m.head.weight[0, 0] += 1.0
    save_reference(m, (x,), os.path.join(OUT, "ref_bad.npz"), ["x"], ["logits"], intermediates=True)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
