//! Model inputs from the command line, shared by `run` (and the verbs built on it):
//! `--input NAME=FILE` (`.npy` or `.pb`), `--input-dir DIR` (`input_<i>.pb` in graph-input order,
//! the ONNX test-data layout), `--random-inputs` with `--dim NAME=N` for symbolic dims.

use anyhow::{bail, Context, Result};
use engine::{InputSpec, Session, Value};
use onnx_ir::{Dim, ElemType, ValueType};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tensor::{DataType, Tensor};

#[derive(clap::Args, Debug, Default, Clone)]
pub struct InputArgs {
    /// A graph input from a file: NAME=FILE.npy or NAME=FILE.pb (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = parse_named_path)]
    pub input: Vec<(String, PathBuf)>,
    /// A directory with input_0.pb, input_1.pb, ... in graph-input order (ONNX test-data layout).
    #[arg(long = "input-dir", value_name = "DIR")]
    pub input_dir: Option<PathBuf>,
    /// Fill every input not given otherwise with seeded random values.
    #[arg(long = "random-inputs")]
    pub random_inputs: bool,
    /// Size of a symbolic dim for --random-inputs: NAME=N (repeatable). Unnamed dims default to 1.
    #[arg(long = "dim", value_name = "NAME=N", value_parser = parse_dim)]
    pub dim: Vec<(String, usize)>,
    /// Seed for --random-inputs.
    #[arg(long = "seed", default_value_t = 0)]
    pub seed: u64,
}

fn parse_named_path(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok((n.to_string(), PathBuf::from(p))),
        _ => Err(format!("expected NAME=FILE, got '{s}'")),
    }
}

fn parse_dim(s: &str) -> Result<(String, usize), String> {
    let (n, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=N, got '{s}'"))?;
    let v = v
        .parse::<usize>()
        .map_err(|_| format!("expected NAME=N with N a non-negative integer, got '{s}'"))?;
    Ok((n.to_string(), v))
}

/// Reads one input file for `spec`.
fn read_file(spec: &InputSpec, path: &Path) -> Result<Value> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let v = match ext {
        "npy" => Value::Tensor(
            tensor::npy::read(path).with_context(|| format!("input '{}'", spec.name))?,
        ),
        "pb" => engine::io::read_pb(path, &spec.ty.0)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("input '{}'", spec.name))?,
        _ => bail!(
            "input '{}': {} must be a .npy or .pb file",
            spec.name,
            path.display()
        ),
    };
    Ok(v)
}

/// The inputs the flags describe, checked by name; every input the model needs must be covered.
pub fn load(args: &InputArgs, session: &Session) -> Result<Vec<(String, Value)>> {
    load_over(args, session, Vec::new())
}

impl InputArgs {
    /// Whether any input source was given.
    pub fn is_empty(&self) -> bool {
        self.input.is_empty() && self.input_dir.is_none() && !self.random_inputs
    }

    /// These flags, or `--random-inputs` (with a note on stderr) when none was given: for verbs
    /// that can run without the user's inputs (`compare --against/--backends`).
    pub fn or_random(&self) -> std::borrow::Cow<'_, InputArgs> {
        if self.is_empty() {
            eprintln!("note: no inputs given; using seeded random inputs (--random-inputs)");
            std::borrow::Cow::Owned(InputArgs {
                random_inputs: true,
                dim: self.dim.clone(),
                seed: self.seed,
                ..InputArgs::default()
            })
        } else {
            std::borrow::Cow::Borrowed(self)
        }
    }
}

/// Like [`load`], starting from `base` values (e.g. inputs stored with a reference), which the
/// flags override; inputs of `base` the model does not have are ignored.
pub fn load_over(
    args: &InputArgs,
    session: &Session,
    base: Vec<(String, Value)>,
) -> Result<Vec<(String, Value)>> {
    load_for(args, &session.inputs(), base)
}

