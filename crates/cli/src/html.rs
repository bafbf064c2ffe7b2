//! Self-contained HTML reports (no scripts, no network): tables and an inline SVG plot.

use crate::verbs::compare::{NodeRow, Row};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn cells(r: &Row) -> String {
    match &r.result {
        Ok(s) => format!(
            "<td>{:.3e}</td><td>{:.3e}</td><td>{:.3e}</td><td>{:.6}</td><td>{}</td><td>{}/{}</td>",
            s.max_abs,
            s.max_rel,
            s.p99_abs,
            s.cosine,
            if s.sqnr_db.is_finite() {
                format!("{:.1}", s.sqnr_db)
            } else {
                "∞".into()
            },
            s.out_of_tolerance,
            s.elements
        ),
        Err(e) => format!("<td colspan=6>{}</td>", esc(e)),
    }
}

/// Per-node max abs error on a log scale, one point per compared node; the first divergent node
/// is marked.
fn plot(nodes: &[NodeRow], first: Option<usize>) -> String {
    let (w, h, pad) = (900.0f64, 260.0f64, 40.0f64);
    let vals: Vec<f64> = nodes
        .iter()
        .map(|n| match &n.output.result {
            Ok(s) => (s.max_abs.max(1e-12)).log10(),
            Err(_) => 0.0,
        })
        .collect();
    let lo = vals
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .min(-8.0)
        .floor();
    let hi = vals
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .max(0.0)
        .ceil();
    let x = |i: usize| pad + (w - 2.0 * pad) * (i as f64) / ((nodes.len().max(2) - 1) as f64);
    let y = |v: f64| h - pad - (h - 2.0 * pad) * (v - lo) / (hi - lo).max(1e-9);
    let mut svg = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='11'>"
    );
    let mut e = lo;
    while e <= hi {
        svg.push_str(&format!(
            "<line x1='{pad}' x2='{}' y1='{y:.1}' y2='{y:.1}' stroke='#ddd'/><text x='4' y='{:.1}'>1e{e}</text>",
            w - pad,
            y(e) + 4.0,
            y = y(e)
        ));
        e += 2.0;
    }
    let points: Vec<String> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
        .collect();
    svg.push_str(&format!(
        "<polyline fill='none' stroke='#36c' stroke-width='1.5' points='{}'/>",
        points.join(" ")
    ));
    for (i, v) in vals.iter().enumerate() {
        let color = if Some(i) == first {
            "#d00"
        } else if nodes[i]
            .output
            .result
            .as_ref()
            .is_ok_and(|s| s.out_of_tolerance == 0)
        {
            "#36c"
        } else {
            "#e90"
        };
        svg.push_str(&format!(
            "<circle cx='{:.1}' cy='{:.1}' r='{}' fill='{color}'><title>{} ({}): max abs 1e{:.2}</title></circle>",
            x(i),
            y(*v),
            if Some(i) == first { 5 } else { 2 },
            esc(&nodes[i].name),
            esc(&nodes[i].op),
            v
        ));
    }
    svg.push_str(&format!(
        "<text x='{pad}' y='{}'>node (run order) →</text><text x='{pad}' y='14'>max abs error (log10)</text></svg>",
        h - 8.0
    ));
    svg
}

/// The `compare` report.
pub fn compare_report(
    reference: &str,
    candidate: &str,
    rows: &[Row],
    nodes: &[NodeRow],
    first: Option<usize>,
) -> String {
    let mut h = String::from(
        "<!doctype html><html><head><meta charset='utf-8'><title>onnx-doctor compare</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:right}\
         td:first-child,td:nth-child(2){text-align:left}.bad{background:#fee}.first{background:#fcc;font-weight:bold}</style>\
         </head><body><h1>onnx-doctor compare</h1>",
    );
    h.push_str(&format!(
        "<p>reference: <code>{}</code><br>candidate: <code>{}</code></p><h2>Outputs</h2>\
         <table><tr><th>output</th><th>shape</th><th>max abs</th><th>max rel</th><th>p99 abs</th><th>cosine</th><th>SQNR dB</th><th>bad/all</th></tr>",
        esc(reference),
        esc(candidate)
    ));
    for r in rows {
        let ok = r.result.as_ref().is_ok_and(|s| s.out_of_tolerance == 0);
        h.push_str(&format!(
            "<tr class='{}'><td>{}</td><td>{:?}</td>{}</tr>",
            if ok { "" } else { "bad" },
            esc(&r.name),
            r.shape,
            cells(r)
        ));
    }
    h.push_str("</table>");
    if !nodes.is_empty() {
        h.push_str("<h2>Layerwise</h2>");
        if let Some(f) = first {
            h.push_str(&format!(
                "<p>First divergent node: <b>{}</b> ({}), output <code>{}</code></p>",
                esc(&nodes[f].name),
                esc(&nodes[f].op),
                esc(&nodes[f].output.name)
            ));
            for d in &nodes[f].differences {
                h.push_str(&format!(
                    "<p>differs from the reference model: {}</p>",
                    esc(d)
                ));
            }
        }
        h.push_str(&plot(nodes, first));
        h.push_str("<table><tr><th>#</th><th>node</th><th>op</th><th>max abs</th><th>max rel</th><th>p99 abs</th><th>cosine</th><th>SQNR dB</th><th>bad/all</th></tr>");
        for (i, n) in nodes.iter().enumerate() {
            let class = if Some(i) == first {
                "first"
            } else if n
                .output
                .result
                .as_ref()
                .is_ok_and(|s| s.out_of_tolerance == 0)
            {
                ""
            } else {
                "bad"
            };
            h.push_str(&format!(
                "<tr class='{class}'><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
                n.index,
                esc(&n.name),
                esc(&n.op),
                cells(&n.output)
            ));
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>\n");
    h
}
