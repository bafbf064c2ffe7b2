//! String ops: StringConcat (broadcast), StringNormalizer (`[C]` or `[1, C]`; stopwords make the
//! last dim data-dependent), StringSplit, RegexFullMatch, TfIdfVectorizer, ImageDecoder.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{broadcast, fixed, known, show, InferCx, InferError};
use crate::{bail, op, OpDef};
use tensor::DataType;

fn string_concat(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = match (cx.shape(0), cx.shape(1)) {
        (Some(a), Some(b)) => Some(broadcast(a, b)?),
        _ => None,
    };
    cx.set_tensor(0, Some(DataType::String), shape);
    Ok(())
}

fn string_normalizer(cx: &mut InferCx) -> Result<(), InferError> {
    let stopwords = cx.attr("stopwords").is_some_and(|a| !a.strings.is_empty());
    let shape = match cx.shape(0) {
        Some(s) if s.len() == 1 || (s.len() == 2 && known(&s[0]).is_none_or(|d| d == 1)) => {
            let mut out = s.clone();
            if s.len() == 2 {
                out[0] = fixed(1);
            }
            if stopwords {
                let r = out.len();
                out[r - 1] = None;
            }
            Some(out)
        }
        Some(s) => bail!(
            "StringNormalizer takes a [C] or [1, C] input, got {}",
            show(s)
        ),
        None => None,
    };
    cx.set_tensor(0, Some(DataType::String), shape);
    Ok(())
}

fn string_split(cx: &mut InferCx) -> Result<(), InferError> {
    let s = cx.shape(0).cloned();
    let y = s.clone().map(|mut s| {
        s.push(None);
        s
    });
    cx.set_tensor(0, Some(DataType::String), y);
    cx.set_tensor(1, Some(DataType::Int64), s);
    Ok(())
}

fn regex_full_match(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = cx.shape(0).cloned();
    cx.set_tensor(0, Some(DataType::Bool), shape);
    Ok(())
}

fn tf_idf_vectorizer(cx: &mut InferCx) -> Result<(), InferError> {
    let size = cx
        .attr_ints("ngram_indexes")
        .and_then(|v| v.iter().max().copied())
        .and_then(|m| fixed(m + 1));
    let shape = match cx.shape(0) {
        Some(s) if s.len() == 1 => Some(vec![size]),
        Some(s) if s.len() == 2 => Some(vec![s[0].clone(), size]),
        Some(s) => bail!(
            "TfIdfVectorizer takes a [C] or [N, C] input, got {}",
            show(s)
        ),
        None => None,
    };
    cx.set_tensor(0, Some(DataType::Float), shape);
    Ok(())
}

fn image_decoder(cx: &mut InferCx) -> Result<(), InferError> {
    let channels = match cx.attr_s("pixel_format").unwrap_or("RGB") {
        "RGB" | "BGR" => 3,
        "Grayscale" => 1,
        other => bail!("ImageDecoder pixel_format '{other}' is not RGB, BGR or Grayscale"),
    };
    if let Some(r) = cx.rank(0).filter(|&r| r != 1) {
        bail!("ImageDecoder encoded_stream must have rank 1, got rank {r}");
    }
    cx.set_tensor(
        0,
        Some(DataType::Uint8),
        Some(vec![None, None, fixed(channels)]),
    );
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("StringConcat", 20, string_concat),
    op("StringNormalizer", 10, string_normalizer),
    op("StringSplit", 20, string_split),
    op("RegexFullMatch", 20, regex_full_match),
    op("TfIdfVectorizer", 9, tf_idf_vectorizer),
    op("ImageDecoder", 20, image_decoder),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{ais, astr, node, run, t};
    use crate::infer::Info;

    #[test]
    fn split_adds_a_dim_and_tfidf_sizes_from_indexes() {
        let x = Info::of(t(DataType::String, &[2, 3]));
        let n = node("StringSplit", &["x"], &["y", "z"], vec![]);
        let out = run(string_split, &n, 20, &[Some(&x)]);
        assert_eq!(out[0].ty, t(DataType::String, &[2, 3, -1]));
        assert_eq!(out[1].ty, t(DataType::Int64, &[2, 3]));
        let x = Info::of(t(DataType::Int32, &[2, 12]));
        let n = node(
            "TfIdfVectorizer",
            &["x"],
            &["y"],
            vec![ais("ngram_indexes", &[0, 1, 2, 3, 4, 5, 6])],
        );
        assert_eq!(
            run(tf_idf_vectorizer, &n, 9, &[Some(&x)])[0].ty,
            t(DataType::Float, &[2, 7])
        );
        let x = Info::of(t(DataType::Uint8, &[100]));
        let n = node(
            "ImageDecoder",
            &["x"],
            &["y"],
            vec![astr("pixel_format", "Grayscale")],
        );
        assert_eq!(
            run(image_decoder, &n, 20, &[Some(&x)])[0].ty,
            t(DataType::Uint8, &[-1, -1, 1])
        );
    }
}
