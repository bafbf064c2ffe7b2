//! ## What it does
//! Flags the deprecated `F.upsample`, `F.upsample_nearest` and `F.upsample_bilinear`, and the
//! deprecated modules `nn.UpsamplingNearest2d` and `nn.UpsamplingBilinear2d`, also bound for later
//! calls by `functools.partial(F.upsample_bilinear, scale_factor=2)`. The functions are left alone
//! in data, training and evaluation code beside a model, which export does not run (not in a
//! branch of the model's own code that export skips, `if self.training: aux = F.upsample(...)`
//! or the eager side of `torch.onnx.is_in_onnx_export()`: the model's code, kept as written).
//!
//! ## Why is this bad?
//! They are thin deprecated wrappers over `F.interpolate` (`torch/nn/functional.py`:
//! "This function is deprecated in favor of torch.nn.functional.interpolate";
//! `torch/nn/modules/upsampling.py`: "This class is deprecated in favor of interpolate"), warn on
//! every call, and hide the `align_corners` choice: `upsample_bilinear` means `align_corners=True`,
//! which exports as `Resize` with `coordinate_transformation_mode="align_corners"`, a mode some
//! backends implement differently from PyTorch.
//!
//! ## Example
//! ```python
//! y = F.upsample(x, scale_factor=2, mode="nearest")
//! z = F.upsample_bilinear(x, scale_factor=2)
//! ```
//!
//! ## Fix
//! Call `F.interpolate` with the same arguments (safe fix; for the `_bilinear`/`_nearest`
//! variants the fix spells out the mode they imply):
//! ```python
//! y = F.interpolate(x, scale_factor=2, mode="nearest")
//! z = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::rules::append_argument;
use crate::Edit;
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL013",
    name: "deprecated-upsample",
    severity: Severity::Warning,
    fix: FixKind::Safe,
    summary: "deprecated `F.upsample*` / `nn.Upsampling*2d`: use `F.interpolate` / `nn.Upsample`",
    source: include_str!("deprecated_upsample.rs"),
};

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    let Some(q) = ch.torch_fn(call) else {
        check_partial(ch, call);
        return;
    };
    let (extra, replacement) = match q.as_str() {
        "torch.nn.functional.upsample" => ("", "interpolate"),
        "torch.nn.functional.upsample_nearest" => (", mode=\"nearest\"", "interpolate"),
        "torch.nn.functional.upsample_bilinear" => {
            (", mode=\"bilinear\", align_corners=True", "interpolate")
        }
        "torch.nn.UpsamplingNearest2d" | "torch.nn.modules.upsampling.UpsamplingNearest2d" => {
            (", mode=\"nearest\"", "Upsample")
        }
        "torch.nn.UpsamplingBilinear2d" | "torch.nn.modules.upsampling.UpsamplingBilinear2d" => {
            (", mode=\"bilinear\", align_corners=True", "Upsample")
        }
        _ => return,
    };
    // `F.upsample(img, ...)` in data augmentation or training code beside a model: not what
    // export runs (a deprecated module is built for a model wherever it is built). A branch of
    // the model's own code that export skips (training-only, eager-only) is still the model's
    // code: its deprecated call is reported.
    if replacement == "interpolate" && ch.in_side_code() && !ch.in_guarded_branch() {
        return;
    }
    let name = q.rsplit('.').next().unwrap_or("upsample").to_string();
    let spelled = if replacement == "Upsample" {
        "nn.Upsample"
    } else {
        "F.interpolate"
    };
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("`{name}` is deprecated; `{spelled}` is the supported spelling"),
    );
    ch.help(i, format!("use `{spelled}(...{extra})`"));
    // Only an attribute spelling (`F.upsample`, `torch.nn.functional.upsample`) can be renamed
    // without touching imports.
    let Expr::Attribute(a) = call.func.as_ref() else {
        ch.fix(
            i,
            "replace with `interpolate` (and import it)",
            false,
            vec![],
        );
        return;
    };
    let has_kw = |k: &str| {
        call.arguments
            .keywords
            .iter()
            .any(|kw| kw.arg.as_ref().is_some_and(|x| x.id.as_str() == k))
    };
    if !extra.is_empty()
        && (has_kw("mode") || has_kw("align_corners") || call.arguments.args.len() > 3)
    {
        ch.fix(i, "replace with `interpolate`", false, vec![]);
        return;
    }
    let mut edits = vec![Edit {
        start: a.attr.range().start().to_usize(),
        end: a.attr.range().end().to_usize(),
        content: replacement.into(),
    }];
    if !extra.is_empty() {
        edits.push(append_argument(
            ch.source,
            call,
            extra.trim_start_matches(", "),
        ));
    }
    // Appending `mode=...` after `**kw` may repeat one `kw` holds: then only suggested.
    let safe = extra.is_empty() || !crate::rules::splices_arguments(call);
    ch.fix(
        i,
        format!("replace with `interpolate(...{extra})`"),
        safe,
        edits,
    );
}

/// `partial(F.upsample_bilinear, scale_factor=2)`: the deprecated function bound for later
/// calls, reported where it is named (renaming it alone would drop the mode it implies, so the
/// fix is only described).
fn check_partial(ch: &mut Checker, call: &ast::ExprCall) {
    let Some(q) = crate::rules::partial_of_torch(ch, call) else {
        return;
    };
    let spelled = match q.as_str() {
        "torch.nn.functional.upsample"
        | "torch.nn.functional.upsample_nearest"
        | "torch.nn.functional.upsample_bilinear" => "F.interpolate",
        "torch.nn.UpsamplingNearest2d"
        | "torch.nn.modules.upsampling.UpsamplingNearest2d"
        | "torch.nn.UpsamplingBilinear2d"
        | "torch.nn.modules.upsampling.UpsamplingBilinear2d" => "nn.Upsample",
        _ => return,
    };
    let name = q.rsplit('.').next().unwrap_or("upsample").to_string();
    let i = ch.report(
        &RULE,
        call.arguments.args[0].range(),
        format!("`{name}` is deprecated; `{spelled}` is the supported spelling"),
    );
    ch.help(
        i,
        format!("bind `{spelled}` instead, with the mode (and `align_corners`) `{name}` implies"),
    );
}
