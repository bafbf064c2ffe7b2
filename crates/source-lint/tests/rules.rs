//! Rule fixtures: `tests/fixtures/rules/<CODE>.py` marks every expected hit with
//! `# expect: <CODE>` on its line; every other line must stay quiet for that rule. The rendered
//! findings (and the text after safe fixes) of each fixture are an insta snapshot.

use diagnostics::Severity;
use source_lint::{apply_edits, lint_files, Selection, RULES, SECTIONS};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(code: &str) -> PathBuf {
    crate_dir()
        .join("tests/fixtures/rules")
        .join(format!("{code}.py"))
}

/// Lints files with the paths relative to the crate, so snapshots do not depend on the checkout.
fn lint(paths: &[&Path], select: &[&str]) -> Vec<source_lint::FileReport> {
    let cwd = crate_dir();
    let rel: Vec<PathBuf> = paths
        .iter()
        .map(|p| p.strip_prefix(&cwd).unwrap_or(p).to_path_buf())
        .collect();
    let prev = std::env::current_dir().unwrap();
    assert_eq!(
        prev, cwd,
        "cargo runs integration tests from the crate directory"
    );
    let sel = Selection {
        select: select.iter().map(|s| s.to_string()).collect(),
        ignore: vec![],
    };
    let (reports, errors) = lint_files(&rel, &sel);
    assert!(errors.is_empty(), "{errors:?}");
    reports
}

fn expected_lines(text: &str, code: &str) -> BTreeSet<usize> {
    let marker = format!("# expect: {code}");
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(&marker))
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn every_rule_hits_exactly_its_marked_lines() {
    for rule in RULES {
        let path = fixture(rule.code);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: every rule needs a fixture: {e}", path.display()));
        let expected = expected_lines(&text, rule.code);
        assert!(
            !expected.is_empty(),
            "{}: no `# expect: {}` marker",
            path.display(),
            rule.code
        );
        let reports = lint(&[&path], &[rule.code]);
        let got: BTreeSet<usize> = reports[0].findings.iter().map(|f| f.line()).collect();
        assert_eq!(
            got, expected,
            "{}: lines with {} findings",
            rule.code, rule.code
        );
        for f in &reports[0].findings {
            assert_eq!(f.diagnostic.code, rule.code);
            // ODL016 reports a factory sized by a size read from a tensor as a watch point.
            let watch_point = rule.code == "ODL016" && f.diagnostic.severity == Severity::Info;
            assert!(
                f.diagnostic.severity == rule.severity || watch_point,
                "{}",
                rule.code
            );
            if let Some(fix) = &f.diagnostic.fix {
                assert!(
                    rule.fix != source_lint::FixKind::None,
                    "{} reports a fix",
                    rule.code
                );
                if fix.safe {
                    assert_eq!(rule.fix, source_lint::FixKind::Safe, "{}", rule.code);
                }
            }
        }
    }
}

#[test]
fn rendered_findings_and_fixes_per_rule() {
    for rule in RULES {
        let path = fixture(rule.code);
        let reports = lint(&[&path], &[rule.code]);
        let rep = &reports[0];
        let diags: Vec<_> = rep.findings.iter().map(|f| f.diagnostic.clone()).collect();
        let mut out = diagnostics::render_human(&diags, &|_| Some(rep.source.clone()));
        let safe: Vec<&source_lint::Edit> = rep
            .findings
            .iter()
            .filter(|f| f.diagnostic.fix.as_ref().is_some_and(|x| x.safe))
            .flat_map(|f| &f.edits)
            .collect();
        if !safe.is_empty() {
            let (fixed, n) = apply_edits(&rep.source, &safe);
            out.push_str(&format!("\n--- after --fix ({n} edits) ---\n{fixed}"));
        }
        insta::assert_snapshot!(rule.code, out);
    }
}

