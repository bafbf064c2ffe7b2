//! Attention-style ops: Attention, RotaryEmbedding, LinearAttention, SwiGLU, and the preview
//! domain's FlexAttention.
//!
//! Attention takes Q/K/V either 4-D `(batch, heads, seq, head_size)` or 3-D `(batch, seq,
//! heads * head_size)` with the `q_num_heads`/`kv_num_heads` attributes; the caches grow by the
//! new keys (`total = past_seq + kv_seq`).
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (Attention, RotaryEmbedding,
//! LinearAttention, SwiGLU) and docs/Operators-ml / the preview domain (FlexAttention).

use crate::infer::{known, show, DimOf, InferCx, InferError, Shape};
use crate::sym::SymDim;
use crate::{bail, op, OpDef, VersionRange};

fn div(d: &DimOf, by: Option<i64>, what: &str) -> Result<DimOf, InferError> {
    let Some(by) = by else { return Ok(None) };
    if by <= 0 {
        bail!("{what}: number of heads {by} must be positive");
    }
    match known(d) {
        Some(v) if v % by != 0 => bail!("{what} {v} is not a multiple of {by} heads"),
        _ => Ok(d.as_ref().and_then(|v| v.div_exact(&SymDim::known(by)))),
    }
}

/// The first known number among `dims`, else the first symbolic one.
fn pick(dims: &[DimOf]) -> DimOf {
    dims.iter()
        .find(|d| known(d).is_some())
        .or_else(|| dims.iter().find(|d| d.is_some()))
        .cloned()
        .flatten()
}

fn mul(a: &DimOf, b: &DimOf) -> DimOf {
    Some(a.as_ref()?.mul(b.as_ref()?))
}

fn add(a: &DimOf, b: &DimOf) -> DimOf {
    Some(a.as_ref()?.add(b.as_ref()?))
}

/// Inputs: Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen.
/// Outputs: Y, present_key, present_value, qk_matmul_output.
fn attention(cx: &mut InferCx) -> Result<(), InferError> {
    let (q, k, v) = (
        cx.shape(0).cloned(),
        cx.shape(1).cloned(),
        cx.shape(2).cloned(),
    );
    let qh = cx.attr_i("q_num_heads");
    let kvh = cx.attr_i("kv_num_heads");
    for (name, s) in [("Q", &q), ("K", &k), ("V", &v)] {
        if let Some(s) = s.as_ref().filter(|s| s.len() != 3 && s.len() != 4) {
            bail!("Attention {name} {} must have rank 3 or 4", show(s));
        }
    }
    let three_d = q.as_ref().map(|s| s.len() == 3);
    if three_d == Some(true) && (qh.is_none() || kvh.is_none()) {
        bail!("Attention with 3-D inputs needs the q_num_heads and kv_num_heads attributes");
    }
    // Per input: (batch, heads, seq, head_size) as 4-D sees it.
    let split = |s: &Option<Shape>,
                 heads: Option<i64>,
                 what: &str|
     -> Result<Option<[DimOf; 4]>, InferError> {
        Ok(match s {
            Some(s) if s.len() == 4 => {
                Some([s[0].clone(), s[1].clone(), s[2].clone(), s[3].clone()])
            }
            Some(s) => Some([
                s[0].clone(),
                heads.map(SymDim::known),
                s[1].clone(),
                div(&s[2], heads, what)?,
            ]),
            None => None,
        })
    };
    let q4 = split(&q, qh, "Attention Q hidden size")?;
    let k4 = split(&k, kvh, "Attention K hidden size")?;
    let v4 = split(&v, kvh, "Attention V hidden size")?;
    let first = |x: &Option<[DimOf; 4]>| x.as_ref().and_then(|x| x[0].clone());
    let past_b = |i: usize| {
        cx.shape(i)
            .filter(|s| s.len() == 4)
            .and_then(|s| s[0].clone())
    };
    let batch = pick(&[first(&q4), first(&k4), first(&v4), past_b(4), past_b(5)]);
    let q_heads = q4.as_ref().map_or(qh.map(SymDim::known), |x| x[1].clone());
    let q_seq = q4.as_ref().and_then(|x| x[2].clone());
    let v_head = v4.as_ref().and_then(|x| x[3].clone());
    let y = match three_d {
        Some(true) => Some(vec![batch.clone(), q_seq.clone(), mul(&q_heads, &v_head)]),
        Some(false) => Some(vec![
            batch.clone(),
            q_heads.clone(),
            q_seq.clone(),
            v_head.clone(),
        ]),
        None => None,
    };
    let qt = cx.dtype(0);
    cx.set_tensor(0, qt, y);
    let past_seq = if cx.has_input(4) {
        cx.shape(4).filter(|s| s.len() == 4).map(|s| s[2].clone())
    } else {
        Some(Some(SymDim::known(0)))
    };
    let kv_seq = k4.as_ref().map(|x| x[2].clone());
    let total = match (past_seq, kv_seq) {
        (Some(p), Some(s)) => add(&p, &s),
        _ => None,
    };
    let present = |kv: &Option<[DimOf; 4]>, past: usize| -> Option<Shape> {
        let from_past = cx.shape(past).filter(|s| s.len() == 4);
        let b = batch
            .clone()
            .or_else(|| from_past.and_then(|s| s[0].clone()));
        let h = kv
            .as_ref()
            .and_then(|x| x[1].clone())
            .or_else(|| from_past.and_then(|s| s[1].clone()))
            .or(kvh.map(SymDim::known));
        let d = kv
            .as_ref()
            .and_then(|x| x[3].clone())
            .or_else(|| from_past.and_then(|s| s[3].clone()));
        Some(vec![b, h, total.clone(), d])
    };
    let (pk, pv) = (present(&k4, 4), present(&v4, 5));
    let (kt, vt) = (cx.dtype(1), cx.dtype(2));
    if cx.outputs.len() > 1 {
        cx.set_tensor(1, kt, pk);
    }
    if cx.outputs.len() > 2 {
        cx.set_tensor(2, vt, pv);
    }
    if cx.outputs.len() > 3 {
        cx.set_tensor(3, qt, Some(vec![batch, q_heads, q_seq, total.clone()]));
    }
    Ok(())
}

fn same_as_input(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    Ok(())
}

/// A and B must have the same shape; Y has it.
fn swiglu(cx: &mut InferCx) -> Result<(), InferError> {
    if let (Some(a), Some(b)) = (cx.shape(0), cx.shape(1)) {
        let clash = a.len() != b.len()
            || a.iter()
                .zip(b)
                .any(|(x, y)| matches!((known(x), known(y)), (Some(m), Some(n)) if m != n));
        if clash {
            bail!(
                "SwiGLU inputs have different shapes {} and {}",
                show(a),
                show(b)
            );
        }
    }
    let dtype = cx.dtype(0).or(cx.dtype(1));
    let shape = match (cx.shape(0), cx.shape(1)) {
        (Some(a), Some(b)) => Some(
            a.iter()
                .zip(b)
                .map(|(x, y)| pick(&[x.clone(), y.clone()]))
                .collect(),
        ),
        (a, b) => a.or(b).cloned(),
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

/// Inputs: query (B, T, Hq*dk), key (B, T, Hkv*dk), value (B, T, Hkv*dv), past_state
/// (B, Hkv, dk, dv), decay, beta. Outputs: output (B, T, Hq*dv), present_state (B, Hkv, dk, dv).
fn linear_attention(cx: &mut InferCx) -> Result<(), InferError> {
    let (Some(qh), Some(kvh)) = (cx.attr_i("q_num_heads"), cx.attr_i("kv_num_heads")) else {
        bail!("LinearAttention needs the q_num_heads and kv_num_heads attributes");
    };
    if kvh <= 0 || qh <= 0 || qh % kvh != 0 {
        bail!("LinearAttention q_num_heads {qh} must be a positive multiple of kv_num_heads {kvh}");
    }
    let rule = cx.attr_s("update_rule").unwrap_or("gated_delta");
    let (needs_decay, needs_beta) = match rule {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => bail!("LinearAttention update_rule '{r}' is not linear, gated, delta or gated_delta"),
    };
    if needs_decay && !cx.has_input(4) {
        bail!("LinearAttention update_rule '{rule}' needs the decay input");
    }
    if needs_beta && !cx.has_input(5) {
        bail!("LinearAttention update_rule '{rule}' needs the beta input");
    }
    for (i, name) in [(0, "query"), (1, "key"), (2, "value")] {
        if let Some(s) = cx.shape(i).filter(|s| s.len() != 3) {
            bail!("LinearAttention {name} {} must have rank 3", show(s));
        }
    }
    let q = cx.shape(0).cloned();
    let past = cx.shape(3).filter(|s| s.len() == 4).cloned();
    let dk = match &q {
        Some(q) => div(&q[2], Some(qh), "LinearAttention query hidden size")?,
        None => None,
    }
    .or_else(|| past.as_ref().and_then(|p| p[2].clone()));
    let dv = match cx.shape(2) {
        Some(v) => div(&v[2], Some(kvh), "LinearAttention value hidden size")?,
        None => None,
    }
    .or_else(|| past.as_ref().and_then(|p| p[3].clone()));
    let at = |i: usize, d: usize| cx.shape(i).and_then(|s| s.get(d).cloned().flatten());
    let b = pick(&[at(0, 0), at(1, 0), at(2, 0), at(3, 0)]);
    let t = pick(&[at(0, 1), at(1, 1), at(2, 1)]);
    let dk = match (dk, cx.shape(1)) {
        (d, Some(k)) if known(&d).is_none() => {
            pick(&[d, div(&k[2], Some(kvh), "LinearAttention key hidden size")?])
        }
        (d, _) => d,
    };
    let dtype = cx.dtype(0);
    let out = mul(&Some(SymDim::known(qh)), &dv);
    cx.set_tensor(0, dtype, Some(vec![b.clone(), t, out]));
    if cx.outputs.len() > 1 {
        let st = if cx.has_input(3) { cx.dtype(3) } else { dtype };
        cx.set_tensor(1, st, Some(vec![b, Some(SymDim::known(kvh)), dk, dv]));
    }
    Ok(())
}

/// Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev) → Y (B, Hq, L, Ev).
fn flex_attention(cx: &mut InferCx) -> Result<(), InferError> {
    for (i, name) in [(0, "Q"), (1, "K"), (2, "V")] {
        if let Some(s) = cx.shape(i).filter(|s| s.len() != 4) {
            bail!("FlexAttention {name} {} must have rank 4", show(s));
        }
    }
    let dtype = cx.dtype(0);
    let q = cx.shape(0);
    let ev = cx.shape(2).and_then(|v| v[3].clone());
    let shape = q.map(|q| vec![q[0].clone(), q[1].clone(), q[2].clone(), ev]);
    cx.set_tensor(
        0,
        dtype,
        shape.or_else(|| {
            Some(vec![
                None,
                None,
                None,
                cx.shape(2).and_then(|v| v[3].clone()),
            ])
        }),
    );
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("Attention", 23, attention),
    op("RotaryEmbedding", 23, same_as_input),
    op("LinearAttention", 27, linear_attention),
    op("SwiGLU", 28, swiglu),
    OpDef {
        domain: "ai.onnx.preview",
        name: "FlexAttention",
        versions: VersionRange {
            since: 1,
            until: None,
        },
        infer: flex_attention,
    },
];

#[cfg(test)]
mod tests {
    use super::super::norm::test_util::*;
    use super::*;

    #[test]
    fn attention_4d_with_cache() {
        let out = run(
            attention,
            23,
            &[
                f32s(&[2, 8, 3, 16]),
                f32s(&[2, 2, 5, 16]),
                f32s(&[2, 2, 5, 12]),
                None,
                f32s(&[2, 2, 4, 16]),
                f32s(&[2, 2, 4, 12]),
            ],
            4,
            vec![],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[2, 8, 3, 12])));
        assert_eq!(shape_of(&out[1]), Some(dims(&[2, 2, 9, 16])));
        assert_eq!(shape_of(&out[2]), Some(dims(&[2, 2, 9, 12])));
        assert_eq!(shape_of(&out[3]), Some(dims(&[2, 8, 3, 9])));
    }

    #[test]
    fn attention_3d_needs_heads() {
        let ins = [f32s(&[2, 3, 128]), f32s(&[2, 5, 32]), f32s(&[2, 5, 24])];
        let out = run(
            attention,
            23,
            &ins,
            4,
            vec![("q_num_heads", A::I(8)), ("kv_num_heads", A::I(2))],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[2, 3, 96])));
        assert_eq!(shape_of(&out[1]), Some(dims(&[2, 2, 5, 16])));
        assert_eq!(shape_of(&out[3]), Some(dims(&[2, 8, 3, 5])));
        assert!(run(attention, 23, &ins, 1, vec![]).is_err());
    }

    #[test]
    fn linear_attention_shapes() {
        let ins = [
            f32s(&[2, 3, 64]),
            f32s(&[2, 3, 32]),
            f32s(&[2, 3, 48]),
            None,
            f32s(&[2, 3, 2]),
            f32s(&[2, 3, 2]),
        ];
        let out = run(
            linear_attention,
            27,
            &ins,
            2,
            vec![("q_num_heads", A::I(4)), ("kv_num_heads", A::I(2))],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[2, 3, 96])));
        assert_eq!(shape_of(&out[1]), Some(dims(&[2, 2, 16, 24])));
        assert!(run(
            linear_attention,
            27,
            &ins[..3],
            2,
            vec![("q_num_heads", A::I(4)), ("kv_num_heads", A::I(2))]
        )
        .is_err());
    }
}
