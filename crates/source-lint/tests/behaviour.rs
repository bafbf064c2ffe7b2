//! Name resolution, noqa, fixes, directory walking and robustness, through the public API.

use source_lint::{
    apply_edits, apply_noqa, discover, lint_files, lint_source, noqa_codes, Selection,
};
use std::path::PathBuf;

fn codes(src: &str) -> Vec<(usize, String)> {
    let lint = lint_source("m.py", src);
    let mut v: Vec<(usize, String)> = apply_noqa(src, lint.findings)
        .iter()
        .map(|f| (f.line(), f.diagnostic.code.clone()))
        .collect();
    v.sort();
    v
}

/// The files of `reports` with a finding, relative to `root`.
fn files_with_findings(reports: &[source_lint::FileReport], root: &std::path::Path) -> Vec<String> {
    reports
        .iter()
        .filter(|r| !r.findings.is_empty())
        .map(|r| {
            PathBuf::from(&r.display)
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// Writes `files` (name, text) into a fresh directory and lints them as one project with
/// only `code` selected: each finding as (file name, line).
fn project_findings(files: &[(&str, &str)], code: &str) -> Vec<(String, usize)> {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = files
        .iter()
        .map(|(name, text)| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect();
    let sel = Selection {
        select: vec![code.into()],
        ignore: vec![],
    };
    let (reports, _) = lint_files(&paths, &sel);
    reports
        .iter()
        .flat_map(|r| {
            let name = PathBuf::from(&r.display)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_string();
            r.findings.iter().map(move |f| (name.clone(), f.line()))
        })
        .collect()
}

#[test]
fn names_resolve_through_imports() {
    let src = "\
import torch as T
from torch.nn import functional as Fn
from torch.nn.functional import interpolate as interp
from torch import where, einsum as es

class M(T.nn.Module):
    def forward(self, x):
        a = Fn.upsample(x, scale_factor=2)
        b = interp(x, scale_factor=2, mode='bilinear')
        c = where(x > 0)
        d = es('ij->ji', x)
        return a, b, c, d
";
    assert_eq!(
        codes(src),
        vec![
            (8, "ODL013".into()),
            (9, "ODL014".into()),
            (10, "ODL007".into()),
            (11, "ODL009".into())
        ]
    );
}

#[test]
fn spelling_alone_is_not_enough() {
    // Same method names on things that are not torch: numpy's where, a local `einsum`, no torch import.
    let src = "\
import numpy as np

def einsum(*a):
    return a

class M:
    def forward(self, x):
        i = np.where(x > 0)
        return einsum('ij', x), np.unique(x), i
";
    assert_eq!(codes(src), vec![]);
    let with_torch = format!("import torch\n{src}");
    assert_eq!(codes(&with_torch), vec![], "numpy calls stay numpy calls");
}

#[test]
fn noqa_suppresses_listed_codes_only() {
    assert_eq!(noqa_codes("x = 1"), None);
    assert_eq!(noqa_codes("x = 1  # noqa"), Some(vec![]));
    assert_eq!(
        noqa_codes("x = 1  # noqa: ODL001, odl004 trailing"),
        Some(vec!["ODL001".to_string(), "ODL004".to_string()])
    );
    let src = "\
import torch

class M(torch.nn.Module):
    def forward(self, x):
        a = x.item()  # noqa: ODL004
        b = x.item()  # noqa: ODL001
        c = x.item()  # noqa
        d = x.item()  # noqa: ODL00
        return a, b, c, d
";
    assert_eq!(codes(src), vec![(6, "ODL004".into())]);
}

#[test]
fn safe_fixes_rewrite_and_relint_clean() {
    let src = "\
import torch
import torch.nn.functional as F

def up(x):
    y = F.upsample(x, scale_factor=2)
    z = F.upsample_bilinear(x, size=(4, 4),)
    return F.interpolate(y, scale_factor=2, mode='bilinear'), z
";
    let lint = lint_source("m.py", src);
    let edits: Vec<&source_lint::Edit> = lint
        .findings
        .iter()
        .filter(|f| f.diagnostic.fix.as_ref().is_some_and(|x| x.safe))
        .flat_map(|f| &f.edits)
        .collect();
    let (fixed, n) = apply_edits(src, &edits);
    assert_eq!(n, 4);
    assert_eq!(
        fixed,
        "\
import torch
import torch.nn.functional as F

def up(x):
    y = F.interpolate(x, scale_factor=2)
    z = F.interpolate(x, size=(4, 4), mode=\"bilinear\", align_corners=True)
    return F.interpolate(y, scale_factor=2, mode='bilinear', align_corners=False), z
"
    );
    assert!(lint_source("m.py", &fixed).findings.is_empty(), "{fixed}");
}

#[test]
fn unparseable_and_odd_input_is_a_finding_not_a_panic() {
    for src in [
        "def f(:\n",
        "\u{feff}import torch\nx = 1\n",
        "import torch\n\tif True:\n  x",
        "",
        "import torch\nclass A(torch.autograd.Function",
        "import torch\n'''unterminated",
        "import torch\nx[",
    ] {
        let lint = lint_source("bad.py", src);
        for f in &lint.findings {
            assert!(f.line() >= 1, "{src:?}");
        }
    }
    let lint = lint_source("bad.py", "def f(:\n");
    assert_eq!(lint.findings.len(), 1);
    assert_eq!(lint.findings[0].diagnostic.code, "ODL000");
}

#[test]
fn directories_are_walked_respecting_gitignore() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("pkg/sub")).unwrap();
    std::fs::create_dir_all(p.join("build")).unwrap();
    std::fs::create_dir_all(p.join(".hidden")).unwrap();
    std::fs::write(p.join(".gitignore"), "build/\n").unwrap();
    let hazard = "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x.item()\n";
    for f in [
        "pkg/a.py",
        "pkg/sub/b.py",
        "build/c.py",
        ".hidden/d.py",
        "pkg/notes.txt",
    ] {
        std::fs::write(p.join(f), hazard).unwrap();
    }
    let files = discover(&[p.to_path_buf()]).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(p).unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["pkg/a.py", "pkg/sub/b.py"]);
    let (reports, errors) = lint_files(&files, &Selection::default());
    assert!(errors.is_empty());
    assert_eq!(reports.iter().map(|r| r.findings.len()).sum::<usize>(), 2);
    let err = discover(&[p.join("missing")]).unwrap_err();
    assert!(
        err.message.contains("missing") && err.message.contains("No such file"),
        "{}",
        err.message
    );
}

#[test]
fn unreadable_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("latin1.py");
    std::fs::write(&bad, b"x = '\xe9'\n").unwrap();
    let (reports, errors) = lint_files(
        &[bad.clone(), PathBuf::from("/nonexistent/zz.py")],
        &Selection::default(),
    );
    assert!(reports.is_empty());
    assert_eq!(errors.len(), 2);
    assert!(errors[0].message.contains("latin1.py") && errors[0].message.contains("UTF-8"));
    assert!(errors[1].message.contains("zz.py"));
}

#[test]
fn project_rule_sees_ops_in_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model.py");
    let export = dir.path().join("export.py");
    std::fs::write(
        &model,
        "import torch.nn.functional as F\n\ndef warp(x, g):\n    return F.grid_sample(x, g, align_corners=False)\n",
    )
    .unwrap();
    std::fs::write(
        &export,
        "import torch\nfrom model import warp\nm = torch.nn.Identity().eval()\ntorch.onnx.export(m, (torch.zeros(1),), 'm.onnx', opset_version=13)\n",
    )
    .unwrap();
    let sel = Selection {
        select: vec!["ODL020".into()],
        ignore: vec![],
    };
    let (reports, _) = lint_files(&[model.clone(), export.clone()], &sel);
    let hits: Vec<_> = reports.iter().flat_map(|r| &r.findings).collect();
    assert_eq!(hits.len(), 1);
    assert!(
        hits[0].diagnostic.message.contains("grid_sample (>= 16"),
        "{}",
        hits[0].diagnostic.message
    );
    assert!(hits[0].diagnostic.location.file().ends_with("export.py"));
    // Alone, the export script has nothing to compare against.
    let (reports, _) = lint_files(&[export], &sel);
    assert!(reports[0].findings.is_empty());
}

#[test]
fn project_rule_holds_an_export_to_what_it_imports() {
    // A clean export of a model defined in its own file, beside another file that uses an op of a
    // newer opset, is not flagged; an export script importing that file is.
    let dir = tempfile::tempdir().unwrap();
    let fold = dir.path().join("tiles.py");
    let own = dir.path().join("own.py");
    let script = dir.path().join("export_tiles.py");
    std::fs::write(
        &fold,
        "import torch.nn as nn\nimport torch.nn.functional as F\n\nclass Tiles(nn.Module):\n    def forward(self, x):\n        return F.fold(x, (8, 8), 2)\n",
    )
    .unwrap();
    std::fs::write(
        &own,
        "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x * 2\n\nm = Net().eval()\ntorch.onnx.export(m, (torch.zeros(1),), 'n.onnx', opset_version=17)\n",
    )
    .unwrap();
    std::fs::write(
        &script,
        "import torch\nfrom tiles import Tiles\nm = Tiles().eval()\ntorch.onnx.export(m, (torch.zeros(1, 4, 16),), 't.onnx', opset_version=17)\n",
    )
    .unwrap();
    let sel = Selection {
        select: vec!["ODL020".into()],
        ignore: vec![],
    };
    let (reports, _) = lint_files(&[fold, own, script], &sel);
    let hits: Vec<_> = reports.iter().flat_map(|r| &r.findings).collect();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0]
        .diagnostic
        .location
        .file()
        .ends_with("export_tiles.py"));
    assert!(hits[0].diagnostic.message.contains("fold"));
}

