"""Reads "original<TAB>saved" lines; checks onnx sees the same model and accepts the saved one."""
import sys

import onnx
from onnx.external_data_helper import _get_all_tensors


def normalized(path):
    """onnx.load sets data_location = DEFAULT explicitly on tensors it read from external data;
    a tensor that never was external leaves the field unset. Both mean "inline"."""
    model = onnx.load(path)
    for t in _get_all_tensors(model):
        if t.HasField("data_location") and t.data_location == onnx.TensorProto.DEFAULT:
            t.ClearField("data_location")
    return model


failures = []
checked = 0
for line in sys.stdin:
    original, saved = line.rstrip("\n").split("\t")
    a = normalized(original)
    b = normalized(saved)
    if a != b:
        failures.append(f"{saved}: differs from {original} after onnx.load")
        continue
    try:
        onnx.checker.check_model(original)
        original_ok = True
    except Exception:
        original_ok = False
    if original_ok:
        try:
            onnx.checker.check_model(saved)
            checked += 1
        except Exception as e:
            failures.append(f"{saved}: onnx.checker rejects it but accepts {original}: {e}")
for f in failures:
    print(f)
print(f"{checked} saved models accepted by onnx.checker; {len(failures)} failed")
sys.exit(1 if failures else 0)
