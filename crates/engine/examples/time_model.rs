//! Times a model on the native engine: load once, warm up, run N times, print the median.
//!
//! `cargo run --release -p engine --example time_model -- MODEL [RUNS] [THREADS] [--profile]`
//!
//! Every float input gets seeded pseudo-random values (symbolic dims = 1). `--profile` then
//! times each node alone on the captured values and prints the total per op type;
//! `--profile-all` lists every step, not only the 15 slowest.

use engine::{Capture, Session, Value};
use onnx_ir::{Dim, Model};
use std::collections::HashMap;
use std::time::Instant;
use tensor::Tensor;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: time_model MODEL [RUNS] [THREADS] [--profile|--profile-all]")?;
    let runs: usize = args.get(1).map_or(Ok(10), |s| s.parse())?;
    let threads: usize = args.get(2).map_or(Ok(1), |s| s.parse())?;
    let profile = args
        .iter()
        .any(|a| a == "--profile" || a == "--profile-all");
    let shown = if args.iter().any(|a| a == "--profile-all") {
        usize::MAX
    } else {
        15
    };
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
        "{path}: threads {threads} median {:.3} ms (min {:.3}, max {:.3}, {runs} runs; {} nodes fused)",
        times[runs / 2],
        times[0],
        times[runs - 1],
        session.fused_nodes()
    );
    if profile {
        let captured = session.run(inputs.clone(), &Capture::All)?.captured;
        let mut shapes: HashMap<String, String> = captured
            .into_iter()
            .map(|(n, v)| {
                (
                    n,
                    format!(
                        "{:?}",
                        v.as_tensor()
                            .map(|t| t.shape().to_vec())
                            .unwrap_or_default()
                    ),
                )
            })
            .collect();
        for (n, v) in &inputs {
            shapes.insert(
                n.clone(),
                format!(
                    "{:?}",
                    v.as_tensor()
                        .map(|t| t.shape().to_vec())
                        .unwrap_or_default()
                ),
            );
        }
        for t in &session.model().graph().initializer {
            shapes.insert(t.name().to_string(), format!("{:?}", t.dims));
        }
        // Per step of ordinary (fused) runs.
        session.enable_profile();
        for _ in 0..runs {
            session.run(inputs.clone(), &Capture::None)?;
        }
        let steps = session.take_profile();
        let g = session.model().graph();
        let describe = |i: usize| {
            let n = &g.node[i];
            let shapes: Vec<String> = n
                .input
                .iter()
                .filter_map(|v| shapes.get(v).cloned())
                .collect();
            format!("{} {} {}", n.op_type(), shapes.join(" "), n.name())
        };
        let mut per_op: HashMap<String, (f64, usize)> = HashMap::new();
        let mut per_node: HashMap<usize, (f64, Vec<usize>)> = HashMap::new();
        for s in &steps {
            let mut key = g.node[s.node].op_type().to_string();
            for &f in &s.fused {
                key.push('+');
                key.push_str(g.node[f].op_type());
            }
            let e = per_op.entry(key).or_default();
            e.0 += s.seconds * 1e3 / runs as f64;
            e.1 += 1;
            let n = per_node.entry(s.node).or_default();
            n.0 += s.seconds * 1e3 / runs as f64;
            n.1 = s.fused.clone();
        }
        let mut v: Vec<_> = per_op.into_iter().collect();
        v.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
        for (op, (ms, n)) in v.iter().take(25) {
            println!("  {op:<40} {ms:>9.3} ms  ({} steps)", n / runs);
        }
        let mut nodes: Vec<_> = per_node.into_iter().collect();
        nodes.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
        println!("slowest steps:");
        for (i, (ms, fused)) in nodes.iter().take(shown) {
            println!(
                "  {ms:>8.3} ms  {}{}",
                describe(*i),
                if fused.is_empty() {
                    String::new()
                } else {
                    format!(" (+{} fused)", fused.len())
                }
            );
        }
    }
    Ok(())
}