#[test]
fn methods_called_on_submodules_from_another_file_are_model_code() {
    // `self.model.score_masked(...)` in an export wrapper makes `score_masked` of the imported
    // model class model code; its other methods stay quiet.
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("bert4rec.py");
    let wrapper = dir.path().join("serve.py");
    std::fs::write(
        &model,
        "import torch.nn as nn\n\nclass Bert4Rec(nn.Module):\n    def forward(self, seq):\n        return seq\n\n    def score_masked(self, seq, cand):\n        h = self.forward(seq)\n        return h[seq == 3]\n\n    def debug(self, seq):\n        return h[seq == 3]\n",
    )
    .unwrap();
    std::fs::write(
        &wrapper,
        "import torch.nn as nn\nfrom bert4rec import Bert4Rec\n\nclass Serve(nn.Module):\n    def __init__(self, model):\n        super().__init__()\n        self.model = model\n\n    def forward(self, seq, cand):\n        return self.model.score_masked(seq, cand)\n",
    )
    .unwrap();
    let sel = Selection {
        select: vec!["ODL007".into()],
        ignore: vec![],
    };
    let (reports, _) = lint_files(&[model.clone(), wrapper.clone()], &sel);
    let lines: Vec<usize> = reports
        .iter()
        .flat_map(|r| &r.findings)
        .map(|f| f.line())
        .collect();
    assert_eq!(lines, vec![9]);
    // Alone, the model file's extra method is not reached.
    let (reports, _) = lint_files(&[model], &sel);
    assert!(reports[0].findings.is_empty());
}

#[test]
fn loaders_of_another_file_that_evaluate_count_for_odl017() {
    // `det = load_detector(path)` with `load_detector` imported from a file where it ends in
    // `model.eval()`: the export is not flagged; a loader that does not evaluate still is.
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("detector.py");
    let script = dir.path().join("export_all.py");
    std::fs::write(
        &models,
        "import torch\nimport torch.nn as nn\n\nclass Det(nn.Module):\n    def forward(self, x):\n        return x\n\ndef load_detector(path):\n    model = Det()\n    model.load_state_dict(torch.load(path))\n    model.eval()\n    return model\n\ndef load_raw(path):\n    model = Det()\n    model.load_state_dict(torch.load(path))\n    return model\n",
    )
    .unwrap();
    std::fs::write(
        &script,
        "import torch\nfrom detector import load_detector as load_det, load_raw\n\ndef main():\n    det = load_det('d.pt')\n    torch.onnx.export(det, (torch.zeros(1),), 'd.onnx')\n    raw = load_raw('d.pt')\n    torch.onnx.export(raw, (torch.zeros(1),), 'r.onnx')\n",
    )
    .unwrap();
    let sel = Selection {
        select: vec!["ODL017".into()],
        ignore: vec![],
    };
    let (reports, _) = lint_files(&[models.clone(), script.clone()], &sel);
    let lines: Vec<usize> = reports
        .iter()
        .flat_map(|r| &r.findings)
        .map(|f| f.line())
        .collect();
    assert_eq!(lines, vec![8]);
    // Alone, the script cannot know what the loaders do: both exports are flagged.
    let (reports, _) = lint_files(&[script], &sel);
    assert_eq!(reports[0].findings.len(), 2);
    // The same loaders through the module imported by name (`detector.load_detector(path)`).
    let by_module = dir.path().join("export_by_module.py");
    std::fs::write(
        &by_module,
        "import torch\nimport detector as dt\n\ndef main():\n    det = dt.load_detector('d.pt')\n    torch.onnx.export(det, (torch.zeros(1),), 'd.onnx')\n    raw = dt.load_raw('d.pt')\n    torch.onnx.export(raw, (torch.zeros(1),), 'r.onnx')\n",
    )
    .unwrap();
    let (reports, _) = lint_files(&[models, by_module], &sel);
    let lines: Vec<usize> = reports
        .iter()
        .flat_map(|r| &r.findings)
        .map(|f| f.line())
        .collect();
    assert_eq!(lines, vec![8]);
}

#[test]
fn sizes_handed_to_a_helper_of_another_file_are_frozen_there() {
    // `stations_to_grid(v, H, W)` with `H, W = int(...)` in the model's file: the helper's
    // `view(-1, 1, height, width)` freezes them. Another helper called with traced sizes, and
    // the same helper alone, are quiet.
    let ops = (
        "grid_ops.py",
        "import torch\n\ndef stations_to_grid(values, height: int, width: int):\n    return values.view(-1, 1, height, width)\n\ndef resize_to(x, height, width):\n    return x.view(-1, 1, height, width)\n",
    );
    let model = (
        "fusion.py",
        "import torch\nimport torch.nn as nn\nimport grid_ops as ops\nfrom grid_ops import resize_to\n\nclass Fusion(nn.Module):\n    def forward(self, radar, gauges):\n        H, W = int(radar.shape[-2]), int(radar.shape[-1])\n        grid = ops.stations_to_grid(gauges, H, W)\n        h, w = radar.shape[-2:]\n        return resize_to(grid, h, w)\n",
    );
    assert_eq!(
        project_findings(&[ops, model], "ODL016"),
        vec![("grid_ops.py".to_string(), 4)]
    );
    assert!(project_findings(&[ops], "ODL016").is_empty());
}

#[test]
fn masks_handed_to_a_helper_of_another_file_are_masks_there() {
    // `ops.apply_dirichlet(u, on_bnd)` with `on_bnd` a comparison in the model's file: the
    // helper's `u[on_boundary] = value` is a masked write. Index tensors handed to another
    // helper, and the helper alone, are quiet.
    let ops = (
        "bc_ops.py",
        "import torch\n\ndef apply_dirichlet(u, on_boundary, value=0.0):\n    u = u.clone()\n    u[on_boundary] = value\n    return u\n\ndef zero_rows(u, rows):\n    u = u.clone()\n    u[rows] = 0.0\n    return u\n",
    );
    let model = (
        "deeponet.py",
        "import torch\nimport torch.nn as nn\nimport bc_ops as ops\n\nclass DeepONet(nn.Module):\n    def forward(self, u, y):\n        on_bnd = (y.abs() >= 1.0).any(-1)\n        u = ops.apply_dirichlet(u, on_bnd, 0.0)\n        return ops.zero_rows(u, y.argmax(-1))\n",
    );
    assert_eq!(
        project_findings(&[ops, model], "ODL001"),
        vec![("bc_ops.py".to_string(), 5)]
    );
    assert!(project_findings(&[ops], "ODL001").is_empty());
}

#[test]
fn a_module_bound_to_another_name_is_followed() {
    // `import wind_ops` then `ops = wind_ops` at the top level (round 123, cablecars): the
    // helper `ops.over_threshold_count(speed)` runs in the trace. A name bound to something else
    // is not the module.
    let ops = (
        "wind_ops.py",
        "import torch\n\ndef over_threshold_count(wind, thr=40.0):\n    return int((wind > thr).sum())\n\ndef quiet_count(wind):\n    return int((wind > 1.0).sum())\n",
    );
    let model = (
        "wind_hold.py",
        "import torch\nimport torch.nn as nn\nimport wind_ops\n\nops = wind_ops\nother = dict(quiet_count=None)\n\nclass WindHold(nn.Module):\n    def forward(self, speed):\n        n_over = ops.over_threshold_count(speed)\n        return speed * n_over\n",
    );
    assert_eq!(
        project_findings(&[ops, model], "ODL004"),
        vec![("wind_ops.py".to_string(), 4)]
    );
    assert!(project_findings(&[ops], "ODL004").is_empty());
}

#[test]
fn records_of_another_file_give_tensor_fields() {
    // Records (a dataclass, a `TypedDict`, a class whose `__getitem__` returns tensors) defined
    // in one file and read in another's model code, imported by name or through the module.
    let ops = (
        "seg_records.py",
        "from dataclasses import dataclass\nfrom typing import Dict, Optional, TypedDict\nimport torch\nfrom torch import Tensor\n\n@dataclass\nclass SegOut:\n    logits: Tensor\n    aux: Optional[Tensor] = None\n    name: str = 'seg'\n\nclass Track(TypedDict):\n    freqs: torch.Tensor\n    valid: torch.Tensor\n\n@dataclass\nclass Pyramid:\n    feats: Dict[str, Tensor]\n\n    def __getitem__(self, key: str) -> Tensor:\n        return self.feats[key]\n\n@dataclass\nclass Strike:\n    track: Track\n",
    );
    let model = (
        "seg_model.py",
        "import torch.nn as nn\nimport seg_records as recs\nfrom seg_records import SegOut, Track, Strike\n\nclass Seg(nn.Module):\n    def forward(self, x, pyr: recs.Pyramid, track: Track, st: Strike):\n        out: SegOut = self.net(x)\n        out.logits[out.logits < 0] = 0.0\n        if out.aux:\n            x = x + 1\n        track['freqs'][~track['valid']] = 0.0\n        pyr['c3'][pyr['c3'] > 9] = 9.0\n        st.track['freqs'][~st.track['valid']] = 1.0\n        return x, out.name\n",
    );
    assert_eq!(
        project_findings(&[ops, model], "ODL001"),
        vec![
            ("seg_model.py".to_string(), 8),
            ("seg_model.py".to_string(), 11),
            ("seg_model.py".to_string(), 12),
            ("seg_model.py".to_string(), 13),
        ]
    );
    assert!(project_findings(&[ops, model], "ODL005").is_empty());
    assert!(project_findings(&[model], "ODL001").is_empty());
}