#[test]
fn every_rule_documents_every_section() {
    for rule in RULES {
        for s in SECTIONS {
            assert!(
                rule.section(s).is_some(),
                "{} ({}) lacks `## {s}`",
                rule.code,
                rule.name
            );
        }
        let example = rule.section("Example").unwrap();
        assert!(
            example.contains("```python"),
            "{}: Example needs a python block",
            rule.code
        );
        assert!(
            !rule.summary.is_empty()
                && rule
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '-')
        );
    }
    let mut codes: Vec<&str> = RULES.iter().map(|r| r.code).collect();
    codes.sort();
    codes.dedup();
    assert_eq!(codes.len(), RULES.len(), "duplicate rule codes");
}

#[test]
fn docs_rules_md_is_generated_from_the_registry() {
    let path = crate_dir().join("../../docs/rules.md");
    let want = source_lint::registry::rules_markdown();
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want && std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert_eq!(
        have, want,
        "docs/rules.md is stale: rerun with UPDATE_DOCS=1"
    );
}

#[test]
fn mixed_fixtures_detect_every_marked_hazard() {
    // Modules and export scripts with hazards of every kind, as users write them: our own
    // `hazards.py`, `seeds.py` adapted from the code in the field reports, `heldout.py`,
    // written after the rules and kept as it was first measured, and `families.py`, the forms
    // the fourth to sixth held-out corpus rounds taught the rules.
    for name in ["hazards.py", "seeds.py", "heldout.py", "families.py"] {
        let path = crate_dir().join("tests/fixtures").join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let reports = lint(&[&path], &[]);
        let got: BTreeSet<(usize, String)> = reports[0]
            .findings
            .iter()
            .map(|f| (f.line(), f.diagnostic.code.clone()))
            .collect();
        let mut want = BTreeSet::new();
        for (i, l) in text.lines().enumerate() {
            if let Some(pos) = l.find("# expect: ") {
                for code in l[pos + 10..].split(',') {
                    want.insert((i + 1, code.trim().to_string()));
                }
            }
        }
        assert!(want.len() >= 15, "{name}");
        let missed: Vec<_> = want.difference(&got).collect();
        let extra: Vec<_> = got.difference(&want).collect();
        assert!(
            missed.is_empty() && extra.is_empty(),
            "{name}: missed {missed:?}, unexpected {extra:?}"
        );
    }
}

#[derive(serde::Deserialize)]
struct CorpusEntry {
    file: String,
    line: usize,
    code: String,
    why: String,
}

#[derive(serde::Deserialize)]
struct ExpectedMisses {
    missed: Vec<CorpusEntry>,
    clean: Vec<CorpusEntry>,
}

