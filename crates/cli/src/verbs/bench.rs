//! `onnx-doctor bench MODEL [--input NAME=FILE]... [--input-dir DIR] [--random-inputs --dim NAME=N]
//! [--runs N] [--warmup N] [--threads T] [--backend native|ort|tract] [--profile] [--format json]`
//!
//! Times a model on one backend: the load (decode + session creation + shape specialisation),
//! then `--warmup` untimed runs, then `--runs` timed runs on the same inputs. Reports min /
//! median / p90 / p99 / max / mean latency, throughput, peak RSS (VmHWM) and load time. The
//! peers (`ort`, `tract`) exist only in builds with the cargo feature of the same name.
//! `--profile` (native backend) also times every step of the timed runs and reports the time
//! per op type (a step with folded nodes counts as e.g. `Conv+Add+Relu`) and the slowest nodes.

use crate::feed::{self, InputArgs};
use crate::format::Format;
use anyhow::{bail, Context, Result};
use engine::backend::{self, BackendKind};
use engine::Value;
use onnx_ir::Model;
use serde_json::json;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BackendArg {
    /// Our engine.
    #[default]
    Native,
    /// onnxruntime, loaded at run time (build with `--features ort`).
    Ort,
    /// tract (build with `--features tract`).
    Tract,
}

impl BackendArg {
    pub(crate) fn kind(self) -> BackendKind {
        match self {
            BackendArg::Native => BackendKind::Native,
            BackendArg::Ort => BackendKind::Ort,
            BackendArg::Tract => BackendKind::Tract,
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx file.
    pub model: PathBuf,
    /// Inputs; without any of these flags, every input is random (as with --random-inputs).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Timed runs.
    #[arg(long = "runs", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Untimed runs before the timed ones.
    #[arg(long = "warmup", default_value_t = 2)]
    pub warmup: u64,
    /// Intra-op threads.
    #[arg(long = "threads", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub threads: u64,
    /// Which engine runs the model.
    #[arg(long = "backend", value_enum, default_value_t)]
    pub backend: BackendArg,
    /// Also report where the time goes: per op type and the slowest nodes (native backend).
    #[arg(long = "profile")]
    pub profile: bool,
    #[arg(long = "format", value_enum, default_value_t)]
    pub format: Format,
}

/// Latency statistics over the timed runs, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    pub min: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    /// Timed runs per second of timed running.
    pub throughput: f64,
}

impl Stats {
    /// `samples` in milliseconds, at least one. Percentiles interpolate linearly between the two
    /// nearest ranks (numpy's default), so min <= median <= p90 <= p99 <= max always holds.
    pub fn of(samples: &[f64]) -> Stats {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            let pos = p / 100.0 * (s.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
        };
        let total: f64 = s.iter().sum();
        Stats {
            min: s[0],
            median: pct(50.0),
            p90: pct(90.0),
            p99: pct(99.0),
            max: s[s.len() - 1],
            mean: total / s.len() as f64,
            throughput: if total > 0.0 {
                s.len() as f64 / (total / 1e3)
            } else {
                f64::INFINITY
            },
        }
    }
}

/// The process's peak resident set size in MiB (`VmHWM` of /proc/self/status; Linux only).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// A one-line progress report on stderr, shown only on a terminal and only once the whole run
/// has taken more than two seconds.
struct Progress {
    start: Instant,
    last: Option<Instant>,
    enabled: bool,
    shown: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            start: Instant::now(),
            last: None,
            enabled: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn update(&mut self, what: &str, done: u64, total: u64) {
        if !self.enabled || self.start.elapsed() < Duration::from_secs(2) {
            return;
        }
        if self
            .last
            .is_some_and(|l| l.elapsed() < Duration::from_millis(100))
            && done < total
        {
            return;
        }
        self.last = Some(Instant::now());
        self.shown = true;
        let width = 30;
        let filled = (done * width / total.max(1)) as usize;
        let bar: String = "#".repeat(filled) + &"-".repeat(width as usize - filled);
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r{what:<7} [{bar}] {done}/{total}  {:.1} s",
            self.start.elapsed().as_secs_f64()
        );
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.shown {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r{:60}\r", "");
            let _ = err.flush();
        }
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let file = args.model.display().to_string();
    let kind = args.backend.kind();
    if !kind.compiled() {
        // Before reading anything: the fix is a rebuild, whatever the model.
        bail!(
            "{}",
            engine::backend::BackendError::NotCompiled {
                name: kind.name(),
                feature: kind.feature().unwrap_or_default(),
            }
        );
    }
    let threads = usize::try_from(args.threads).unwrap_or(usize::MAX);