#[test]
fn records_told_to_another_file_keep_to_their_own_names() {
    // `Strike` holds a `Track`; the importer has a `Track` of its own that is no record: the
    // nested record reaches it under a name no Python code spells, and its own `Track` stays
    // what it is.
    let recs = (
        "strike_recs.py",
        "from dataclasses import dataclass\nimport torch\n\n@dataclass\nclass Track:\n    valid: torch.Tensor\n\n@dataclass\nclass Strike:\n    track: Track\n",
    );
    let model = (
        "strike_model.py",
        "import torch.nn as nn\nfrom strike_recs import Strike\n\nclass Track:\n    def __init__(self, valid):\n        self.valid = valid\n\nclass Net(nn.Module):\n    def forward(self, x, s: Strike, t: Track):\n        k = int(s.track.valid.sum())\n        return x[:, : int(t.valid)] * k\n",
    );
    assert_eq!(
        project_findings(&[recs, model], "ODL004"),
        vec![("strike_model.py".to_string(), 10)]
    );
}

#[test]
fn helpers_of_another_file_returning_dicts_of_tensors_are_read() {
    // `feats = mops.guard(self.backbone(img))` with `guard` annotated `-> Dict[str, Tensor]`:
    // the neck and head applied to it give tensors.
    let ops = (
        "stage_ops.py",
        "from typing import Dict\nfrom torch import Tensor\n\ndef guard(feats: Dict[str, Tensor]) -> Dict[str, Tensor]:\n    return {k: v.clamp(-1e4, 1e4) for k, v in feats.items()}\n",
    );
    let model = (
        "stage_model.py",
        "import torch.nn as nn\nimport stage_ops as mops\n\nclass Seg(nn.Module):\n    def forward(self, img):\n        feats = mops.guard(self.backbone(img))\n        logits = self.head(self.neck(feats))\n        if logits.mean() < 0.1:\n            logits = logits * 2\n        return logits\n",
    );
    assert_eq!(
        project_findings(&[ops, model], "ODL005"),
        vec![("stage_model.py".to_string(), 8)]
    );
    assert!(project_findings(&[model], "ODL005").is_empty());
}

#[test]
fn helpers_of_a_star_import_and_their_returned_masks_are_followed() {
    // `from cyto_ops import *`: the helpers the model calls are model code there, and
    // `gate`'s reduced comparison is a mask both in its file and, returned in a tuple by
    // `flag`, in the model's.
    let ops = (
        "cyto_ops.py",
        "import torch\n\ndef in_gate(v, lo, hi):\n    return ((v >= lo) & (v <= hi)).all(dim=-1)\n\ndef gate(events, lo, hi):\n    inside = in_gate(events, lo, hi)\n    return events[inside]\n\ndef flag(r, t):\n    bad = r.abs() > t\n    return bad, r.clamp(-t, t)\n\ndef unused(events, lo, hi):\n    return events[in_gate(events, lo, hi)]\n",
    );
    let model = (
        "rare.py",
        "import torch\nimport torch.nn as nn\nfrom cyto_ops import *\n\nclass Rare(nn.Module):\n    def forward(self, x, r):\n        x = gate(x, -1.0, 1.0)\n        bad, clipped = flag(r, 3.0)\n        r[bad] = 0.0\n        return x, r + clipped\n",
    );
    assert_eq!(
        project_findings(&[ops, model], "ODL007"),
        vec![("cyto_ops.py".to_string(), 8)]
    );
    assert_eq!(
        project_findings(&[ops, model], "ODL001"),
        vec![("rare.py".to_string(), 9)]
    );
    assert!(project_findings(&[ops], "ODL007").is_empty());
}

#[test]
fn a_function_the_training_driver_calls_through_an_alias_is_not_model_code() {
    // In an export script, a function handed around as a value may be what gets traced, but
    // `crit = ohem_ce` then `crit(logits, y)` in the training driver is a call of its own.
    let script = |alias_call: &str| {
        format!(
            "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n\n\ndef ohem_ce(logits, target):\n    n_valid = int(logits.sum())\n    return logits * n_valid\n\n\ndef train(x, y):\n    model = Net()\n    crit = ohem_ce\n    {alias_call}\n    return model\n\n\nif __name__ == \"__main__\":\n    net = train(1, 2).eval()\n    torch.onnx.export(net, (torch.rand(1, 3),), \"a.onnx\")\n"
        )
    };
    assert!(codes(&script("loss = crit(model(x), y)")).is_empty());
    // Handed on as a value instead (to a wrapper, say), it may be traced.
    assert_eq!(
        codes(&script("wrapped = [crit]")),
        vec![(11, "ODL004".to_string())]
    );
}

#[test]
fn project_rule_holds_an_export_to_the_model_it_builds() {
    // An export script importing two model files: exporting the model whose file needs no newer
    // opset (directly, through a loader, or inside a wrapper of the script) is not flagged by
    // the other file's `F.fold`; exporting that other model is.
    let tiles = (
        "tiles.py",
        "import torch.nn as nn\nimport torch.nn.functional as F\n\nclass Tiles(nn.Module):\n    def forward(self, x):\n        return F.fold(x, (8, 8), 2)\n",
    );
    let net = (
        "net.py",
        "import torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x * 2\n",
    );
    let script = (
        "export_all.py",
        "import torch\nimport torch.nn as nn\nfrom net import Net\nfrom tiles import Tiles\n\n\nclass Padded(nn.Module):\n    def __init__(self, inner):\n        super().__init__()\n        self.inner = inner\n\n    def forward(self, x):\n        return self.inner(x)\n\n\ndef load(m, path):\n    return m\n\n\ndef main():\n    net = Net()\n    net = load(net, 'n.pt').eval()\n    torch.onnx.export(net, (torch.zeros(1),), 'n.onnx', opset_version=17)\n    wrapped = Padded(net).eval()\n    torch.onnx.export(wrapped, (torch.zeros(1),), 'p.onnx', opset_version=17)\n    tiles = Tiles().eval()\n    torch.onnx.export(tiles, (torch.zeros(1, 4, 16),), 't.onnx', opset_version=17)\n",
    );
    assert_eq!(
        project_findings(&[tiles, net, script], "ODL020"),
        vec![("export_all.py".to_string(), 27)]
    );
}

#[test]
fn project_rule_reads_classes_of_modules_imported_by_name() {
    // `import net as nets` / `from . import tiles as tl`, then `nets.Net()` and `tl.Tiles()`:
    // each export is held to the ops of the module its class comes from.
    let tiles = (
        "tiles.py",
        "import torch.nn as nn\nimport torch.nn.functional as F\n\nclass Tiles(nn.Module):\n    def forward(self, x):\n        return F.fold(x, (8, 8), 2)\n",
    );
    let net = (
        "net.py",
        "import torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x * 2\n",
    );
    let script = (
        "export_all.py",
        "import torch\nimport net as nets\nimport tiles as tl\n\n\ndef main():\n    n = nets.Net().eval()\n    torch.onnx.export(n, (torch.zeros(1),), 'n.onnx', opset_version=17)\n    t = tl.Tiles().eval()\n    torch.onnx.export(t, (torch.zeros(1, 4, 16),), 't.onnx', opset_version=17)\n",
    );
    assert_eq!(
        project_findings(&[tiles, net, script], "ODL020"),
        vec![("export_all.py".to_string(), 10)]
    );
}

#[test]
fn selection_by_prefix_and_validation() {
    let sel = Selection {
        select: vec!["ODL01".into()],
        ignore: vec!["ODL013".into()],
    };
    assert!(sel.enabled("ODL014") && !sel.enabled("ODL013") && !sel.enabled("ODL004"));
    assert!(sel.validate().is_ok());
    let bad = Selection {
        select: vec!["E9".into()],
        ignore: vec![],
    };
    assert!(bad.validate().unwrap_err().contains("E9"));
}

#[test]
fn export_aware_and_training_only_code_is_not_model_code() {
    // Patterns of torchvision's detection models, which export fine.
    let src = "\
import torch
import torchvision
from typing import List, Optional

class Head(torch.nn.Module):
    def forward(self, x, rois: List[torch.Tensor], targets: Optional[List[dict]] = None):
        if targets is not None:
            bad = x[0].tolist()
        if torchvision._is_tracing():
            return self.traced(x)
        n = len(rois)
        return torch.zeros(n, 3), x.max().item()

    def traced(self, x):
        return x

    def forward_flags(self, x, return_all):
        if return_all:
            return x
        return x * 2
";
    assert_eq!(codes(src), vec![]);
    // The same lines outside those guards are findings.
    let exposed = "\
import torch

class Head(torch.nn.Module):
    def forward(self, x, rois):
        bad = x[0].tolist()
        n = len(rois)
        return torch.zeros(n, 3)
";
    assert_eq!(
        codes(exposed),
        vec![(5, "ODL004".into()), (7, "ODL016".into())]
    );
}

#[test]
fn values_independent_of_the_inputs_are_not_frozen_data() {
    // torchvision's poolers and transforms: tensors made from Python numbers or random draws.
    let src = "\
import torch
from typing import List

class Pooler(torch.nn.Module):
    def forward(self, x, scales: List[float]):
        approx = self.stride / 224.0
        scale = 2 ** float(torch.tensor(approx).log2().round())
        lvl = -torch.log2(torch.tensor(scales[0], dtype=torch.float32)).item()
        if torch.rand(1) < self.p:
            x = x.flip(-1)
        brightness = float(torch.empty(1).uniform_(0.5, 1.5))
        idx = int(torch.randint(len(self.ops), ()))
        draw = torch.rand(1)
        if draw < 0.5:
            x = x * brightness
        return x * scale, lvl, idx
";
    assert_eq!(codes(src), vec![]);
    // The same forms on the input are findings.
    let data = "\
import torch

class Pooler(torch.nn.Module):
    def forward(self, x):
        scale = float(torch.tensor(x.shape[-1]).log2())
        lvl = x.mean().item()
        if x.mean() < self.p:
            x = x.flip(-1)
        draw = torch.rand(1)
        draw = draw * x.mean()
        if draw < 0.5:
            x = x * 2
        return x * scale, lvl
";
    assert_eq!(
        codes(data),
        vec![
            (5, "ODL004".into()),
            (5, "ODL016".into()),
            (6, "ODL004".into()),
            (7, "ODL005".into()),
            (11, "ODL005".into())
        ]
    );
}