/// The held-out corpus's directories, in the order the rounds added them.
const CORPUS_DIRS: &[&str] = &[
    "vision",
    "sequence",
    "misc",
    "llm",
    "edge",
    "science",
    "generation",
    "research",
    "production",
    "audio",
    "legacy",
    "robotics",
    "nlp",
    "mobile",
    "graphs",
    "video",
    "geo",
    "anomaly",
    "climate",
    "recsys",
    "pathology",
    "selfsup",
    "timeseries",
    "tracking",
    "tabular",
    "diffusion",
    "pose",
    "games",
    "industrial",
    "multimodal",
    "pointcloud",
    "clinical",
    "textvision",
    "agri",
    "textclass",
    "streaming",
    "ocr",
    "restoration",
    "face",
    "speech",
    "nerf",
    "driving",
    "retrieval",
    "seg3d",
    "music",
    "molecules",
    "tryon",
    "gesture",
    "lipread",
    "spiking",
    "finance",
    "flow",
    "matching",
    "matting",
    "signals",
    "biosignals",
    "crowd",
    "motion",
    "vos",
    "registration",
    "mri",
    "codec",
    "qat",
    "sketch",
    "genomics",
    "surgical",
    "depth",
    "layout",
    "wildlife",
    "avatar",
    "astro",
    "kws",
    "sports",
    "retail",
    "protein",
    "ultrasound",
    "uav",
    "separation",
    "signlang",
    "radar",
    "spectra",
    "fashion",
    "nowcast",
    "xray",
    "logistics",
    "tts",
    "energy",
    "microscopy",
    "seismic",
    "pde",
    "retina",
    "handwriting",
    "odometry",
    "gait",
    "change",
    "captioning",
    "mesh",
    "dewarp",
    "illustration",
    "food",
    "sonar",
    "har",
    "interp",
    "enhance",
    "trajectory",
    "beauty",
    "quality",
    "education",
    "pointtrack",
    "scenegraph",
    "fingerprint",
    "materials",
    "lane",
    "diarization",
    "ocean",
    "tables",
    "wireless",
    "insurance",
    "cryoem",
    "extraction",
    "eda",
    "garments",
    "quantum",
    "epidemics",
    "fonts",
    "grasping",
    "wafer",
    "code",
    "livestock",
    "traffic",
    "battery",
    "gaze",
    "dental",
    "sleep",
    "forensics",
    "ampsim",
    "parking",
    "keystroke",
    "legal",
    "wildfire",
    "pills",
    "flood",
    "welding",
    "aquaculture",
    "mining",
    "maritime",
    "beekeeping",
    "radiotherapy",
    "windpower",
    "textile",
    "recycling",
    "dermatology",
    "railway",
    "additive",
    "structural",
    "entomology",
    "holography",
    "veterinary",
    "powergrid",
    "calligraphy",
    "cytometry",
    "hvac",
    "archaeology",
    "glaciology",
    "bioprocess",
    "paleontology",
    "olfaction",
    "dance",
    "viticulture",
    "prosthetics",
    "aviation",
    "brewing",
    "esports",
    "forestry",
    "numismatics",
    "hydroponics",
    "avalanche",
    "tattoo",
    "bakery",
    "carbon",
    "puppetry",
    "dialysis",
    "lighthouse",
    "chess",
    "mycology",
    "volcanology",
    "ceramics",
    "speleology",
    "conservation",
    "skateboarding",
    "heliophysics",
    "perfumery",
    "bridges",
    "cartography",
    "ornithology",
    "horology",
    "reefs",
    "stagecraft",
    "glassworks",
    "tunnelling",
    "luthiery",
    "philately",
    "wetlands",
    "dairy",
    "tea",
    "ropeways",
    "kelp",
    "cranes",
    "bookbinding",
    "saffron",
    "velodrome",
    "orchards",
    "canals",
    "organs",
    "locksmith",
    "falconry",
    "papermaking",
    "cables",
    "sailing",
    "bonsai",
    "escalators",
    "mosaics",
    "ballooning",
    "bells",
    "kilns",
    "rowing",
    "lacquer",
    "pottery_wheel",
    "orchestra",
    "tidepools",
    "quarrying",
    "ferries",
    "sugarcane",
    "archery",
    "printing",
    "snowmaking",
    "irrigation",
    "curling",
    "cheesemaking",
    "tramways",
    "opera",
    "lumber",
    "fencing",
    "planetarium",
    "saltworks",
    "knitting",
    "submarines",
    "bowling",
    "typesetting",
    "marathons",
    "greenhouse",
    "skiresorts",
    "pharmacy",
    "shipyards",
    "carwash",
    "vinyl",
    "rodeo",
    "laundromat",
    "zoo",
    "rigging",
    "fireworks",
    "sushi",
    "chimneys",
    "orienteering",
    "pawnshops",
    "hotsprings",
    "lifeguards",
    "pianotuning",
    "cobblers",
    "doggrooming",
    "amusementparks",
    "bikerepair",
    "beachvolley",
    "taxidermy",
    "glassblowing",
    "dentallab",
    "ferriswheels",
    "mushroomfarms",
    "climbinggyms",
    "fountains",
    "tailoring",
    "cidermaking",
    "icerinks",
    "stainedglass",
    "aquariums",
    "blacksmithing",
    "florists",
    "clockrepair",
    "hatmaking",
    "waterparks",
    "kitesurfing",
    "saddlery",
    "stonemasonry",
    "icecream",
    "rollerrinks",
    "tapestry",
    "distilleries",
    "letterpress",
    "ziplines",
    "beachcleanup",
    "carousels",
    "hedgemazes",
    "aqueducts",
    "ballet",
    "canoeing",
    "dogsledding",
    "embroidery",
    "funiculars",
    "jewelry",
    "lavenderfarms",
    "mountainhuts",
    "nailsalons",
    "observatories",
    "paragliding",
    "quilting",
    "rafting",
    "sawmills",
    "tanneries",
    "upholstery",
    "wastewater",
    "vendingmachines",
    "woodturning",
    "yachting",
    "bicyclecouriers",
    "candlemaking",
    "drycleaning",
    "escaperooms",
    "goatdairies",
    "harbourpilots",
    "brickkilns",
    "icefishing",
    "junkyards",
    "marinas",
    "orchids",
    "scuba",
    "bobsleigh",
    "cooperage",
    "dredging",
    "fishmarkets",
    "gondolas",
    "hatcheries",
    "kennels",
    "lacemaking",
    "monorails",
    "oysterfarms",
    "postoffices",
    "ropemaking",
    "rickshaws",
    "saunas",
    "tollbooths",
    "aviaries",
    "elevators",
    "foundries",
    "chocolatiers",
    "damsafety",
    "glaziers",
    "restaurantkitchens",
    "shoefactories",
    "trampolineparks",
    "icecarving",
    "jamfactories",
    "hopdrying",
    "parcellockers",
    "minetrucks",
    "skatesharpening",
    "cablecars",
    "screenprinting",
    "watermeters",
    "sheepshearing",
    "tyrefitting",
    "weatherstations",
    "noodlefactories",
    "cranberrybogs",
    "pearldiving",
    "saltmarshes",
    "signalboxes",
    "tofuworks",
    "lockkeepers",
    "maplesyrup",
    "pianofactories",
    "seedbanks",
    "windtunnels",
    "rugweaving",
    "hedgelaying",
    "vineyards",
    "stonequarries",
    "bindery",
    "glasshouses",
    "trackcycling",
    "mints",
    "compostsites",
    "watermills",
    "peatcutting",
    "tugboats",
    "dyeworks",
    "thatching",
    "coalmines",
    "radiostations",
    "wickerwork",
    "gliderclubs",
    "chimneysweep",
    "furriers",
    "skijump",
    "ferrymen",
    "stablemanagement",
    "sandcastle",
    "bargemen",
    "tramstops",
    "blindmakers",
    "kiteshops",
    "lamplighters",
    "millwrights",
    "cooperatives",
    "wellsinking",
    "chandlers",
    "drystone",
    "sluicekeepers",
    "buttonmakers",
    "pewterers",
    "limeburners",
    "ropewalks",
    "glovers",
    "slaters",
    "wheelwrights",
    "thimblemakers",
    "tinsmiths",
    "farriers",
    "bellowsmakers",
    "cordwainers",
    "hatters",
    "sievemakers",
    "charcoalburners",
    "quillcutters",
    "chainmakers",
    "barrelmakers",
    "whipmakers",
    "broommakers",
    "sailmakers",
    "basketweavers",
    "cutlers",
    "soapmakers",
    "toolmakers",
    "feltmakers",
];