    let load_start = Instant::now();
    let model = Model::load(&args.model)?;
    let load_decode = load_start.elapsed();
    let specs = engine::input_specs(model.graph());

    let mut input_args = args.inputs;
    if input_args.is_empty() {
        input_args.random_inputs = true;
    }
    let inputs = feed::load_for(&input_args, &specs, Vec::new()).with_context(|| file.clone())?;
    for spec in &specs {
        match inputs.iter().find(|(n, _)| n == &spec.name) {
            Some((_, v)) => {
                engine::check_input(spec, v).with_context(|| file.clone())?;
            }
            None if !spec.has_initializer => bail!(
                "{file}: input '{}' ({}) is not given: use --input {}=FILE, --input-dir or --random-inputs",
                spec.name,
                spec.ty,
                spec.name
            ),
            None => {}
        }
    }

    // A kernel bug must surface as an error, not as a panic trace.
    std::panic::set_hook(Box::new(|_| {}));
    let open_start = Instant::now();
    let mut backend = backend::open(kind, &args.model, model, threads)
        .with_context(|| format!("{file}: cannot open the model on backend '{}'", kind.name()))?;
    backend
        .prepare(&inputs)
        .with_context(|| format!("{file}: backend '{}'", kind.name()))?;
    let load = load_decode + open_start.elapsed();
    if backend.threads() < threads {
        eprintln!(
            "note: the {} backend runs on {} thread(s); --threads {threads} was asked",
            backend.name(),
            backend.threads()
        );
    }

    let mut progress = Progress::new();
    let total = args.warmup + args.runs;
    let run_once = |backend: &mut Box<dyn engine::backend::Backend>, i: u64| -> Result<Duration> {
        let t = Instant::now();
        let out = backend.run(&inputs);
        let elapsed = t.elapsed();
        out.with_context(|| format!("{file}: run {} failed on backend '{}'", i + 1, kind.name()))?;
        Ok(elapsed)
    };
    for i in 0..args.warmup {
        progress.update("warmup", i + 1, total);
        run_once(&mut backend, i)?;
    }
    if args.profile && !backend.enable_profile() {
        bail!(
            "--profile: the {} backend cannot time its steps (use --backend native)",
            backend.name()
        );
    }
    let mut samples = Vec::with_capacity(args.runs as usize);
    for i in 0..args.runs {
        progress.update("bench", args.warmup + i + 1, total);
        samples.push(run_once(&mut backend, args.warmup + i)?.as_secs_f64() * 1e3);
    }
    progress.finish();
    let profile = args
        .profile
        .then(|| Profile::of(&backend.take_profile(), args.runs));
    let stats = Stats::of(&samples);
    let rss = peak_rss_mib();
    let load_ms = load.as_secs_f64() * 1e3;

