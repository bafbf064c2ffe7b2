//! Times a model on the native engine: load once, warm up, run N times, print the median.
//!
//! `cargo run --release -p engine --example time_model -- MODEL [RUNS] [THREADS] [--profile]`
//!
//! Every float input gets seeded pseudo-random values (symbolic dims = 1). `--profile` then
//! times each node alone on the captured values and prints the total per op type.

use engine::{Capture, Session, Value};
use onnx_ir::{Dim, Model};
use std::collections::HashMap;
use std::time::Instant;
use tensor::Tensor;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: time_model MODEL [RUNS] [THREADS] [--profile]")?;
    let runs: usize = args.get(1).map_or(Ok(10), |s| s.parse())?;
    let threads: usize = args.get(2).map_or(Ok(1), |s| s.parse())?;
    let profile = args.iter().any(|a| a == "--profile");
    let model = Model::load(path)?;
    let mut session = Session::new(model)?;
    session.set_threads(threads)?;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut inputs = Vec::new();
    for spec in session.inputs().into_iter().filter(|s| !s.has_initializer) {
        let shape: Vec<usize> = spec
            .ty
            .0
            .shape()
            .unwrap_or(&[])
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n as usize,
                _ => 1,
            })
            .collect();
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
            })
            .collect();
        inputs.push((
            spec.name.clone(),
            Value::Tensor(Tensor::from_vec(shape, data)?),
        ));
    }
    session.run(inputs.clone(), &Capture::None)?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        session.run(inputs.clone(), &Capture::None)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{path}: threads {threads} median {:.2} ms (min {:.2}, max {:.2}, {runs} runs; {} nodes fused)",
        times[runs / 2],
        times[0],
        times[runs - 1],
        session.fused_nodes()
    );
    if profile {
        let out = session.run(inputs.clone(), &Capture::All)?;
        let mut values: HashMap<String, Value> = out.captured.into_iter().collect();
        values.extend(inputs);
        for t in &session.model().graph().initializer {
            values.insert(
                t.name().to_string(),
                Value::Tensor(Tensor::from_proto(t)?.aligned()),
            );
        }
        let g = session.model().graph();
        let mut per_op: HashMap<String, (f64, usize)> = HashMap::new();
        let mut slowest: Vec<(f64, String)> = Vec::new();
        for i in session.schedule()? {
            let node = &g.node[i];
            let ins: Vec<Option<Value>> =
                node.input.iter().map(|n| values.get(n).cloned()).collect();
            let t = Instant::now();
            for _ in 0..3 {
                session.run_one(node, ins.clone())?;
            }
            let ms = t.elapsed().as_secs_f64() * 1e3 / 3.0;
            let shapes: Vec<String> = ins
                .iter()
                .map(|v| v.as_ref().map_or("-".into(), Value::describe))
                .collect();
            slowest.push((ms, format!("{} {}", node.op_type(), shapes.join(" "))));
            let e = per_op.entry(node.op_type().to_string()).or_default();
            e.0 += ms;
            e.1 += 1;
        }
        let mut v: Vec<_> = per_op.into_iter().collect();
        v.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
        for (op, (ms, n)) in v {
            println!("  {op:<24} {ms:>9.2} ms  ({n} nodes)");
        }
        slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
        println!("slowest nodes:");
        for (ms, what) in slowest.iter().take(12) {
            println!("  {ms:>8.2} ms  {what}");
        }
    }
    Ok(())
}
