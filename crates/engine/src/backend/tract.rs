//! tract as a peer backend (cargo feature `tract`): `tract-onnx` parses the model when the
//! backend is opened; [`Backend::prepare`] fixes every input's type and shape from the given
//! values, types the model and optimises it for them (tract specialises on shapes), so that work
//! is counted as loading, not as the first run. Intra-op threads come from tract's own rayon
//! pool (`tract-linalg`'s `multithread-mm`); 1 thread runs everything inline.

use super::{tensor_input, unsupported_type, Backend, BackendError};
use crate::Value;
use std::path::Path;
use tensor::{DataType, Tensor};
use tract_linalg::multithread::Executor;
use tract_onnx::prelude::{
    DatumType, Framework, InferenceFact, InferenceModel, InferenceModelExt, IntoTValue, RunOptions,
    Runtime, State, TValue, TVec,
};
use tract_onnx::tract_core::internal::DefaultRuntime;

const NAME: &str = "tract";

fn peer(reason: impl std::fmt::Display) -> BackendError {
    BackendError::Peer {
        backend: NAME,
        reason: reason.to_string(),
    }
}

/// Per input: element type and shape.
type Signature = Vec<(DatumType, Vec<usize>)>;

/// A model in tract: parsed at open, typed and optimised for one input signature at a time.
pub struct TractBackend {
    file: String,
    model: InferenceModel,
    /// tract's inputs (graph order, initializers excluded) by name.
    input_names: Vec<String>,
    output_names: Vec<String>,
    threads: usize,
    executor: Executor,
    /// The last signature prepared, and a state to run its plan in.
    prepared: Option<(Signature, Box<dyn State>)>,
}

impl TractBackend {
    pub fn new(
        path: &Path,
        model: &onnx_ir::Model,
        threads: usize,
    ) -> Result<TractBackend, BackendError> {
        let file = path.display().to_string();
        let parsed = tract_onnx::onnx()
            .model_for_path(path)
            .map_err(|e| peer(format!("{file}: {e:#}")))?;
        let input_names = parsed
            .input_outlets()
            .map_err(|e| peer(format!("{file}: {e:#}")))?
            .iter()
            .map(|o| parsed.node(o.node).name.clone())
            .collect();
        let output_names = model
            .graph()
            .output
            .iter()
            .map(|o| o.name().to_string())
            .collect();
        let threads = threads.max(1);
        let executor = if threads > 1 {
            Executor::multithread(threads)
        } else {
            Executor::SingleThread
        };
        Ok(TractBackend {
            file,
            model: parsed,
            input_names,
            output_names,
            threads,
            executor,
            prepared: None,
        })
    }

    /// Our inputs as tract tensors, in tract's input order.
    fn convert(
        &self,
        inputs: &[(String, Value)],
    ) -> Result<Vec<tract_onnx::prelude::Tensor>, BackendError> {
        self.input_names
            .iter()
            .map(|name| {
                let (_, v) = inputs
                    .iter()
                    .find(|(n, _)| n == name)
                    .ok_or_else(|| peer(format!("{}: input '{name}' was not given", self.file)))?;
                to_tract(name, tensor_input(NAME, name, v)?)
            })
            .collect()
    }

    fn prepare_for(
        &mut self,
        signature: Signature,
        tensors: &[tract_onnx::prelude::Tensor],
    ) -> Result<(), BackendError> {
        let mut model = self.model.clone();
        for (i, t) in tensors.iter().enumerate() {
            model
                .set_input_fact(i, InferenceFact::dt_shape_from_tensor(t))
                .map_err(|e| peer(format!("{}: input {i}: {e:#}", self.file)))?;
        }
        let typed = model
            .into_typed()
            .map_err(|e| peer(format!("{}: typing the model: {e:#}", self.file)))?;
        let options = RunOptions {
            executor: Some(self.executor.clone()),
            ..Default::default()
        };
        let runnable = DefaultRuntime
            .prepare_with_options(typed, &options)
            .map_err(|e| peer(format!("{}: optimising the model: {e:#}", self.file)))?;
        let state = runnable
            .spawn()
            .map_err(|e| peer(format!("{}: {e:#}", self.file)))?;
        self.prepared = Some((signature, state));
        Ok(())
    }
}