    match args.format {
        Format::Json => {
            let doc = json!({
                "model": file,
                "backend": kind.name(),
                "threads": threads,
                "threads_effective": backend.threads(),
                "runs": args.runs,
                "warmup": args.warmup,
                "load_ms": load_ms,
                "min_ms": stats.min,
                "median_ms": stats.median,
                "mean_ms": stats.mean,
                "p90_ms": stats.p90,
                "p99_ms": stats.p99,
                "max_ms": stats.max,
                "throughput_per_s": stats.throughput,
                "peak_rss_mib": rss,
                "inputs": inputs.iter().map(|(n, v)| input_json(n, v)).collect::<Vec<_>>(),
                "profile": profile.as_ref().map(Profile::json),
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Format::Human => {
            println!(
                "{file}: backend {}, {} thread(s), {} runs after {} warm-up",
                kind.name(),
                backend.threads(),
                args.runs,
                args.warmup
            );
            println!("  load        {load_ms:10.3} ms");
            println!(
                "  latency     min {:.3}  median {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}  mean {:.3} ms",
                stats.min, stats.median, stats.p90, stats.p99, stats.max, stats.mean
            );
            println!("  throughput  {:10.2} runs/s", stats.throughput);
            match rss {
                Some(r) => println!("  peak RSS    {r:10.1} MiB"),
                None => println!("  peak RSS    unknown (no /proc/self/status)"),
            }
            if let Some(p) = &profile {
                p.print();
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Step times of the timed runs, per run, grouped by op type and by node.
struct Profile {
    /// (ops, ms per run, steps per run), slowest first.
    ops: Vec<(String, f64, f64)>,
    /// (node, ops, ms per run), slowest first.
    nodes: Vec<(String, String, f64)>,
    total_ms: f64,
}

impl Profile {
    fn of(steps: &[engine::backend::ProfiledStep], runs: u64) -> Profile {
        let runs = runs.max(1) as f64;
        let mut ops: Vec<(String, f64, f64)> = Vec::new();
        let mut nodes: Vec<(String, String, f64)> = Vec::new();
        for s in steps {
            let ms = s.seconds * 1e3 / runs;
            match ops.iter_mut().find(|o| o.0 == s.ops) {
                Some(o) => {
                    o.1 += ms;
                    o.2 += 1.0 / runs;
                }
                None => ops.push((s.ops.clone(), ms, 1.0 / runs)),
            }
            match nodes.iter_mut().find(|n| n.0 == s.node) {
                Some(n) => n.2 += ms,
                None => nodes.push((s.node.clone(), s.ops.clone(), ms)),
            }
        }
        ops.sort_by(|a, b| b.1.total_cmp(&a.1));
        nodes.sort_by(|a, b| b.2.total_cmp(&a.2));
        let total_ms = ops.iter().map(|o| o.1).sum();
        Profile {
            ops,
            nodes,
            total_ms,
        }
    }

    fn print(&self) {
        let share = |ms: f64| 100.0 * ms / self.total_ms.max(f64::MIN_POSITIVE);
        println!(
            "  time per op type (ms per run, share of the steps' {:.3} ms):",
            self.total_ms
        );
        for (op, ms, n) in self.ops.iter().take(20) {
            println!(
                "    {op:<32} {ms:9.3} ms  {:5.1} %  {n:>4.0} steps",
                share(*ms)
            );
        }
        if self.ops.len() > 20 {
            println!(
                "    ... {} more op types (--format json lists all)",
                self.ops.len() - 20
            );
        }
        println!("  slowest nodes:");
        for (node, op, ms) in self.nodes.iter().take(10) {
            println!("    {ms:9.3} ms  {:5.1} %  {node} ({op})", share(*ms));
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "total_ms": self.total_ms,
            "ops": self.ops.iter().map(|(op, ms, n)| json!({"ops": op, "ms": ms, "steps": n})).collect::<Vec<_>>(),
            "nodes": self.nodes.iter().map(|(node, op, ms)| json!({"node": node, "ops": op, "ms": ms})).collect::<Vec<_>>(),
        })
    }
}

fn input_json(name: &str, v: &Value) -> serde_json::Value {
    match v {
        Value::Tensor(t) => json!({"name": name, "dtype": t.dtype().name(), "shape": t.shape()}),
        other => json!({"name": name, "kind": other.describe()}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_and_stay_ordered() {
        let s = Stats::of(&[4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!((s.min, s.median, s.max, s.mean), (1.0, 3.0, 5.0, 3.0));
        assert!((s.p90 - 4.6).abs() < 1e-12, "{}", s.p90);
        assert!((s.p99 - 4.96).abs() < 1e-12, "{}", s.p99);
        assert!((s.throughput - 5.0 / 0.015).abs() < 1e-9);
        let one = Stats::of(&[2.5]);
        assert_eq!(
            (one.min, one.median, one.p99, one.max),
            (2.5, 2.5, 2.5, 2.5)
        );
    }

    #[test]
    fn peak_rss_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let r = peak_rss_mib().expect("VmHWM");
            assert!(r > 0.0);
        }
    }
}
