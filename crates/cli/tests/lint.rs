//! `onnx-doctor lint`, end to end on real files.

mod common;

use common::{run, stderr, stdout};

const HAZARDS: &str = "crates/source-lint/tests/fixtures/hazards.py";

#[test]
fn human_output_of_the_hazard_fixture() {
    let o = run(&["lint", HAZARDS]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn json_items_carry_the_documented_fields() {
    let o = run(&["lint", HAZARDS, "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let items = v["diagnostics"].as_array().unwrap();
    assert_eq!(items.len(), 26);
    for d in items {
        assert_eq!(d["file"], HAZARDS);
        assert!(d["line"].as_u64().unwrap() >= 1 && d["column"].as_u64().unwrap() >= 1);
        assert!(d["code"].as_str().unwrap().starts_with("ODL"));
        assert!(["error", "warning", "info"].contains(&d["severity"].as_str().unwrap()));
        assert!(!d["message"].as_str().unwrap().is_empty());
        assert!(
            d.get("fix").is_some(),
            "fix is always present (null when none)"
        );
    }
    let upsample = items.iter().find(|d| d["code"] == "ODL013").unwrap();
    assert_eq!(upsample["fix"]["safe"], true);
    assert_eq!(upsample["fix"]["edits"][0]["content"], "interpolate");
    assert_eq!(v["summary"]["files"], 1);
    insta::assert_json_snapshot!(v);
}

#[test]
fn sarif_output_names_every_rule_it_reports() {
    let o = run(&["lint", HAZARDS, "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let run0 = &v["runs"][0];
    let ids: Vec<&str> = run0["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let results = run0["results"].as_array().unwrap();
    assert_eq!(results.len(), 26);
    for r in results {
        assert!(ids.contains(&r["ruleId"].as_str().unwrap()));
        let region = &r["locations"][0]["physicalLocation"]["region"];
        assert!(region["startLine"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn clean_code_exits_0_and_select_ignore_filter() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.py");
    std::fs::write(
        &clean,
        "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return torch.where(x > 0, x, torch.zeros_like(x)).flatten(1)\n",
    )
    .unwrap();
    let o = run(&["lint", clean.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("All checks passed (1 files)."));

    let o = run(&[
        "lint",
        HAZARDS,
        "--select",
        "ODL013,ODL014",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "warnings and infos only");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let codes: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["ODL014", "ODL013", "ODL014"]);

    let o = run(&["lint", HAZARDS, "--ignore", "ODL0", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["diagnostics"].as_array().unwrap().is_empty());
}

#[test]
fn min_severity_leaves_out_the_lower_findings() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.py");
    std::fs::write(
        &file,
        "import torch\nimport torch.nn.functional as F\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        B, T = x.shape\n        pos = torch.arange(T)\n        up = F.interpolate(x[None], scale_factor=2.0, mode=\"linear\")\n        n = len(x)\n        return x.view(n, -1), pos, up, torch.einsum(\"bt,bt->b\", x, x)\n",
    )
    .unwrap();
    let codes = |min: &str| -> Vec<(String, String)> {
        let o = run(&[
            "lint",
            file.to_str().unwrap(),
            "--no-cache",
            "--format",
            "json",
            "--min-severity",
            min,
        ]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["code"].as_str().unwrap().to_string(),
                    d["severity"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let all = codes("info");
    assert!(all.contains(&("ODL016".into(), "info".into())), "{all:?}");
    assert!(all.contains(&("ODL014".into(), "info".into())), "{all:?}");
    let warnings = codes("warning");
    assert!(warnings.iter().all(|(_, s)| s != "info"), "{warnings:?}");
    assert!(
        warnings.contains(&("ODL016".into(), "error".into())),
        "{warnings:?}"
    );
    assert!(
        warnings.contains(&("ODL009".into(), "warning".into())),
        "{warnings:?}"
    );
    assert_eq!(
        codes("error"),
        [("ODL016".to_string(), "error".to_string())]
    );
}

#[test]
fn fix_applies_safe_fixes_only_and_relints() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.py");
    let src = "\
import torch
import torch.nn.functional as F

class M(torch.nn.Module):
    def forward(self, x, mask):
        x[mask] = 0
        return F.upsample(x, scale_factor=2, mode='bilinear')
";
    std::fs::write(&f, src).unwrap();
    let o = run(&["lint", f.to_str().unwrap(), "--fix"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    // The rename, then (on the re-lint) align_corners made explicit on the new call.
    assert!(out.contains("Fixed 2 findings."), "{out}");
    let fixed = std::fs::read_to_string(&f).unwrap();
    assert!(
        fixed.contains("F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False)"),
        "{fixed}"
    );
    assert!(
        fixed.contains("x[mask] = 0"),
        "unsafe fix must not be applied: {fixed}"
    );
    assert!(
        out.contains("ODL001") && out.contains("unsafe fix"),
        "{out}"
    );
    let o = run(&["lint", f.to_str().unwrap(), "--select", "ODL013"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn a_file_named_alone_reports_what_its_directory_does_also_after_fix() {
    // A pre-commit hook names only the changed helper module: its helpers are model code because
    // the model beside it calls them, before and after `--fix` re-lints it.
    let dir = tempfile::tempdir().unwrap();
    let ops = dir.path().join("ops.py");
    std::fs::write(
        &ops,
        "import torch.nn.functional as F\n\ndef up(x, mask):\n    x[mask] = 0\n    return F.upsample(x, scale_factor=2)\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("model.py"),
        "import torch\nfrom ops import up\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return up(x, x > 0)\n",
    )
    .unwrap();
    let codes = |o: &std::process::Output| -> Vec<(u64, String)> {
        let v: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap();
        assert_eq!(v["summary"]["files"], 1, "only the named file is reported");
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["line"].as_u64().unwrap(),
                    d["code"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let path = ops.to_str().unwrap();
    let o = run(&["lint", path, "--format", "json", "--no-cache"]);
    assert_eq!(
        codes(&o),
        [(4, "ODL001".to_string()), (5, "ODL013".to_string())]
    );
    let o = run(&["lint", path, "--fix", "--format", "json", "--no-cache"]);
    assert_eq!(codes(&o), [(4, "ODL001".to_string())]);
    assert!(std::fs::read_to_string(&ops)
        .unwrap()
        .contains("F.interpolate("));
}

#[test]
fn fix_re_lints_the_files_of_the_first_pass() {
    // `lint pkg --fix`: after the fix, `pkg/ops.py` is checked again with the files the walk
    // found (its caller in `pkg/models/`), not with what lies outside `pkg` (`model.py`, which
    // calls `keep`).
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("pkg/models")).unwrap();
    std::fs::write(root.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(root.join("pkg/models/__init__.py"), "").unwrap();
    std::fs::write(
        root.join("pkg/ops.py"),
        "import torch.nn.functional as F\n\n\ndef up(x, mask):\n    x[mask] = 0\n    return F.upsample(x, scale_factor=2)\n\n\ndef keep(x, mask):\n    x[mask] = 0\n    return x\n",
    )
    .unwrap();
    std::fs::write(
        root.join("pkg/models/net.py"),
        "import torch\nfrom ..ops import up\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return up(x, x > 0)\n",
    )
    .unwrap();
    std::fs::write(
        root.join("model.py"),
        "import torch\nfrom pkg.ops import keep\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return keep(x, x > 0)\n",
    )
    .unwrap();
    let pkg = root.join("pkg");
    let lines = |o: &std::process::Output| -> Vec<(String, u64, String)> {
        let v: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap();
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let file = d["file"].as_str().unwrap();
                let name = file.rsplit('/').next().unwrap().to_string();
                (
                    name,
                    d["line"].as_u64().unwrap(),
                    d["code"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let o = run(&[
        "lint",
        pkg.to_str().unwrap(),
        "--format",
        "json",
        "--no-cache",
    ]);
    assert_eq!(
        lines(&o),
        [
            ("ops.py".to_string(), 5, "ODL001".to_string()),
            ("ops.py".to_string(), 6, "ODL013".to_string())
        ]
    );
    let o = run(&[
        "lint",
        pkg.to_str().unwrap(),
        "--fix",
        "--format",
        "json",
        "--no-cache",
    ]);
    assert_eq!(lines(&o), [("ops.py".to_string(), 5, "ODL001".to_string())]);
}

#[test]
fn a_package_as_the_current_directory_with_a_module_name_twice_finishes() {
    // `lint .` inside a package (`./__init__.py`) whose `model` is defined twice: resolving
    // `from model import Net` climbs to the import root and must stop at `""`.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("old")).unwrap();
    std::fs::write(root.join("__init__.py"), "").unwrap();
    let model = "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n";
    std::fs::write(root.join("model.py"), model).unwrap();
    std::fs::write(root.join("old/model.py"), model).unwrap();
    std::fs::write(
        root.join("export.py"),
        "import torch\nfrom model import Net\nm = Net().eval()\ntorch.onnx.export(m, (torch.zeros(1),), 'm.onnx', opset_version=17)\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_onnx-doctor"))
        .args(["lint", ".", "--no-cache", "--format", "json"])
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            break;
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("lint . did not finish");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn fix_writes_the_file_a_symlink_names_and_refuses_read_only_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("real")).unwrap();
    let src = "import torch\nimport torch.nn.functional as F\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return F.upsample(x, scale_factor=2)\n";
    std::fs::write(root.join("real/model.py"), src).unwrap();
    std::os::unix::fs::symlink("real/model.py", root.join("link.py")).unwrap();
    let link = root.join("link.py");
    let o = run(&["lint", link.to_str().unwrap(), "--fix", "--no-cache"]);
    assert!(stdout(&o).contains("Fixed 1 finding."), "{}", stdout(&o));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let fixed = std::fs::read_to_string(root.join("real/model.py")).unwrap();
    assert!(
        fixed.contains("F.interpolate(x, scale_factor=2)"),
        "{fixed}"
    );

    let ro = root.join("ro.py");
    std::fs::write(&ro, src).unwrap();
    let mut perms = std::fs::metadata(&ro).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&ro, perms).unwrap();
    let o = run(&["lint", ro.to_str().unwrap(), "--fix", "--no-cache"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("not writable"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&ro).unwrap(), src);
}

#[test]
fn noqa_comments_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.py");
    std::fs::write(
        &f,
        "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        a = x.item()  # noqa: ODL004\n        b = x.item()\n        return a + b\n",
    )
    .unwrap();
    let o = run(&["lint", f.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let lines: Vec<u64> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [6]);
}

#[test]
fn directories_respect_gitignore_and_syntax_errors_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("src")).unwrap();
    std::fs::create_dir_all(p.join("out")).unwrap();
    std::fs::write(p.join(".gitignore"), "out/\n").unwrap();
    std::fs::write(
        p.join("src/broken.py"),
        "def forward(self, x)\n    return x\n",
    )
    .unwrap();
    std::fs::write(p.join("out/gen.py"), "def forward(self, x)\n").unwrap();
    let o = run(&["lint", p.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!stderr(&o).contains("panicked"));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let items = v["diagnostics"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["code"], "ODL000");
    assert!(items[0]["file"]
        .as_str()
        .unwrap()
        .ends_with("src/broken.py"));
    assert_eq!(v["summary"]["files"], 1);
}

/// A bad input: exit 2, one line on stderr that names what is wrong, never a panic.
fn assert_input_error(args: &[&str], expect: &[&str]) {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    for e in expect {
        assert!(err.contains(e), "expected '{e}' in: {err}");
    }
    assert!(o.stdout.is_empty());
}

#[test]
fn bad_inputs_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.py");
    assert_input_error(
        &["lint", missing.to_str().unwrap()],
        &["nope.py", "No such file"],
    );
    assert_input_error(
        &["lint", HAZARDS, "--select", "E9"],
        &["unknown rule code 'E9'"],
    );
    let latin = dir.path().join("latin1.py");
    std::fs::write(&latin, b"x = '\xe9'\n").unwrap();
    assert_input_error(
        &["lint", latin.to_str().unwrap()],
        &["latin1.py", "not UTF-8"],
    );
    // Beside files that can be read, they are still reported, then the file that cannot be
    // is named, and the exit is 2 all the same.
    std::fs::write(
        dir.path().join("model.py"),
        "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x.tolist()\n",
    )
    .unwrap();
    let o = run(&[
        "lint",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
        "--no-cache",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["diagnostics"][0]["code"], "ODL004");
    let err = stderr(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(
        err.contains("latin1.py") && err.contains("not UTF-8"),
        "{err}"
    );
}

/// Lints `dir` as JSON with the cache in `cache` (or none).
fn lint_json(dir: &std::path::Path, cache: Option<&std::path::Path>) -> serde_json::Value {
    let mut args = vec!["lint", dir.to_str().unwrap(), "--format", "json"];
    match cache {
        Some(c) => args.extend(["--cache-dir", c.to_str().unwrap()]),
        None => args.push("--no-cache"),
    }
    let o = run(&args);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn the_cache_is_read_for_unchanged_files_and_never_trusted_for_changed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    // A finding that needs the other file (the helper is model code because model.py's
    // forward calls it, with a mask), and one in a file the project pass leaves alone.
    let files = [
        ("ops.py", "import torch\n\ndef fill(x, m):\n    x[m] = 0\n    return x\n"),
        (
            "model.py",
            "import torch\nfrom .ops import fill\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        n = x.sum().item()\n        return fill(x, x > n)\n",
        ),
        (
            "head.py",
            "import torch\n\nclass Head(torch.nn.Module):\n    def forward(self, x):\n        return x.tolist()\n",
        ),
    ];
    // Files changed in the last two seconds are not cached (their time may not tell a second
    // change apart): these were written two hours ago, and each change below an hour ago.
    let hours_ago =
        |h: u64| std::time::SystemTime::now() - std::time::Duration::from_secs(3600 * h);
    let write = |name: &str, text: &str, hours: u64| {
        std::fs::write(src.join(name), text).unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(src.join(name))
            .unwrap();
        f.set_modified(hours_ago(hours)).unwrap();
    };
    for (name, text) in files {
        write(name, text, 2);
    }
    let cache = dir.path().join("cache");
    let fresh = lint_json(&src, None);
    let codes = |v: &serde_json::Value| -> Vec<String> {
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let file = d["file"].as_str().unwrap().rsplit('/').next().unwrap();
                format!("{file}:{}:{}", d["line"], d["code"].as_str().unwrap())
            })
            .collect()
    };
    assert_eq!(
        codes(&fresh),
        ["head.py:5:ODL004", "model.py:6:ODL004", "ops.py:4:ODL001"]
    );
    // The first run writes the cache, the next ones read it: the same answer.
    assert_eq!(lint_json(&src, Some(&cache)), fresh);
    assert_eq!(lint_json(&src, Some(&cache)), fresh);
    let ignore = std::fs::read_to_string(cache.join(".gitignore")).unwrap();
    assert_eq!(ignore.lines().last(), Some("*"));
    let mut stored: Vec<_> = std::fs::read_dir(cache.join("lint"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    stored.sort();
    // `<name>.files.json` (every file's own checks) sorts before `<name>.json` (the index).
    let [entries, index] = &stored[..] else {
        panic!("{stored:?}")
    };
    assert!(entries.to_string_lossy().ends_with(".files.json"));
    let plant = |path: &std::path::Path, from: &str, to: &str| {
        let text = std::fs::read_to_string(path).unwrap();
        let planted = text.replacen(from, to, 1);
        assert_ne!(planted, text, "{from} not in {}", path.display());
        std::fs::write(path, planted).unwrap();
    };
    let has = |v: &serde_json::Value, what: &str| v.to_string().contains(what);
    // Nothing changed: the index answers, as a message planted in it shows...
    plant(index, "`.tolist()` in", "`.tolist()` (planted) in");
    assert!(has(&lint_json(&src, Some(&cache)), "(planted)"));
    // ...until a file changes (same length, one character different).
    let head = files[2].1;
    write(
        "head.py",
        &head.replace("(self, x)", "(self, y)").replace("x.", "y."),
        1,
    );
    let v = lint_json(&src, Some(&cache));
    assert!(!has(&v, "(planted)"), "{v}");
    assert_eq!(v, lint_json(&src, None));
    // A run with a changed file takes the others' checks from the entries: the second check of
    // ops.py (what model.py told it) too, while model.py tells it the same...
    plant(
        entries,
        "writes through a boolean mask",
        "writes (planted) through",
    );
    write("head.py", head, 3);
    assert!(has(&lint_json(&src, Some(&cache)), "(planted)"));
    // ...but not once model.py tells it something else (no mask handed to `fill` any more).
    write(
        "model.py",
        &files[1].1.replace("fill(x, x > n)", "fill(x, n)"),
        1,
    );
    let v = lint_json(&src, Some(&cache));
    assert!(!has(&v, "(planted)"), "{v}");
    assert_eq!(v, lint_json(&src, None));
    // A file changed just now is checked but not stored: the cache answers it no more.
    assert!(std::fs::read_to_string(index).unwrap().contains("head.py"));
    std::fs::write(src.join("head.py"), head).unwrap();
    assert_eq!(lint_json(&src, Some(&cache)), lint_json(&src, None));
    for path in [entries, index] {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.contains("head.py"), "{text}");
    }
    // A corrupt cache is a miss, not an error.
    for path in [entries, index] {
        std::fs::write(path, "{ not json").unwrap();
    }
    assert_eq!(lint_json(&src, Some(&cache)), lint_json(&src, None));
}
