//! `--input-shape NAME=1x3x224x224`: fixes a graph input's dims for shape inference.

use anyhow::{bail, Result};
use std::collections::HashMap;

/// Parses one `NAME=DIMS` argument (`DIMS` is `x`-separated non-negative integers; a scalar is `NAME=`).
pub fn parse(arg: &str) -> Result<(String, Vec<i64>), String> {
    let (name, dims) = arg
        .split_once('=')
        .ok_or_else(|| format!("'{arg}': expected NAME=DIMS, e.g. input=1x3x224x224"))?;
    if name.is_empty() {
        return Err(format!("'{arg}': the input name is empty"));
    }
    let dims = if dims.is_empty() {
        Vec::new()
    } else {
        dims.split('x')
            .map(|d| {
                d.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|&n| n >= 0)
                    .ok_or_else(|| format!("'{arg}': dim '{d}' is not a non-negative integer"))
            })
            .collect::<Result<_, _>>()?
    };
    Ok((name.to_string(), dims))
}

/// Checks every named input exists and has the given rank; returns name → dims.
pub fn resolve(
    model: &onnx_ir::Model,
    args: &[(String, Vec<i64>)],
) -> Result<HashMap<String, Vec<i64>>> {
    let mut out = HashMap::new();
    for (name, dims) in args {
        let Some(input) = model.graph().input.iter().find(|v| v.name() == name) else {
            let names: Vec<&str> = model.graph().input.iter().map(|v| v.name()).collect();
            bail!(
                "--input-shape {name}=...: the model has no graph input '{name}' (inputs: {})",
                names.join(", ")
            );
        };
        let declared = onnx_ir::ValueType::from_proto(input.r#type.as_ref());
        if let Some(shape) = declared.shape() {
            if shape.len() != dims.len() {
                bail!("--input-shape {name}: {} dims given, but '{name}' is declared {declared} (rank {})", dims.len(), shape.len());
            }
            for (k, (d, &n)) in shape.iter().zip(dims).enumerate() {
                if let onnx_ir::Dim::Fixed(f) = d {
                    if *f != n {
                        bail!(
                            "--input-shape {name}: dim {k} is fixed to {f} in the model, {n} given"
                        );
                    }
                }
            }
        }
        out.insert(name.clone(), dims.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(
            parse("x=1x3x224x224").unwrap(),
            ("x".to_string(), vec![1, 3, 224, 224])
        );
        assert_eq!(parse("s=").unwrap(), ("s".to_string(), vec![]));
        assert!(parse("x").unwrap_err().contains("NAME=DIMS"));
        assert!(parse("x=1x-3").unwrap_err().contains("'-3'"));
        assert!(parse("=1").is_err());
    }
}
