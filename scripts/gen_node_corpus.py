#!/usr/bin/env python3
"""Write the ONNX backend node-test corpus from the installed onnx package.

    python3 scripts/gen_node_corpus.py [OUT_DIR]      (default: corpus/)

Produces OUT_DIR/node/<case>/model.onnx and OUT_DIR/node/<case>/test_data_set_<i>/{input,output}_<j>.pb,
the layout onnx's own `backend-test-tools generate-data` writes for model tests, here for
`onnx.backend.test.case.node.collect_testcases()` (1884 cases with onnx 1.23.2). The folder is
git-ignored: it is regenerated, never committed.
"""
import os
import shutil
import sys
import warnings

import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node


def serialize(value, value_info):
    t = value_info.type
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, value_info.name)
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, value_info.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, value_info.name)
    if isinstance(value, onnx.TensorProto):
        return value
    return numpy_helper.from_array(value, value_info.name)


def main() -> int:
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "corpus", "node")
    warnings.simplefilter("ignore")
    cases = node.collect_testcases(None)
    if os.path.exists(out):
        shutil.rmtree(out)
    for case in cases:
        case_dir = os.path.join(out, case.name)
        os.makedirs(case_dir)
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            data_dir = os.path.join(case_dir, f"test_data_set_{i}")
            os.makedirs(data_dir)
            for kind, values, infos in (
                ("input", inputs, case.model.graph.input),
                ("output", outputs, case.model.graph.output),
            ):
                for j, value in enumerate(values):
                    with open(os.path.join(data_dir, f"{kind}_{j}.pb"), "wb") as f:
                        f.write(serialize(value, infos[j]).SerializeToString())
    print(f"wrote {len(cases)} node test cases to {out} (onnx {onnx.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
