//! Recurrent ops: RNN, GRU, LSTM.
//!
//! X is `[seq, batch, input]` (`layout = 0`) or `[batch, seq, input]` (`layout = 1`, opset 14
//! on). Y is `[seq, num_directions, batch, hidden]` (layout 1: `[batch, seq, num_directions,
//! hidden]`); Y_h and LSTM's Y_c are `[num_directions, batch, hidden]` (layout 1: `[batch,
//! num_directions, hidden]`). `hidden_size` comes from the attribute, else from R
//! (`[num_directions, gates * hidden, hidden]`).
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (RNN, GRU, LSTM).

use crate::infer::{fixed, show, InferCx, InferError};
use crate::{bail, op, OpDef};

fn recurrent(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let layout = if cx.opset >= 14 {
        cx.attr_i("layout").unwrap_or(0)
    } else {
        0
    };
    let dirs = match cx.attr_s("direction").unwrap_or("forward") {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        d => bail!(
            "{} direction '{d}' is not forward, reverse or bidirectional",
            cx.node.op_type()
        ),
    };
    let (seq, batch) = match cx.shape(0) {
        Some(x) if x.len() != 3 => {
            bail!("{} input X {} must have rank 3", cx.node.op_type(), show(x))
        }
        Some(x) if layout == 0 => (x[0].clone(), x[1].clone()),
        Some(x) => (x[1].clone(), x[0].clone()),
        None => (None, None),
    };
    let hidden = match cx.attr_i("hidden_size") {
        Some(h) => fixed(h),
        None => cx
            .shape(2)
            .filter(|r| r.len() == 3)
            .and_then(|r| r[2].clone()),
    };
    let d = fixed(dirs);
    let y = if layout == 0 {
        vec![seq, d.clone(), batch.clone(), hidden.clone()]
    } else {
        vec![batch.clone(), seq, d.clone(), hidden.clone()]
    };
    let state = if layout == 0 {
        vec![d, batch, hidden]
    } else {
        vec![batch, d, hidden]
    };
    cx.set_tensor(0, dtype, Some(y));
    for k in 1..cx.outputs.len() {
        cx.set_tensor(k, dtype, Some(state.clone()));
    }
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("RNN", 1, recurrent),
    op("GRU", 1, recurrent),
    op("LSTM", 1, recurrent),
];

#[cfg(test)]
mod tests {
    use super::super::norm::test_util::*;
    use super::*;

    #[test]
    fn layouts_and_directions() {
        let x = f32s(&[5, -2, 4]);
        let out = run(
            recurrent,
            14,
            &[x.clone(), f32s(&[2, 24, 4]), f32s(&[2, 24, 6])],
            3,
            vec![("direction", A::S("bidirectional"))],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[5, 2, -2, 6])));
        assert_eq!(shape_of(&out[2]), Some(dims(&[2, -2, 6])));
        let out = run(
            recurrent,
            14,
            std::slice::from_ref(&x),
            2,
            vec![("hidden_size", A::I(3)), ("layout", A::I(1))],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[5, -2, 1, 3])));
        assert_eq!(shape_of(&out[1]), Some(dims(&[5, 1, 3])));
        assert!(run(recurrent, 14, &[f32s(&[5, 4])], 1, vec![]).is_err());
    }
}