#[test]
fn corpus_hazards_are_found_and_clean_code_is_quiet() {
    // The held-out corpus (tests/fixtures/corpus/README.md): every marked hazard is found and
    // the clean files stay quiet, except the explained entries of expected_misses.toml, which
    // must still fail (fixed ones are removed from the list, so it only shrinks).
    let root = crate_dir().join("tests/fixtures/corpus");
    let expected: ExpectedMisses =
        toml::from_str(&std::fs::read_to_string(root.join("expected_misses.toml")).unwrap())
            .unwrap();
    for e in expected.missed.iter().chain(&expected.clean) {
        assert!(e.why.len() > 20, "{}:{} needs a reason", e.file, e.line);
    }
    let key = |e: &CorpusEntry| (e.file.clone(), e.line, e.code.clone());
    let allowed_missed: BTreeSet<_> = expected.missed.iter().map(key).collect();
    let allowed_clean: BTreeSet<_> = expected.clean.iter().map(key).collect();
    let (mut want_all, mut hit_all, mut clean_lines) = (0, 0, 0);
    let mut missed = BTreeSet::new();
    let mut clean_findings = BTreeSet::new();
    for dir in CORPUS_DIRS {
        // Flat directories, and trees laid out as repositories (`models/`, `tools/`).
        let files: Vec<PathBuf> = source_lint::discover(&[root.join(dir)]).unwrap();
        let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        let reports = lint(&refs, &[]);
        for (path, report) in files.iter().zip(&reports) {
            let name = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(path).unwrap();
            let got: BTreeSet<(usize, String)> = report
                .findings
                .iter()
                .map(|f| (f.line(), f.diagnostic.code.clone()))
                .collect();
            if name.contains("/clean_") {
                clean_lines += text.lines().count();
                for (line, code) in got {
                    clean_findings.insert((name.clone(), line, code));
                }
                continue;
            }
            for (i, l) in text.lines().enumerate() {
                let Some(pos) = l.find("# expect: ") else {
                    continue;
                };
                for code in l[pos + 10..].split(',') {
                    let code = code.trim().to_string();
                    want_all += 1;
                    if got.contains(&(i + 1, code.clone())) {
                        hit_all += 1;
                    } else {
                        missed.insert((name.clone(), i + 1, code));
                    }
                }
            }
        }
    }
    println!(
        "corpus: {hit_all} of {want_all} marked hazards found; {} findings in {clean_lines} clean lines",
        clean_findings.len()
    );
    assert!(want_all >= 1960, "the corpus has {want_all} marked hazards");
    let new_misses: Vec<_> = missed.difference(&allowed_missed).collect();
    let fixed: Vec<_> = allowed_missed.difference(&missed).collect();
    assert!(
        new_misses.is_empty(),
        "hazards no longer found: {new_misses:?}"
    );
    assert!(
        fixed.is_empty(),
        "found now, remove from expected_misses.toml: {fixed:?}"
    );
    let new_fp: Vec<_> = clean_findings.difference(&allowed_clean).collect();
    let gone: Vec<_> = allowed_clean.difference(&clean_findings).collect();
    assert!(new_fp.is_empty(), "findings on clean files: {new_fp:?}");
    assert!(
        gone.is_empty(),
        "quiet now, remove from expected_misses.toml: {gone:?}"
    );
}

