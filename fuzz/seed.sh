#!/usr/bin/env bash
# Fills fuzz/corpus/ (git-ignored) with small seed inputs from the repository.
# Usage: fuzz/seed.sh   (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
mkdir -p "$here/corpus/load_model" "$here/corpus/decode_tensor"

# load_model: the example CNN plus a spread of small node-test models (<= 64 KiB).
[ -f "$root/examples/tiny_cnn.onnx" ] && cp "$root/examples/tiny_cnn.onnx" "$here/corpus/load_model/tiny_cnn.onnx"
if [ -d "$root/corpus/node" ]; then
  for t in test_add test_conv_with_strides_padding test_if test_loop11 test_scan9_sum \
           test_cast_FLOAT_to_STRING test_sequence_map_identity_1_sequence test_gather_0 \
           test_reshape_reordered_all_dims test_layer_normalization_2d_axis0 \
           test_constant test_string_concat test_dequantizelinear_int4 test_cast_FLOAT_to_FLOAT8E4M3FN; do
    f="$root/corpus/node/$t/model.onnx"
    [ -f "$f" ] && cp "$f" "$here/corpus/load_model/$t.onnx"
  done
  # decode_tensor: .pb tensors from the node tests (inputs and expected outputs).
  for t in test_add test_cast_FLOAT_to_STRING test_dequantizelinear_int4 test_gather_0 test_constant \
           test_cast_FLOAT_to_FLOAT16 test_cast_FLOAT_to_BFLOAT16; do
    for f in "$root/corpus/node/$t"/test_data_set_0/*.pb; do
      [ -f "$f" ] && cp "$f" "$here/corpus/decode_tensor/${t}_$(basename "$f")"
    done
  done
fi
# decode_tensor: some .npy files written by numpy, if python+numpy are available.
python3 - "$here/corpus/decode_tensor" <<'PY' || true
import sys, numpy as np, os
d = sys.argv[1]
np.save(os.path.join(d, "f32.npy"), np.arange(6, dtype=np.float32).reshape(2, 3))
np.save(os.path.join(d, "i64_fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)))
np.save(os.path.join(d, "bool.npy"), np.array([True, False]))
np.save(os.path.join(d, "f16_scalar.npy"), np.float16(1.5))
np.save(os.path.join(d, "u16_be.npy"), np.arange(4, dtype=">u2"))
np.save(os.path.join(d, "str.npy"), np.array(["ab", "c"]))
PY
echo "load_model:    $(ls "$here/corpus/load_model" | wc -l) seeds"
echo "decode_tensor: $(ls "$here/corpus/decode_tensor" | wc -l) seeds"
