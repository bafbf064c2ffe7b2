//! tensor::pb::decode and tensor::npy::decode on arbitrary bytes: Ok or Err, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let _ = tensor::pb::decode(bytes.clone());
    let _ = tensor::npy::decode(bytes, None);
});
