"""Which size forms stay dynamic in torch.onnx.export (TorchScript tracer, dynamo=False)? The
fact behind ODL016 reporting `int()`/`len()` sizes and not `x.shape[i]`/`x.size(i)` used as they are.

    python3 scripts/check_traced_sizes.py      # needs torch and onnxruntime (not run in CI)

Exports each form at input size (2, 3, 5, 6) with every axis dynamic, runs the ONNX model in
onnxruntime at (4, 7, 9, 11) and compares with PyTorch: "dynamic" when they agree, "FROZEN" when
the export kept the example's size. Exit status 1 when a form behaves otherwise than expected.
"""
import io
import sys
import warnings

import numpy as np, onnxruntime as ort, torch, torch.nn as nn

warnings.filterwarnings("ignore")
tok = torch.randn(1, 1, 4)

FORMS = {
    "zeros(x.shape[0])": lambda x: x.sum((1, 2, 3))[:, None] + torch.zeros(x.shape[0], 4),
    "zeros(B) B,C,H,W=x.shape": lambda x: (lambda B, C, H, W: torch.zeros(B, 4))(*x.shape) + x.mean(),
    "arange(x.size(1))": lambda x: torch.arange(x.size(1)).float() + x.mean(),
    "arange(n) n=x.shape[2], float": lambda x: torch.arange(x.shape[2], dtype=torch.float32) + x.mean(),
    "linspace(-1,1,h)": lambda x: torch.linspace(-1.0, 1.0, x.shape[2]) + x.mean(),
    "full((x.size(0),1),5.5)": lambda x: torch.full((x.size(0), 1), 5.5) + x.mean(),
    "view(b,-1,h*w)": lambda x: (lambda b, c, h, w: x.view(b, -1, h * w))(*x.shape),
    "reshape(b,c,h*w)": lambda x: x.reshape(x.shape[0], x.shape[1], x.shape[2] * x.shape[3]),
    "expand(x.size(0),-1,-1)": lambda x: tok.expand(x.size(0), -1, -1) + x.mean(),
    "new_zeros((h,w))": lambda x: x.new_zeros((x.shape[2], x.shape[3])) + x.mean(),
    "zeros(1, B*N)": lambda x: torch.zeros(1, x.shape[0] * x.shape[1]) + x.mean(),
    "new_zeros(h, w)": lambda x: x.new_zeros(x.shape[2], x.shape[3]) + x.mean(),
    "CONTROL zeros(int(x.size(0)))": lambda x: torch.zeros(int(x.size(0)), 4) + x.mean(),
    "CONTROL view(len(x),-1)": lambda x: x.view(len(x), -1),
    "CONTROL arange(int(x.shape[2]))": lambda x: torch.arange(int(x.shape[2])).float() + x.mean(),
    # Sizes read through `.data` (pytorch#77410) or `torch.Size.numel()` are not recorded either.
    "CONTROL view(x.data.size(0),-1)": lambda x: x.view(x.data.size(0), -1),
    "CONTROL zeros(x.data.shape[0])": lambda x: torch.zeros(x.data.shape[0], 4) + x.mean(),
    "CONTROL zeros(x.shape.numel())": lambda x: x.sum() + torch.zeros(x.shape.numel()),
    "x.numel() / x.nelement()": lambda x: x.sum() + torch.zeros(x.numel()) + torch.ones(x.nelement()),
}


class M(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


bad = 0
for name, f in FORMS.items():
    m = M(f).eval()
    a = torch.randn(2, 3, 5, 6)
    b = torch.randn(4, 7, 9, 11)
    buf = io.BytesIO()
    try:
        torch.onnx.export(m, (a,), buf, input_names=["x"], output_names=["y"], opset_version=17,
                          dynamic_axes={"x": {0: "b", 1: "c", 2: "h", 3: "w"}}, dynamo=False)
        s = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
        got = s.run(None, {"x": b.numpy()})[0]
        want = m(b).detach().numpy()
        ok = got.shape == want.shape and np.allclose(got, want, atol=1e-5)
        print(f"{name:34s} {'dynamic' if ok else 'FROZEN'}  ort {got.shape} torch {want.shape}")
        bad += ok == name.startswith("CONTROL")
    except Exception as e:  # an export or run failure is reported, not a verdict
        print(f"{name:34s} ERROR {type(e).__name__}: {str(e).splitlines()[0][:100]}")
        bad += 1
print(f"torch {torch.__version__}, onnxruntime {ort.__version__}")
sys.exit(1 if bad else 0)
