//! Reuse of float32 tensor buffers between runs.
//!
//! When the last view of a float32 tensor built by [`Tensor::from_vec`](crate::Tensor::from_vec)
//! is dropped, its buffer goes back to a small per-thread pool instead of the allocator, and
//! [`f32_buffer`] hands it out again to the next request of the same length. An engine running
//! the same graph over and over then finds every output buffer it needs already allocated (and
//! already paged in), and a kernel that overwrites all of its output skips zeroing it.

use std::cell::RefCell;

/// Buffers below this many values are left to the allocator (cheap to get and to zero).
const MIN_LEN: usize = 1024;
/// At most this many buffers ...
const MAX_BUFFERS: usize = 64;
/// ... and this many values (256 MiB) are kept per thread.
const MAX_VALUES: usize = 64 << 20;

struct Pool {
    buffers: Vec<Vec<f32>>,
    values: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const { RefCell::new(Pool { buffers: Vec::new(), values: 0 }) };
}

/// A buffer of `n` float32 values whose contents are unspecified: values left by an earlier
/// tensor of the same length, or zeros. For kernels that write every element of their output.
pub fn f32_buffer(n: usize) -> Vec<f32> {
    if n >= MIN_LEN {
        let found = POOL
            .try_with(|p| {
                let mut p = p.borrow_mut();
                let i = p.buffers.iter().rposition(|b| b.len() == n)?;
                p.values -= n;
                Some(p.buffers.swap_remove(i))
            })
            .ok()
            .flatten();
        if let Some(b) = found {
            return b;
        }
    }
    vec![0f32; n]
}

/// Takes back the buffer of a dropped tensor (kept when the pool has room).
pub(crate) fn give(buffer: Vec<f32>) {
    let n = buffer.len();
    if n < MIN_LEN || n != buffer.capacity() {
        return;
    }
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.buffers.len() < MAX_BUFFERS && p.values + n <= MAX_VALUES {
            p.values += n;
            p.buffers.push(buffer);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;

    #[test]
    fn a_dropped_tensor_buffer_is_handed_out_again_for_the_same_length() {
        let n = 5000;
        let t = Tensor::from_vec(vec![n], vec![1.5f32; n]).unwrap();
        let ptr = t.as_slice::<f32>().unwrap().as_ptr();
        let view = t.clone();
        drop(t);
        // A view still holds the data: nothing went back yet.
        let other = f32_buffer(n);
        assert_ne!(other.as_ptr(), ptr);
        drop(view);
        let again = f32_buffer(n);
        assert_eq!(again.as_ptr(), ptr);
        assert_eq!(again.len(), n);
        // Lengths must match exactly; small buffers are never pooled.
        drop(Tensor::from_vec(vec![n], again).unwrap());
        let longer = f32_buffer(n + 1);
        assert_ne!(longer.as_ptr(), ptr);
        let small = Tensor::from_vec(vec![8], vec![0f32; 8]).unwrap();
        drop(small);
        assert_eq!(f32_buffer(8), vec![0f32; 8]);
    }
}