#[test]
fn export_script_driver_code_is_not_model_code() {
    // The PyTorch ONNX tutorial's shape: the exporter call, a numpy helper and an onnxruntime
    // check live next to a module-level function that is model code.
    let src = "\
import numpy as np
import onnxruntime
import torch
from model import Net

def to_numpy(tensor):
    return tensor.detach().cpu().numpy()

def check(path, x, expected):
    sess = onnxruntime.InferenceSession(path)
    out = sess.run(None, {'x': x.numpy()})[0]
    np.testing.assert_allclose(expected.numpy(), out, rtol=1e-3)

def decode(scores):
    return scores.max().item()

class Wrapper(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
    def forward(self, x):
        return decode(self.net(x))

def postprocess(y):
    return y.max().item()

def export(model, x):
    torch.onnx.export(model.eval(), x, 'm.onnx', opset_version=17)
    print(postprocess(model(x)), to_numpy(x).shape)

def main():
    x = torch.randn(1, 3, 224, 224).cuda()
    export(Wrapper(Net()), x)
    check('m.onnx', x, Wrapper(Net())(x))

if __name__ == '__main__':
    main()
";
    assert_eq!(codes(src), vec![(15, "ODL004".into())]);
}

#[test]
fn a_local_named_like_a_module_function_is_not_a_reference_to_it() {
    // In an export script, module-level functions handed around as values are model code; a
    // local of the same name (`fit = self.profile(x)`) is not a reference to `fit`, the
    // training loop, and the training side of `a if self.training else b` is not followed.
    let src = "\
import torch

class Net(torch.nn.Module):
    def nll(self, x):
        return x.logsumexp(-1).mean().item()

    def forward(self, x):
        fit = x.mean(-1, keepdim=True)
        return self.nll(x) if self.training else x - fit

def fit(model, loader):
    for batch in loader:
        print(model(batch).sum().item())

def export(model):
    torch.onnx.export(model.eval(), (torch.zeros(1, 3),), 'fit.onnx', opset_version=17)
";
    // Only the training branch itself (ODL006), not the `.item()`s on either side of it.
    assert_eq!(codes(src), vec![(9, "ODL006".into())]);
}

#[test]
fn size_parameters_and_number_checks_are_python_values() {
    // timm's transforms: `size`/`target_size` parameters and `isinstance(v, numbers.Number)`.
    let src = "\
import numbers
import torch

def setup_size(size):
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    return size

def crop_params(img, target_size):
    delta = img.shape[-1] - target_size[0]
    if delta == 0:
        return 0
    return delta

class Crop(torch.nn.Module):
    def forward(self, img, size, scale):
        h, w = setup_size(size)
        if isinstance(scale, (int, float)):
            scale = float(scale)
        return img[..., :h, :w] * scale, crop_params(img, (h, w))
";
    assert_eq!(codes(src), vec![]);
}

#[test]
fn helpers_imported_by_model_code_are_model_code() {
    // A project split in modules: the model calls helpers of sibling files through relative,
    // absolute and module imports; a helper nobody's model code calls stays unchecked.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("proj/pkg")).unwrap();
    std::fs::write(p.join("proj/pkg/__init__.py"), "").unwrap();
    let helpers = "\
import torch

def pad_mask(lengths):
    return torch.arange(int(lengths.max())) < lengths[:, None]

def unused(x):
    return x.item()

class Box:
    def __init__(self, boxes):
        self.n = boxes.sum().item()
";
    std::fs::write(p.join("proj/pkg/utils.py"), helpers).unwrap();
    std::fs::write(
        p.join("proj/pkg/ops.py"),
        "import torch\n\ndef keep(scores):\n    return torch.nonzero(scores > 0.5)\n",
    )
    .unwrap();
    let model = "\
import torch
from .utils import pad_mask, Box
from proj.pkg import ops as O
import torch.nn.functional as F

class M(torch.nn.Module):
    def forward(self, x, lengths):
        b = Box(x)
        return x * pad_mask(lengths)[..., None], O.keep(x)
";
    std::fs::write(p.join("proj/pkg/model.py"), model).unwrap();
    let files = discover(&[p.to_path_buf()]).unwrap();
    let (reports, errors) = lint_files(&files, &Selection::default());
    assert!(errors.is_empty());
    let mut got: Vec<(String, usize, String)> = reports
        .iter()
        .flat_map(|r| {
            let name = r
                .path
                .strip_prefix(p)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            r.findings
                .iter()
                .map(move |f| (name.clone(), f.line(), f.diagnostic.code.clone()))
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("proj/pkg/ops.py".into(), 4, "ODL007".into()),
            ("proj/pkg/utils.py".into(), 4, "ODL004".into()),
            ("proj/pkg/utils.py".into(), 4, "ODL016".into()),
            ("proj/pkg/utils.py".into(), 11, "ODL004".into()),
        ]
    );
}

#[test]
fn return_annotations_of_imported_helpers_are_read() {
    // `counts = histogram(labels)` with `def histogram(...) -> Tensor` in another file: the
    // result is a tensor, so branching on it in `forward` is a finding; `-> int` is not.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("utils.py"),
        "\
import torch
from torch import Tensor
from typing import Tuple

def histogram(labels: Tensor, n: int) -> Tensor:
    return torch.bincount(labels.flatten(), minlength=n)

def split_ids(ids: Tensor) -> Tuple[Tensor, Tensor]:
    return ids.unique(return_inverse=True)

def num_levels(depth: int) -> int:
    return depth // 2
",
    )
    .unwrap();
    std::fs::write(
        p.join("model.py"),
        "\
import torch
import utils as U
from utils import histogram, num_levels

class M(torch.nn.Module):
    def forward(self, labels, ids):
        counts = histogram(labels, 4)
        if counts[0] < 10:
            labels = labels * 0
        _, idx = U.split_ids(ids)
        n = int(idx.max()) + 1
        k = num_levels(labels)
        if k > 2:
            labels = labels + 1
        return labels, n
",
    )
    .unwrap();
    let files = discover(&[p.to_path_buf()]).unwrap();
    let (reports, errors) = lint_files(&files, &Selection::default());
    assert!(errors.is_empty());
    let model = reports
        .iter()
        .find(|r| r.path.ends_with("model.py"))
        .unwrap();
    let got: Vec<(usize, String)> = model
        .findings
        .iter()
        .map(|f| (f.line(), f.diagnostic.code.clone()))
        .collect();
    assert_eq!(got, vec![(8, "ODL005".into()), (11, "ODL004".into())]);
}