/// Like [`load_over`], for the inputs `specs` describes (see [`engine::input_specs`]): for
/// backends other than the native engine, which need no [`Session`].
pub fn load_for(
    args: &InputArgs,
    specs: &[InputSpec],
    base: Vec<(String, Value)>,
) -> Result<Vec<(String, Value)>> {
    let mut out: HashMap<String, Value> = base
        .into_iter()
        .filter(|(n, _)| specs.iter().any(|s| &s.name == n))
        .collect();
    if let Some(dir) = &args.input_dir {
        let given = engine::io::read_input_dir(dir, specs)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("--input-dir {}", dir.display()))?;
        out.extend(given);
    }
    for (name, path) in &args.input {
        let spec = specs.iter().find(|s| &s.name == name).with_context(|| {
            format!(
                "--input {name}=...: the model has no input '{name}' (inputs: {})",
                specs
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        out.insert(name.clone(), read_file(spec, path)?);
    }
    if args.random_inputs {
        let dims: HashMap<&str, usize> = args.dim.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let mut rng = SplitMix(args.seed);
        for spec in specs.iter().filter(|s| !s.has_initializer) {
            if out.contains_key(&spec.name) {
                continue;
            }
            let v = random_value(spec, &dims, &mut rng)?;
            out.insert(spec.name.clone(), v);
        }
    }
    // Keep graph-input order for reproducible runs.
    let mut ordered = Vec::new();
    for s in specs {
        if let Some(v) = out.remove(&s.name) {
            ordered.push((s.name.clone(), v));
        }
    }
    Ok(ordered)
}

/// A small deterministic generator (SplitMix64) for random inputs.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn random_value(
    spec: &InputSpec,
    dims: &HashMap<&str, usize>,
    rng: &mut SplitMix,
) -> Result<Value> {
    let ValueType::Tensor { elem, shape } = &spec.ty.0 else {
        bail!(
            "input '{}': --random-inputs can only make tensors, this input is {}",
            spec.name,
            spec.ty
        );
    };
    let ElemType::Known(dtype) = elem else {
        bail!("input '{}': its element type is not declared", spec.name);
    };
    let Some(shape) = shape else {
        bail!(
            "input '{}': its rank is not declared; give it with --input",
            spec.name
        );
    };
    let mut sizes = Vec::with_capacity(shape.len());
    for d in shape {
        sizes.push(match d {
            Dim::Fixed(n) => usize::try_from(*n).unwrap_or(0),
            Dim::Sym(s) => match dims.get(s.as_str()) {
                Some(&n) => n,
                None => {
                    eprintln!(
                        "note: input '{}': dim '{s}' set to 1 (give --dim {s}=N to choose)",
                        spec.name
                    );
                    1
                }
            },
            Dim::Unknown => 1,
        });
    }
    let n: usize = sizes.iter().product();
    let t =
        random_tensor(*dtype, sizes, n, rng).with_context(|| format!("input '{}'", spec.name))?;
    Ok(Value::Tensor(t))
}

/// Floats uniform in [-1, 1), integers in [0, 10), booleans fair.
pub fn random_tensor(
    dtype: DataType,
    shape: Vec<usize>,
    n: usize,
    rng: &mut SplitMix,
) -> Result<Tensor> {
    let mut f = || rng.next_f64() * 2.0 - 1.0;
    let t = match dtype {
        DataType::Float => Tensor::from_vec(shape, (0..n).map(|_| f() as f32).collect())?,
        DataType::Double => Tensor::from_vec(shape, (0..n).map(|_| f()).collect())?,
        DataType::Float16 => {
            Tensor::from_vec(shape, (0..n).map(|_| half::f16::from_f64(f())).collect())?
        }
        DataType::Bfloat16 => {
            Tensor::from_vec(shape, (0..n).map(|_| half::bf16::from_f64(f())).collect())?
        }
        DataType::Bool => Tensor::from_vec(shape, (0..n).map(|_| f() > 0.0).collect())?,
        DataType::Int64 => Tensor::from_vec(
            shape,
            (0..n).map(|_| (rng.next_u64() % 10) as i64).collect(),
        )?,
        DataType::Int32 => Tensor::from_vec(
            shape,
            (0..n).map(|_| (rng.next_u64() % 10) as i32).collect(),
        )?,
        DataType::Int8 => {
            Tensor::from_vec(shape, (0..n).map(|_| (rng.next_u64() % 10) as i8).collect())?
        }
        DataType::Uint8 => {
            Tensor::from_vec(shape, (0..n).map(|_| (rng.next_u64() % 10) as u8).collect())?
        }
        other => bail!("--random-inputs cannot make {other} values yet; give it with --input"),
    };
    Ok(t)
}