fn signature(tensors: &[tract_onnx::prelude::Tensor]) -> Signature {
    tensors
        .iter()
        .map(|t| (t.datum_type(), t.shape().to_vec()))
        .collect()
}

impl Backend for TractBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn threads(&self) -> usize {
        self.threads
    }

    fn prepare(&mut self, inputs: &[(String, Value)]) -> Result<(), BackendError> {
        let tensors = self.convert(inputs)?;
        self.prepare_for(signature(&tensors), &tensors)
    }

    fn run(&mut self, inputs: &[(String, Value)]) -> Result<Vec<(String, Value)>, BackendError> {
        let tensors = self.convert(inputs)?;
        let sig = signature(&tensors);
        if self.prepared.as_ref().is_none_or(|(s, _)| *s != sig) {
            self.prepare_for(sig, &tensors)?;
        }
        let Some((_, state)) = self.prepared.as_mut() else {
            unreachable!("prepared just above")
        };
        let feed: TVec<TValue> = tensors.into_iter().map(|t| t.into_tvalue()).collect();
        let outputs = state
            .run(feed)
            .map_err(|e| peer(format!("{}: run failed: {e:#}", self.file)))?;
        if outputs.len() != self.output_names.len() {
            return Err(peer(format!(
                "{}: tract returned {} outputs, the graph declares {}",
                self.file,
                outputs.len(),
                self.output_names.len()
            )));
        }
        let mut result = Vec::with_capacity(outputs.len());
        for (name, t) in self.output_names.iter().zip(outputs.iter()) {
            result.push((name.clone(), Value::Tensor(from_tract(name, t)?)));
        }
        Ok(result)
    }
}

/// Our tensor as a tract tensor (copied).
fn to_tract(name: &str, t: &Tensor) -> Result<tract_onnx::prelude::Tensor, BackendError> {
    fn one<T>(t: &Tensor) -> Result<tract_onnx::prelude::Tensor, BackendError>
    where
        T: tensor::Element + tract_onnx::prelude::Datum,
    {
        let data = t.to_vec::<T>().map_err(peer)?;
        tract_onnx::prelude::Tensor::from_shape(t.shape(), &data)
            .map_err(|e| peer(format!("{e:#}")))
    }
    match t.dtype() {
        DataType::Float => one::<f32>(t),
        DataType::Double => one::<f64>(t),
        DataType::Float16 => one::<half::f16>(t),
        DataType::Int64 => one::<i64>(t),
        DataType::Int32 => one::<i32>(t),
        DataType::Int8 => one::<i8>(t),
        DataType::Uint8 => one::<u8>(t),
        DataType::Bool => one::<bool>(t),
        other => Err(unsupported_type(NAME, name, other)),
    }
}

/// A tract tensor as ours (copied, whatever its strides).
fn from_tract(name: &str, t: &tract_onnx::prelude::Tensor) -> Result<Tensor, BackendError> {
    fn one<T>(t: &tract_onnx::prelude::Tensor) -> Result<Tensor, BackendError>
    where
        T: tensor::Element + tract_onnx::prelude::Datum,
    {
        let view = t
            .to_plain_array_view::<T>()
            .map_err(|e| peer(format!("{e:#}")))?;
        Tensor::from_vec(t.shape().to_vec(), view.iter().copied().collect()).map_err(peer)
    }
    match t.datum_type() {
        DatumType::F32 => one::<f32>(t),
        DatumType::F64 => one::<f64>(t),
        DatumType::F16 => one::<half::f16>(t),
        DatumType::I64 => one::<i64>(t),
        DatumType::I32 => one::<i32>(t),
        DatumType::I8 => one::<i8>(t),
        DatumType::U8 => one::<u8>(t),
        DatumType::Bool => one::<bool>(t),
        other => Err(unsupported_type(NAME, name, format!("{other:?}"))),
    }
}