#[test]
fn corpus_files_linted_alone_report_what_their_directory_reports() {
    // A pre-commit hook passes only the changed files: each corpus file named alone is read
    // with its directory as context (`source_lint::context`), so its findings are the ones the
    // whole directory's run gives it, cross-file ones included (helpers of a shared ops module
    // called from models, an export script's opset against the models it imports).
    let root = crate_dir().join("tests/fixtures/corpus");
    let sel = Selection::default();
    let findings = |r: &source_lint::FileReport| -> BTreeSet<(usize, String)> {
        r.findings
            .iter()
            .map(|f| (f.line(), f.diagnostic.code.clone()))
            .collect()
    };
    let (mut files_checked, mut cross_file) = (0, 0);
    for dir in CORPUS_DIRS {
        let files = source_lint::discover(&[root.join(dir)]).unwrap();
        let (whole, errors) = lint_files(&files, &sel);
        assert!(errors.is_empty());
        for (path, report) in files.iter().zip(&whole) {
            let alone = std::slice::from_ref(path);
            let context = source_lint::context(alone, alone);
            assert!(!context.contains(path));
            let (own, errors) = source_lint::lint_files_with_context(alone, &context, &sel, None);
            assert!(errors.is_empty());
            assert_eq!(own.len(), 1);
            assert_eq!(
                findings(&own[0]),
                findings(report),
                "{} linted alone",
                path.display()
            );
            let (isolated, _) = lint_files(alone, &sel);
            cross_file += findings(report).difference(&findings(&isolated[0])).count();
            files_checked += 1;
        }
    }
    println!(
        "corpus: {files_checked} files linted alone; {cross_file} findings need their neighbours"
    );
    assert!(
        cross_file > 100,
        "only {cross_file} findings depend on other files"
    );
}
