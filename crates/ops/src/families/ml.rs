//! The traditional-ML domain `ai.onnx.ml`: ArrayFeatureExtractor, Binarizer, LabelEncoder,
//! TreeEnsemble.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators-ml.md (each op's section).

use crate::infer::{fixed, show, InferCx, InferError, Shape};
use crate::sym::SymDim;
use crate::{bail, OpDef, VersionRange};
use tensor::DataType;

const ML: &str = "ai.onnx.ml";

const fn ml(name: &'static str, since: i64, infer: crate::InferFn) -> OpDef {
    OpDef {
        domain: ML,
        name,
        versions: VersionRange { since, until: None },
        infer,
    }
}

fn array_feature_extractor(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    // The number of picked features: every element of Y.
    let count = cx.shape(1).and_then(|s| {
        s.iter()
            .try_fold(SymDim::known(1), |acc, d| d.as_ref().map(|d| acc.mul(d)))
    });
    let shape = match cx.shape(0) {
        Some(s) if s.is_empty() => bail!(
            "ArrayFeatureExtractor X must have rank >= 1, got {}",
            show(s)
        ),
        Some(s) if s.len() == 1 => Some(vec![fixed(1), count]),
        Some(s) => {
            let mut out: Shape = s.clone();
            let r = out.len();
            out[r - 1] = count;
            Some(out)
        }
        None => None,
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn binarizer(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    Ok(())
}

fn label_encoder(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = if cx.opset < 2 {
        // v1: string ↔ int64, chosen by the input's type.
        match cx.dtype(0) {
            Some(DataType::String) => Some(DataType::Int64),
            Some(DataType::Int64) => Some(DataType::String),
            _ => None,
        }
    } else if let Some(t) = cx.attr_t("values_tensor") {
        DataType::from_onnx(t.data_type())
    } else if cx.attr("values_strings").is_some() {
        Some(DataType::String)
    } else if cx.attr("values_int64s").is_some() {
        Some(DataType::Int64)
    } else if cx.attr("values_floats").is_some() {
        Some(DataType::Float)
    } else {
        None
    };
    let shape = cx.shape(0).cloned();
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn tree_ensemble(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let targets = cx.attr_i("n_targets").and_then(fixed);
    let shape = match cx.shape(0) {
        Some(s) if s.len() != 2 => bail!("TreeEnsemble X must be [N, F], got {}", show(s)),
        Some(s) => Some(vec![s[0].clone(), targets]),
        None => Some(vec![None, targets]),
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

pub const OPS: &[OpDef] = &[
    ml("ArrayFeatureExtractor", 1, array_feature_extractor),
    ml("Binarizer", 1, binarizer),
    ml("LabelEncoder", 1, label_encoder),
    ml("TreeEnsemble", 5, tree_ensemble),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{node, run, t};
    use crate::infer::Info;

    #[test]
    fn feature_extractor_replaces_the_last_dim() {
        let x = Info::of(t(DataType::Float, &[3, 4]));
        let y = Info::of(t(DataType::Int64, &[2]));
        let n = node("ArrayFeatureExtractor", &["x", "y"], &["z"], vec![]);
        assert_eq!(
            run(array_feature_extractor, &n, 1, &[Some(&x), Some(&y)])[0].ty,
            t(DataType::Float, &[3, 2])
        );
        let x = Info::of(t(DataType::Float, &[4]));
        assert_eq!(
            run(array_feature_extractor, &n, 1, &[Some(&x), Some(&y)])[0].ty,
            t(DataType::Float, &[1, 2])
        );
    }
}
