//! Model::from_bytes on arbitrary bytes: must return Ok or Err, never panic, abort or hang.
//! base_dir is None, so external data is refused (no file system access).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let bytes = bytes::Bytes::copy_from_slice(data);
    if let Ok(model) = onnx_ir::Model::from_bytes(bytes, Path::new("fuzz.onnx"), None) {
        // Touch the typed views a verb would use.
        let g = model.graph();
        for v in g.input.iter().chain(&g.output) {
            let ty = onnx_ir::ValueType::from_proto(v.r#type.as_ref());
            let _ = ty.type_name();
            let _ = ty.shape();
        }
        let _ = model.opset("");
    }
});