#[test]
fn helpers_of_another_file_called_only_in_training_are_not_model_code() {
    // `board_noise` runs under `if self.training`, `stats` under an export guard: neither is
    // model code in the file that defines it; `canonical` runs in the trace.
    let ops = "\
import torch

def board_noise(like, sigma):
    return torch.randn(like.shape, device=\"cuda\") * sigma

def stats(t):
    return t.max().item()

def canonical(x):
    return torch.ones(3, device=\"cuda\") * x
";
    let model = "\
import torch
from ops import board_noise, stats, canonical

class Net(torch.nn.Module):
    def forward(self, x):
        if self.training and self.noise > 0:
            x = x + board_noise(x, self.noise)
        if not torch.jit.is_tracing():
            print(stats(x))
        return canonical(x)
";
    let mut got = project_findings(&[("ops.py", ops), ("model.py", model)], "ODL015");
    // The side of an export-aware branch that export runs is followed; the eager side, and
    // what follows `if torch.onnx.is_in_onnx_export(): return ...`, is not.
    let ops2 = "\
import torch

def onnx_norm(x):
    return x / torch.ones(1, device=\"cuda\")

def eager_post(x):
    return x * torch.ones(3, device=\"cuda\")
";
    let model2 = "\
import torch
from ops2 import onnx_norm, eager_post

class Head(torch.nn.Module):
    def forward(self, x):
        if torch.onnx.is_in_onnx_export():
            return onnx_norm(x)
        return eager_post(x)
";
    assert_eq!(
        project_findings(&[("ops2.py", ops2), ("model2.py", model2)], "ODL015"),
        vec![("ops2.py".to_string(), 4)]
    );
    // A training test joined with a scripting check, a scripting-only branch and the eager side
    // of a conditional expression are not followed either.
    let model3 = "\
import torch
from ops2 import onnx_norm, eager_post

class Head(torch.nn.Module):
    def forward(self, x):
        if self.training and not torch.jit.is_scripting():
            x = eager_post(x)
        if torch.jit.is_scripting():
            return eager_post(x)
        return onnx_norm(x) if torch.onnx.is_in_onnx_export() else eager_post(x)
";
    assert_eq!(
        project_findings(&[("ops2.py", ops2), ("model3.py", model3)], "ODL015"),
        vec![("ops2.py".to_string(), 4)]
    );
    got.extend(project_findings(
        &[("ops.py", ops), ("model.py", model)],
        "ODL004",
    ));
    assert_eq!(got, vec![("ops.py".to_string(), 10)]);
}

#[test]
fn export_arguments_returned_by_a_helper_of_another_file_are_checked() {
    // The export script splices `**ops.default_export_kwargs()`: the dict's opset is held to
    // the project's ops, and its `keep_initializers_as_inputs` is reported where written.
    let ops = "\
import torch
import torch.nn.functional as F

def warp(x, grid):
    return F.grid_sample(x, grid, align_corners=False)

def default_export_kwargs():
    return {
        \"opset_version\": 13,
        \"do_constant_folding\": True,
        \"keep_initializers_as_inputs\": True,
    }
";
    let export = "\
import torch
import ops

def main(model, x):
    model.eval()
    torch.onnx.export(model, (x,), \"m.onnx\", **ops.default_export_kwargs())
";
    let files = [("ops.py", ops), ("export.py", export)];
    assert_eq!(
        project_findings(&files, "ODL020"),
        vec![("ops.py".to_string(), 9)]
    );
    assert_eq!(
        project_findings(&files, "ODL019"),
        vec![("ops.py".to_string(), 11)]
    );
    // A config module without torch; a data module's ops no export reaches do not count.
    let config = "ONNX_KW = dict(opset_version=13, do_constant_folding=True, keep_initializers_as_inputs=True)\n";
    let data = "import torch\n\ndef collate(b):\n    x = torch.stack(b)\n    return torch.ones(3, 3).tril()\n";
    let model = "import torch\n\nclass Net(torch.nn.Linear):\n    pass\n";
    let export = "import torch\nfrom config import ONNX_KW\nfrom model import Net\n\ntorch.onnx.export(Net(4, 4).eval(), (torch.zeros(1, 4),), \"m.onnx\", **ONNX_KW)\n";
    let files = [
        ("config.py", config),
        ("data.py", data),
        ("model.py", model),
        ("export.py", export),
    ];
    assert_eq!(project_findings(&files, "ODL020"), vec![]);
    assert_eq!(
        project_findings(&files, "ODL019"),
        vec![("config.py".to_string(), 1)]
    );
    let with_ops = [
        ("config.py", config),
        ("ops.py", ops),
        ("export.py", "import torch\nimport ops\nfrom config import ONNX_KW\n\ndef main(m, x):\n    m.eval()\n    torch.onnx.export(m, (x,), \"m.onnx\", **ONNX_KW)\n"),
    ];
    // (ops.py's own `default_export_kwargs` is imported by that script too.)
    assert_eq!(
        project_findings(&with_ops, "ODL020"),
        vec![("config.py".to_string(), 1), ("ops.py".to_string(), 9)]
    );
}

#[test]
fn a_file_named_alone_is_read_with_its_directory_and_packages_above() {
    // repo/export.py, repo/pkg/{__init__,net}.py, repo/pkg/ops/{__init__,blocks}.py, and a
    // directory and files the context must not read.
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for d in ["pkg/ops", "pkg/data", "other"] {
        std::fs::create_dir_all(repo.join(d)).unwrap();
    }
    let write = |name: &str, text: &str| std::fs::write(repo.join(name), text).unwrap();
    write(".gitignore", "scratch.py\n");
    write("scratch.py", "");
    write("export.py", "");
    write("pkg/__init__.py", "");
    write("pkg/net.py", "");
    write("pkg/ops/__init__.py", "");
    write("pkg/ops/blocks.py", "");
    write("pkg/ops/README.md", "");
    write("pkg/data/loader.py", "");
    write("other/tool.py", "");
    let blocks = repo.join("pkg/ops/blocks.py");
    let named = [blocks.clone()];
    let got: Vec<String> = source_lint::context(&named, &named)
        .iter()
        .map(|p| {
            p.strip_prefix(&repo)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        got,
        [
            "pkg/ops/__init__.py",
            "pkg/__init__.py",
            "pkg/net.py",
            "export.py"
        ]
    );
    // A directory walked is its own context.
    let walked = std::slice::from_ref(&repo);
    assert!(source_lint::context(walked, &discover(walked).unwrap()).is_empty());
}

#[test]
fn helpers_of_a_file_named_alone_are_model_code_when_its_neighbours_call_them() {
    let dir = tempfile::tempdir().unwrap();
    let ops = dir.path().join("ops.py");
    std::fs::write(
        &ops,
        "import torch\n\ndef keep(x, mask):\n    x[mask] = 0\n    return x\n\ndef unused(x, mask):\n    x[mask] = 0\n    return x\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("model.py"),
        "import torch\nfrom ops import keep\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return keep(x, x > 0)\n",
    )
    .unwrap();
    let sel = Selection::default();
    let named = [ops.clone()];
    let (isolated, _) = lint_files(&named, &sel);
    assert!(isolated[0].findings.is_empty());
    let context = source_lint::context(&named, &named);
    let (reports, errors) = source_lint::lint_files_with_context(&named, &context, &sel, None);
    assert!(errors.is_empty());
    assert_eq!(reports.len(), 1, "only the named file is reported");
    let got: Vec<(usize, &str)> = reports[0]
        .findings
        .iter()
        .map(|f| (f.line(), f.diagnostic.code.as_str()))
        .collect();
    assert_eq!(got, [(4, "ODL001")]);
    // An unreadable neighbour is not the user's input: it is left out, not an error.
    std::fs::write(dir.path().join("latin1.py"), b"x = '\xe9'\n").unwrap();
    let context = source_lint::context(&named, &named);
    let (reports, errors) = source_lint::lint_files_with_context(&named, &context, &sel, None);
    assert!(errors.is_empty());
    assert_eq!(reports[0].findings.len(), 1);
}

#[test]
fn projects_linted_together_resolve_imports_to_their_own_modules() {
    // Two projects side by side, each with `ops.py` and `export.py`: `from ops import ...` in
    // one is that project's `ops.py`, not the other's (whose `fold` needs opset 18).
    let dir = tempfile::tempdir().unwrap();
    let export = "import torch\nfrom ops import blur\nfrom model import Net\nm = Net().eval()\ntorch.onnx.export(m, (torch.zeros(1),), 'm.onnx', opset_version=17)\n";
    let model = "import torch\nfrom ops import blur\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return blur(x)\n";
    for (project, ops) in [
        (
            "a",
            "import torch.nn.functional as F\n\ndef blur(x):\n    return F.avg_pool2d(x, 3)\n",
        ),
        (
            "b",
            "import torch.nn.functional as F\n\ndef blur(x):\n    return F.fold(x, (4, 4), 2)\n",
        ),
    ] {
        let p = dir.path().join(project);
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("ops.py"), ops).unwrap();
        std::fs::write(p.join("model.py"), model).unwrap();
        std::fs::write(p.join("export.py"), export).unwrap();
    }
    let sel = Selection {
        select: vec!["ODL020".into()],
        ignore: vec![],
    };
    let files = discover(&[dir.path().to_path_buf()]).unwrap();
    let (reports, _) = lint_files(&files, &sel);
    let hits = files_with_findings(&reports, dir.path());
    assert_eq!(hits, ["b/export.py"]);
}

#[test]
fn every_named_file_gets_its_own_directory_before_any_limit() {
    // 2,005 files beside one named file must not crowd out the other named file's model.
    let dir = tempfile::tempdir().unwrap();
    let (crowd, small) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&crowd).unwrap();
    std::fs::create_dir_all(&small).unwrap();
    for i in 0..2_005 {
        std::fs::write(crowd.join(format!("f{i:04}.py")), "").unwrap();
    }
    std::fs::write(small.join("ops.py"), "").unwrap();
    std::fs::write(small.join("model.py"), "").unwrap();
    let named = [crowd.join("f0001.py"), small.join("ops.py")];
    let context = source_lint::context(&named, &named);
    assert!(context.contains(&small.join("model.py")));
    assert_eq!(context.len(), 2_000);
}

#[test]
fn context_goes_no_higher_than_the_path_says_and_lists_each_file_once() {
    // `<root>/tools/../pkg/ops.py`: above `pkg` the path names `<root>/tools/..`, not `tools`.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in ["pkg", "tools"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in [
        "__init__.py",
        "pkg/__init__.py",
        "pkg/ops.py",
        "pkg/other.py",
        "tools/x.py",
    ] {
        std::fs::write(root.join(f), "").unwrap();
    }
    let named = [root.join("tools/../pkg/ops.py")];
    let context = source_lint::context(&named, &named);
    assert!(
        !context.iter().any(|p| p.ends_with("tools/x.py")),
        "{context:?}"
    );
    // The same directory spelled two ways is read once.
    let named = [root.join("pkg/ops.py"), root.join("pkg/./__init__.py")];
    let context = source_lint::context(&named, &named);
    let others = context.iter().filter(|p| p.ends_with("other.py")).count();
    assert_eq!(others, 1, "{context:?}");
}

#[test]
fn a_script_named_alone_is_read_with_the_modules_it_imports_from_above() {
    // repo/tools/export.py runs from the repository root (`python tools/export.py`), so
    // `from models.net import Net` is repo/models/net.py, whose grid_sample needs opset 16.
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    for d in ["tools", "models", "docs"] {
        std::fs::create_dir_all(repo.join(d)).unwrap();
    }
    let write = |name: &str, text: &str| std::fs::write(repo.join(name), text).unwrap();
    write(
        "tools/export.py",
        "import os, sys  # the repository root on the path\nimport torch\nfrom models.net import Net\nimport helpers as h\n\nm = Net().eval()\ntorch.onnx.export(m, (torch.zeros(1, 3, 8, 8), torch.zeros(1, 8, 8, 2)), 'm.onnx', opset_version=11)\n",
    );
    write(
        "models/net.py",
        "import torch\nimport torch.nn.functional as F\n\nclass Net(torch.nn.Module):\n    def forward(self, x, grid):\n        return F.grid_sample(x, grid, align_corners=False)\n",
    );
    write("helpers.py", "");
    write("docs/conf.py", "");
    let named = [repo.join("tools/export.py")];
    let context = source_lint::context(&named, &named);
    let got: Vec<String> = context
        .iter()
        .map(|p| {
            p.strip_prefix(&repo)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(got, ["models/net.py", "helpers.py"]);
    let sel = Selection {
        select: vec!["ODL020".into()],
        ignore: vec![],
    };
    let (reports, errors) = source_lint::lint_files_with_context(&named, &context, &sel, None);
    assert!(errors.is_empty());
    assert_eq!(reports[0].findings.len(), 1, "{:?}", reports[0].findings);
    assert_eq!(reports[0].findings[0].line(), 7);
}

#[test]
fn a_script_named_alone_reads_no_module_above_its_projects_root() {
    // ws/proj (a project: pyproject.toml) and ws/vendorlib, another checkout beside it: the
    // script's `import vendorlib` is not read, however the path is spelled.
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    for d in ["proj/tools", "vendorlib"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    std::fs::write(ws.join("proj/pyproject.toml"), "").unwrap();
    std::fs::write(
        ws.join("proj/tools/export.py"),
        "import torch\nimport vendorlib\n",
    )
    .unwrap();
    std::fs::write(ws.join("vendorlib/__init__.py"), "").unwrap();
    let named = [ws.join("proj/tools/export.py")];
    let context = source_lint::context(&named, &named);
    assert!(context.is_empty(), "{context:?}");
    // In site-packages, nothing above is read either.
    let site = dir.path().join("lib/python3.11/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("mod.py"), "import typing\n").unwrap();
    std::fs::write(dir.path().join("lib/python3.11/typing.py"), "").unwrap();
    let named = [site.join("mod.py")];
    let context = source_lint::context(&named, &named);
    assert!(context.is_empty(), "{context:?}");
}

#[test]
fn an_import_resolves_under_the_importers_import_root() {
    // `from utils import keep` in pkg/models/net.py is the top-level utils.py (Python 3 has no
    // implicit relative imports), not pkg/models/utils.py.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("pkg/models")).unwrap();
    std::fs::write(root.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(root.join("pkg/models/__init__.py"), "").unwrap();
    let helper = "import torch\n\ndef keep(x, mask):\n    x[mask] = 0\n    return x\n";
    std::fs::write(root.join("utils.py"), helper).unwrap();
    std::fs::write(root.join("pkg/models/utils.py"), helper).unwrap();
    std::fs::write(
        root.join("pkg/models/net.py"),
        "import torch\nfrom utils import keep\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return keep(x, x > 0)\n",
    )
    .unwrap();
    let files = discover(&[root.to_path_buf()]).unwrap();
    let (reports, _) = lint_files(&files, &Selection::default());
    let hits = files_with_findings(&reports, root);
    assert_eq!(hits, ["utils.py"]);
}

#[test]
fn functions_of_a_command_table_read_only_for_its_keys_are_driver_code() {
    // `TARGETS` is read for its keys (`sorted(TARGETS)`, `for name in ...`) and called as
    // `TARGETS[name](...)`: its functions build models and export them through a wrapper; they
    // are not traced, so the `__init__` of a block the model builds is not model code.
    let model = r#"import torch.nn as nn

N_IN = 4


class Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        return self.skip(x)


class Net(nn.Module):
    def __init__(self, n_in=N_IN, hid=8):
        super().__init__()
        self.body = nn.Sequential(Block(n_in, hid), Block(hid, hid))

    def forward(self, x):
        return self.body(x)
"#;
    let export = r#"import argparse

import torch

from model import Net


def _to_onnx(module, out):
    torch.onnx.export(module, (torch.zeros(1, 4, 8),), out, opset_version=17)


def export_net(out):
    net = Net()
    net.eval()
    _to_onnx(net, out)


TARGETS = {"net": export_net}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", choices=sorted(TARGETS))
    args = ap.parse_args()
    for name in args.only or sorted(TARGETS):
        TARGETS[name](f"{name}.onnx")


if __name__ == "__main__":
    main()
"#;
    let found = project_findings(&[("model.py", model), ("export.py", export)], "ODL005");
    assert_eq!(found, vec![]);
    // Functions that only build the model, handed out as values (`TARGETS.items()`), may be
    // traced.
    let handed = export
        .replace(
            "for name in args.only or sorted(TARGETS):",
            "for name, _ in TARGETS.items():",
        )
        .replace("    _to_onnx(net, out)\n", "    return net\n");
    let found = project_findings(&[("model.py", model), ("export.py", &handed)], "ODL005");
    assert_eq!(found, vec![("model.py".to_string(), 9)]);
}

#[test]
fn an_import_no_root_holds_resolves_to_the_nearest() {
    // projA/tools/export.py puts `..` on sys.path and imports `utils`: projA/utils.py, the
    // nearest, not projB/utils.py linted beside it.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in ["projA/tools", "projB"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let helper =
        "import torch\n\ndef helper(x):\n    if x.sum() > 0:\n        return x\n    return -x\n";
    std::fs::write(root.join("projA/utils.py"), helper).unwrap();
    std::fs::write(root.join("projB/utils.py"), helper).unwrap();
    std::fs::write(
        root.join("projA/tools/export.py"),
        "import sys\nsys.path.insert(0, '..')\nimport torch\nfrom utils import helper\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return helper(x)\n",
    )
    .unwrap();
    let files = discover(&[root.join("projA"), root.join("projB")]).unwrap();
    let (reports, _) = lint_files(&files, &Selection::default());
    let hits = files_with_findings(&reports, root);
    assert_eq!(hits, ["projA/utils.py"]);
}

#[test]
fn a_named_files_own_neighbours_come_before_the_packages_below_it() {
    // A package `a/` of 2,001 files beside export.py must not push model.py out of the limit.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("a")).unwrap();
    std::fs::write(root.join("a/__init__.py"), "").unwrap();
    for i in 0..2_001 {
        std::fs::write(root.join(format!("a/m{i:04}.py")), "").unwrap();
    }
    std::fs::write(root.join("export.py"), "").unwrap();
    std::fs::write(root.join("model.py"), "").unwrap();
    let named = [root.join("export.py")];
    let context = source_lint::context(&named, &named);
    assert_eq!(context.first(), Some(&root.join("model.py")));
    assert_eq!(context.len(), 2_000);
}

#[test]
fn a_file_named_twice_is_linted_once() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("e.py");
    std::fs::write(&f, "import torch\n").unwrap();
    let files = discover(&[f.clone(), dir.path().join(".").join("e.py")]).unwrap();
    assert_eq!(files, std::slice::from_ref(&f));
    // Through a symlink too: the findings would be reported twice.
    #[cfg(unix)]
    {
        // Named first and sorted first, the link still gives way to the file itself.
        let link = dir.path().join("a_link.py");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        let files = discover(&[link, f.clone()]).unwrap();
        assert_eq!(files, [f]);
    }
}

#[test]
fn an_appended_argument_goes_before_a_trailing_comment() {
    // The fix must not land inside `# doubled` (it would be commented out and the mode lost).
    let src = "import torch\nimport torch.nn.functional as F\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return F.upsample_bilinear(x,\n            scale_factor=2  # doubled\n        )\n";
    let lint = lint_source("m.py", src);
    let edits: Vec<&source_lint::Edit> = lint
        .findings
        .iter()
        .filter(|f| f.diagnostic.fix.as_ref().is_some_and(|x| x.safe))
        .flat_map(|f| &f.edits)
        .collect();
    assert!(!edits.is_empty());
    let (fixed, _) = apply_edits(src, &edits);
    assert!(
        fixed.contains("scale_factor=2, mode=\"bilinear\", align_corners=True  # doubled"),
        "{fixed}"
    );
}

#[test]
fn functions_exporting_through_a_wrapper_of_the_script_are_driver_code() {
    // `export_net` exports through `_export`; the table is read for its keys by `", ".join`.
    // `_load`'s checks on `load_state_dict`'s result are driver code, not traced.
    let export = r#"
import argparse

import torch

from model import Net


def _load(model, path):
    state = torch.load(path, map_location="cpu")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        print("partial checkpoint")
    return model


def _export(model, args, path, **kwargs):
    model.eval()
    torch.onnx.export(model, args, path, **kwargs)
    return path


def export_net(out):
    model = _load(Net(), "net.pt")
    return _export(model, (torch.zeros(1, 4, 8),), out, opset_version=17)


TARGETS = {"net": export_net}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help=", ".join(TARGETS))
    args = ap.parse_args()
    for name in [t for t in args.only.split(",") if t] or list(TARGETS):
        TARGETS[name](f"{name}.onnx")


if __name__ == "__main__":
    main()
"#;
    let model = "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n";
    let found = project_findings(&[("model.py", model), ("export.py", export)], "ODL005");
    assert_eq!(found, vec![]);
}

#[test]
fn appended_arguments_keep_the_call_valid_python() {
    // After a parenthesized last argument (its range leaves the parentheses out), and around a
    // lone generator, which needs its own parentheses once another argument follows.
    for (src, want) in [
        (
            "F.upsample_bilinear(x, (2))",
            "F.interpolate(x, (2), mode=\"bilinear\", align_corners=True)",
        ),
        (
            "F.interpolate(x, None, 2, (\"bilinear\"))",
            "F.interpolate(x, None, 2, (\"bilinear\"), align_corners=False)",
        ),
        (
            "nn.UpsamplingBilinear2d(s for s in sizes)",
            "nn.Upsample((s for s in sizes), mode=\"bilinear\", align_corners=True)",
        ),
    ] {
        let text = format!(
            "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass M(nn.Module):\n    def forward(self, x, sizes):\n        return {src}\n"
        );
        let lint = lint_source("m.py", &text);
        let edits: Vec<&source_lint::Edit> = lint
            .findings
            .iter()
            .filter(|f| f.diagnostic.fix.as_ref().is_some_and(|x| x.safe))
            .flat_map(|f| &f.edits)
            .collect();
        let (once, _) = apply_edits(&text, &edits);
        // Fixes that need the first one's result come on the re-lint, as `--fix` does.
        let again = lint_source("m.py", &once);
        let edits: Vec<&source_lint::Edit> = again
            .findings
            .iter()
            .filter(|f| f.diagnostic.fix.as_ref().is_some_and(|x| x.safe))
            .flat_map(|f| &f.edits)
            .collect();
        let (fixed, _) = apply_edits(&once, &edits);
        assert!(fixed.contains(want), "{src}: {fixed}");
        assert!(
            !lint_source("m.py", &fixed)
                .findings
                .iter()
                .any(|f| f.diagnostic.code == "ODL000"),
            "{fixed}"
        );
    }
}

#[test]
fn a_function_handed_to_an_export_wrapper_is_model_code() {
    // `export_all` runs `model_fn` as a check and exports it through `_export`: it is driver
    // code, `model_fn` is what gets exported.
    let src = r#"
import torch
import torch.nn.functional as F


def _export(fn, x, path):
    torch.onnx.export(fn, (x,), path, opset_version=17)


def model_fn(x):
    return F.interpolate(x, scale_factor=2, mode="bilinear")


def export_all(path):
    x = torch.zeros(1, 3, 8, 8)
    ref = model_fn(x)
    _export(model_fn, x, path)
    return ref
"#;
    assert_eq!(codes(src), vec![(11, "ODL014".to_string())]);
}

#[test]
fn fixes_appending_after_spliced_arguments_are_only_suggested() {
    // `**kw` may already hold `align_corners` or `mode`: appending them would raise.
    for src in [
        "F.interpolate(x, scale_factor=2, mode=\"bilinear\", **kw)",
        "F.upsample_bilinear(x, *rest)",
    ] {
        let text = format!(
            "import torch\nimport torch.nn.functional as F\n\nclass M(torch.nn.Module):\n    def forward(self, x, rest, kw):\n        return {src}\n"
        );
        let lint = lint_source("m.py", &text);
        let appending: Vec<_> = lint
            .findings
            .iter()
            .filter(|f| f.edits.iter().any(|e| e.content.contains("align_corners")))
            .collect();
        assert!(!appending.is_empty(), "{src}");
        assert!(
            appending
                .iter()
                .all(|f| f.diagnostic.fix.as_ref().is_some_and(|x| !x.safe)),
            "{src}"
        );
    }
}

#[test]
fn deeply_nested_files_are_linted_or_refused_never_a_crash() {
    // Valid Python nests a thousand operators deep. A file too short to exhaust the stack is
    // checked whatever its depth; a longer one nested past what CPython compiles is an ODL000
    // naming the limit, not a stack overflow that takes the whole run down.
    let dir = tempfile::tempdir().unwrap();
    let model = "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x[x > 0]\n";
    let refused = Some("nested more than 10000 levels deep");
    let or_chain: Vec<String> = (0..8_000).map(|i| format!("c == {i}")).collect();
    let cases = [
        (
            "chain.py",
            format!("import torch\ny = 1{}\n", " + 1".repeat(1_000)),
            None,
        ),
        (
            "power.py",
            format!("import torch\ny = 2{}\n", " ** 1".repeat(1_000)),
            None,
        ),
        (
            "negatives.py",
            format!("import torch\ny = [{}]\n", ["-1.5"; 50_000].join(", ")),
            None,
        ),
        (
            "parens.py",
            format!(
                "import torch\ny = {}1{}\n",
                "(".repeat(300),
                ")".repeat(300)
            ),
            None,
        ),
        (
            "short_unary.py",
            format!("import torch\ny = {}x\n", "-".repeat(60_000)),
            None,
        ),
        // Long but flat: a boolean chain is one node, whatever its length; old Mac line ends.
        (
            "flat_or.py",
            format!("import torch\ny = ({})\n", or_chain.join(" or ")),
            None,
        ),
        (
            "carriage_returns.py",
            format!(
                "import torch\r{}",
                "y = torch.relu(x) + 1.0\r".repeat(4_000)
            ),
            None,
        ),
        (
            "deep_parens.py",
            format!(
                "import torch\ny = {}1{}\n",
                "(".repeat(50_000),
                ")".repeat(50_000)
            ),
            // Parentheses are no nodes of the tree.
            None,
        ),
        (
            "deep_lists.py",
            format!(
                "import torch\ny = {}1{}\n",
                "[".repeat(50_000),
                "]".repeat(50_000)
            ),
            refused,
        ),
        (
            "unary.py",
            format!("import torch\ny = {}x\n", "-".repeat(200_000)),
            refused,
        ),
        (
            "attributes.py",
            format!("import torch\ny = x{}\n", ".y".repeat(200_000)),
            refused,
        ),
        (
            "fstring.py",
            format!("import torch\ny = f\"{{{}x}}\"\n", "-".repeat(200_000)),
            refused,
        ),
        // With a syntax error too: the partial tree is as deep.
        (
            "unary_broken.py",
            format!("import torch\ny = {}x)\n", "-".repeat(200_000)),
            refused,
        ),
        (
            "patterns.py",
            format!(
                "import torch\nmatch x:\n    case {}1{}:\n        pass\n",
                "[".repeat(40_000),
                "]".repeat(40_000)
            ),
            refused,
        ),
        (
            "lambdas.py",
            format!("import torch\ny = {}x\n", "lambda a, b: ".repeat(20_000)),
            refused,
        ),
    ];
    for (name, text, _) in &cases {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    std::fs::write(dir.path().join("model.py"), model).unwrap();
    let files = discover(&[dir.path().to_path_buf()]).unwrap();
    let (reports, errors) = lint_files(&files, &Selection::default());
    assert!(errors.is_empty());
    for (name, _, refused) in &cases {
        let report = reports.iter().find(|r| r.path.ends_with(name)).unwrap();
        let messages: Vec<&str> = report
            .findings
            .iter()
            .map(|f| f.diagnostic.message.as_str())
            .collect();
        match refused {
            Some(why) => {
                assert_eq!(messages.len(), 1, "{name}: {messages:?}");
                assert!(messages[0].contains(why), "{name}: {messages:?}");
            }
            None => assert!(messages.is_empty(), "{name}: {messages:?}"),
        }
    }
    // The model beside them is still checked.
    let model = reports
        .iter()
        .find(|r| r.path.ends_with("model.py"))
        .unwrap();
    assert_eq!(model.findings.len(), 1);
}

#[test]
fn helpers_behind_a_packages_reexports_are_model_code() {
    // kit/ops/__init__.py re-exports its modules (`*`, an alias, a submodule alias); the model
    // reaches `peaks` through the package, `warp` through the alias, `center` through the
    // submodule alias, and `trim` through `center` (a helper of a helper in another file).
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    for d in ["kit/ops", "kit/models"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let write = |name: &str, text: &str| std::fs::write(root.join(name), text).unwrap();
    write("kit/__init__.py", "from . import ops\n");
    write("kit/models/__init__.py", "");
    write(
        "kit/ops/__init__.py",
        "from .detect import *\nfrom .detect import warp_by_flow as warp\nfrom . import masks as masks\n",
    );
    write(
        "kit/ops/detect.py",
        "import torch\nimport torch.nn.functional as F\n\n__all__ = ['peaks', 'warp_by_flow', 'trim']\n\n\ndef peaks(heat):\n    return heat.nonzero()\n\n\ndef warp_by_flow(x, grid):\n    return F.grid_sample(x, grid, align_corners=False)\n\n\ndef trim(x, valid):\n    x = x.clone()\n    x[~valid] = 0.0\n    return x\n",
    );
    write(
        "kit/ops/masks.py",
        "import torch\nfrom .detect import trim\n\n\ndef center(z, ids):\n    return trim(z, ids > 0)\n",
    );
    write(
        "kit/models/net.py",
        "import torch\nimport torch.nn as nn\nfrom kit.ops import peaks\nfrom .. import ops\nfrom ..ops import masks as fmask\n\n\nclass Net(nn.Module):\n    def forward(self, x, grid, ids):\n        y = ops.warp(x, grid)\n        return peaks(y), fmask.center(y, ids)\n",
    );
    let detect = root.join("kit/ops/detect.py");
    let expected = vec![
        (8, "ODL007".to_string()),
        (12, "ODL010".to_string()),
        (17, "ODL001".to_string()),
    ];
    let sel = Selection::default();
    let got = |reports: &[source_lint::FileReport]| -> Vec<(usize, String)> {
        let r = reports
            .iter()
            .find(|r| r.path.ends_with("kit/ops/detect.py"))
            .unwrap();
        let mut v: Vec<(usize, String)> = r
            .findings
            .iter()
            .map(|f| (f.line(), f.diagnostic.code.clone()))
            .collect();
        v.sort();
        v
    };
    // The repository walked.
    let files = discover(std::slice::from_ref(&root)).unwrap();
    let (whole, errors) = lint_files(&files, &sel);
    assert!(errors.is_empty());
    assert_eq!(got(&whole), expected);
    // The helper file named alone: its package's other subpackages are read with it.
    let alone = std::slice::from_ref(&detect);
    let context = source_lint::context(alone, alone);
    assert!(context.iter().any(|p| p.ends_with("kit/models/net.py")));
    let (own, errors) = source_lint::lint_files_with_context(alone, &context, &sel, None);
    assert!(errors.is_empty());
    assert_eq!(got(&own), expected);
}

#[test]
fn reexports_name_the_definition_a_python_import_would_find() {
    // An eval-ing factory re-exported by `kit/models/__init__.py` leaves the model in eval mode
    // (ODL017 stays quiet); `kit/utils.py` star-imports `legacy` but defines `resize` itself, so
    // `legacy.resize` is never called (its tensor test is not model code).
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    for d in ["kit/models", "tools"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let write = |name: &str, text: &str| std::fs::write(root.join(name), text).unwrap();
    write("kit/__init__.py", "");
    write(
        "kit/models/__init__.py",
        "from .factory import build_model\n",
    );
    write(
        "kit/models/factory.py",
        "import torch.nn as nn\n\n\ndef build_model(name):\n    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.1))\n    model.eval()\n    return model\n",
    );
    write(
        "kit/legacy.py",
        "import torch\n\n\ndef resize(x):\n    if x.sum() > 0:\n        return x\n    return -x\n",
    );
    write(
        "kit/utils.py",
        "import torch\nfrom .legacy import *\n\n\ndef resize(x):\n    return x * 2\n",
    );
    write(
        "kit/net.py",
        "import torch.nn as nn\nfrom .utils import resize\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return resize(x)\n",
    );
    write(
        "tools/export.py",
        "import torch\nfrom kit.models import build_model\n\ntorch.onnx.export(build_model('net'), (torch.zeros(1, 3),), 'n.onnx')\n",
    );
    let files = discover(std::slice::from_ref(&root)).unwrap();
    let (reports, errors) = lint_files(&files, &Selection::default());
    assert!(errors.is_empty());
    let found: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.findings
                .iter()
                .map(move |f| format!("{}:{} {}", r.display, f.line(), f.diagnostic.code))
        })
        .collect();
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn opset_default_of_a_function_in_a_table_of_jobs() {
    // `jobs = {"warp": export_warp}` then `fn(path)` for each: the default is what exports,
    // unless a call through a name bound to a value may pass the parameter.
    let head = "import torch\nimport torch.nn.functional as F\n\n\
        class Warp(torch.nn.Module):\n    def forward(self, x, g):\n        \
        return F.grid_sample(x, g, align_corners=False)\n\n\
        def export_warp(path, opset: int = 12):\n    \
        torch.onnx.export(Warp().eval(), (), path, opset_version=opset)\n\n\
        jobs = {\"warp\": export_warp}\n";
    let odl020 = |src: &str| {
        project_findings(&[("jobs.py", src)], "ODL020")
            .into_iter()
            .map(|(_, l)| l)
            .collect::<Vec<_>>()
    };
    let defaulted = format!("{head}for name, fn in jobs.items():\n    fn(name + \".onnx\")\n");
    assert_eq!(odl020(&defaulted), vec![9]);
    let keyword = format!("{head}for name, fn in jobs.items():\n    fn(name, opset=17)\n");
    assert_eq!(odl020(&keyword), Vec::<usize>::new());
    let positional = format!("{head}for name, fn in jobs.items():\n    fn(name, 17)\n");
    assert_eq!(odl020(&positional), Vec::<usize>::new());
    // Calls of other names do not go through the table; a table handed elsewhere may pass it.
    let other = format!("{defaulted}m = Warp()\nm(*xs)\n");
    assert_eq!(odl020(&other), vec![9]);
    let handed = format!("{head}run_all({{\"warp\": export_warp}})\n");
    assert_eq!(odl020(&handed), Vec::<usize>::new());
    // A function taken from the table and handed on, or the table handed on, may be given any
    // opset there.
    let submitted = format!("{head}for name, fn in jobs.items():\n    pool.submit(fn, name, 17)\n");
    assert_eq!(odl020(&submitted), Vec::<usize>::new());
    let table_passed = format!("{head}run_all(jobs, 17)\n");
    assert_eq!(odl020(&table_passed), Vec::<usize>::new());
}

#[test]
fn module_level_model_imported_by_another_file_is_theirs() {
    // `model = Net()` exported by a function nobody in the file calls: reported when no other
    // file imports it, left alone when one does (`from nb import model` then `model.eval()`).
    let nb = (
        "nb.py",
        "import torch\nimport torch.nn as nn\n\n\
         class Net(nn.Module):\n    def forward(self, x):\n        return x\n\n\
         model = Net()\n\n\
         def export_onnx(path):\n    torch.onnx.export(model, (torch.zeros(1),), path)\n",
    );
    assert_eq!(
        project_findings(&[nb], "ODL017"),
        vec![("nb.py".to_string(), 11)]
    );
    let run = (
        "run.py",
        "from nb import model, export_onnx\n\nmodel.eval()\nexport_onnx(\"net.onnx\")\n",
    );
    assert_eq!(project_findings(&[nb, run], "ODL017"), vec![]);
}

#[test]
fn helpers_of_a_module_without_forward_are_model_code_where_another_file_calls_them() {
    // `class SensorMixer(nn.Module)` with no `forward`, its `pooled` called by another file's
    // `forward` on a submodule built from that class: model code. Not the same name of another
    // class, and not a call made only under `if self.training:`.
    let mixer = (
        "mixer.py",
        "import torch.nn as nn\n\n\
         class SensorMixer(nn.Module):\n    def pooled(self, z, valid):\n        z[~valid] = 0.0\n        return z\n\n\
         class Matcher(nn.Module):\n    def assign(self, iou):\n        iou[iou < 0.5] = -1\n        return iou\n\n\
         class Pooler(nn.Module):\n    def pooled(self, z, valid):\n        z[~valid] = 1.0\n        return z\n",
    );
    let fusion = (
        "fusion.py",
        "import torch.nn as nn\nfrom mixer import SensorMixer, Matcher\n\n\
         class Fusion(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.mix = SensorMixer()\n        self.matcher = Matcher()\n\n\
         \x20   def forward(self, z, valid, iou=None):\n        if self.training:\n            return self.matcher.assign(iou)\n        return self.mix.pooled(z, valid)\n",
    );
    assert_eq!(
        project_findings(&[mixer, fusion], "ODL001"),
        vec![("mixer.py".to_string(), 5)]
    );
}

#[test]
fn a_preparing_exporter_imported_by_another_file_has_callers_there() {
    // `def export_release(model, path): model = model.cpu(); torch.onnx.export(model, ...)` with
    // nothing in its file using it is judged as a module of its own; imported by name into a
    // file that calls it after `net.eval()`, the callers decide.
    let exporter = (
        "exporter.py",
        "import torch\n\ndef export_release(model, path):\n    model = model.cpu()\n    torch.onnx.export(model, (torch.zeros(1, 3),), path)\n",
    );
    let main = (
        "main.py",
        "import torch.nn as nn\nfrom exporter import export_release\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n\ndef main():\n    net = Net()\n    net.eval()\n    export_release(net, 'net.onnx')\n",
    );
    assert_eq!(
        project_findings(&[exporter], "ODL017"),
        vec![("exporter.py".to_string(), 5)]
    );
    assert!(project_findings(&[exporter, main], "ODL017").is_empty());
}

#[test]
fn odl018_reads_a_config_dataclass_only_when_nothing_sets_it_at_run_time() {
    let base = r#"import torch
from dataclasses import dataclass, field
from typing import List


@dataclass
class ExportConfig:
    output_names: List[str] = field(default_factory=lambda: ["verdict"])


def export(model, x, cfg):
    torch.onnx.export(model, (x,), "m.onnx", input_names=["x"],
                      output_names=list(cfg.output_names),
                      dynamic_axes={"x": {0: "b"}, "score": {0: "b"}})
"#;
    let odl018 = |src: &str| -> Vec<usize> {
        codes(src)
            .into_iter()
            .filter(|(_, c)| c == "ODL018")
            .map(|(l, _)| l)
            .collect()
    };
    // Built at its default in the file: the key "score" names no output.
    let built = format!("{base}\nexport(None, None, ExportConfig())\n");
    assert_eq!(odl018(&built), vec![14]);
    // Never built here (handed in by another module), or set from data at run time: not read.
    assert!(odl018(base).is_empty());
    for runtime in [
        "cfg = ExportConfig()\nfor k, v in {}.items():\n    setattr(cfg, k, v)\nexport(None, None, cfg)\n",
        "cfg = ExportConfig()\nvars(cfg).update({})\nexport(None, None, cfg)\n",
        "cfg = ExportConfig(*[[\"score\"]])\nexport(None, None, cfg)\n",
        "cfg = ExportConfig()\nnames = cfg.output_names\nnames.append(\"score\")\nexport(None, None, cfg)\n",
    ] {
        assert!(odl018(&format!("{base}\n{runtime}")).is_empty(), "{runtime}");
    }
}

#[test]
fn odl018_reads_both_sides_of_a_conditional_dynamic_axes() {
    let src = r#"import torch


def export(model, x, dynamic):
    batch_axes = {"x": {0: "b"}}
    hw_axes = {"x": {2: "h"}, "y": {2: "h"}}
    torch.onnx.export(model, (x,), "a.onnx", input_names=["x"], output_names=["out"],
                      dynamic_axes=batch_axes if dynamic else hw_axes)
    torch.onnx.export(model, (x,), "b.onnx", input_names=["x"], output_names=["out"],
                      dynamic_axes={"z": {0: "b"}} if dynamic else {})
"#;
    let found: Vec<usize> = codes(src)
        .into_iter()
        .filter(|(_, c)| c == "ODL018")
        .map(|(l, _)| l)
        .collect();
    assert_eq!(found, vec![6, 10]);
}

#[test]
fn odl012_leaves_functions_alone_when_the_file_registers_a_python_op_symbolic() {
    let function = r#"import torch


class SoftClamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(0, 1)


class LeakyFloor(SoftClamp):
    @staticmethod
    def forward(ctx, x):
        return x.clamp_min(0)


class Net(torch.nn.Module):
    def forward(self, x):
        return LeakyFloor.apply(SoftClamp.apply(x))
"#;
    let odl012 = |src: &str| -> Vec<usize> {
        codes(src)
            .into_iter()
            .filter(|(_, c)| c == "ODL012")
            .map(|(l, _)| l)
            .collect()
    };
    assert_eq!(odl012(function), vec![4, 10]);
    let registered = format!(
        "{function}\n\ndef python_op(g, *args, **kwargs):\n    return g.op(\"Relu\", args[0])\n\n\ntorch.onnx.register_custom_op_symbolic(\"prim::PythonOp\", python_op, 1)\n"
    );
    assert!(odl012(&registered).is_empty());
}
