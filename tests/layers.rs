//! The crate's folders are floors: each imports only the floors below it,
//! so no circle can form and the ground floor (`count`, the counting
//! engine) stands alone. Read from the source: every `crate::<folder>` a
//! folder's code names (comments aside) must be on a floor below it.

#![allow(clippy::unwrap_used)] // a test: a missing file is a failure
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// Lowest first. A folder may import any folder before it in this list.
const FLOORS: &[&str] = &[
    "count",    // windows, stores, lanes and their entries, fleet arithmetic
    "reply",    // what a client is told
    "config",   // what users write, and the compiled plan
    "stats",    // every stat's name, kind and grammar (src/stats.rs)
    "identity", // who the caller is
    "rls",      // the rate-limit service's protocol
    "reading",  // what is said about a configuration (the module logs its warnings)
    "pipeline", // one request's decision, over the Host seam
    "node",     // a root context's life, over the NodeHost seam
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The folders `folder`'s code names as `crate::<folder>`, itself aside.
fn imports(folder: &str) -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let dir = src.join(folder);
    if dir.is_dir() {
        rust_files(&dir, &mut files);
    } else {
        files.push(src.join(format!("{folder}.rs")));
    }
    let mut named = BTreeSet::new();
    for file in files {
        for line in fs::read_to_string(&file).unwrap().lines() {
            let code = line.split("//").next().unwrap();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != folder && FLOORS.contains(&name.as_str()) {
                    named.insert(name);
                }
            }
        }
    }
    named
}

#[test]
fn every_folder_imports_only_the_floors_below_it() {
    let mut wrong = Vec::new();
    for (floor, folder) in FLOORS.iter().enumerate() {
        for named in imports(folder) {
            let at = FLOORS.iter().position(|f| *f == named).unwrap();
            if at > floor {
                wrong.push(format!("{folder} -> {named}"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports that run back up: {wrong:?}");
}

#[test]
fn the_counting_engine_imports_nothing_else_of_the_crate() {
    assert_eq!(imports("count"), BTreeSet::new());
}

#[test]
fn every_folder_of_src_is_on_a_floor() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if name != "bin" && name != "lib" {
            assert!(FLOORS.contains(&name.as_str()), "src/{name} has no floor");
        }
    }
}

/// The identifiers `path`'s code (comments aside) names, under `src/`: a
/// file, or every file of a folder.
fn identifiers(path: &str) -> BTreeSet<String> {
    let at = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(path);
    let mut files = Vec::new();
    if at.is_dir() {
        rust_files(&at, &mut files);
    } else {
        files.push(at);
    }
    let mut named = BTreeSet::new();
    for file in files {
        for line in fs::read_to_string(&file).unwrap().lines() {
            let code = line.split("//").next().unwrap();
            named.extend(
                code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .map(str::to_string),
            );
        }
    }
    named
}

/// Inside `config`, two rooms: `written` (what users write, and its
/// checks) never names `plan` (what it compiles to), and the request
/// readings both use (`normalize`, `operations`) name neither, so no
/// circle can form between them.
#[test]
fn the_written_configuration_never_names_the_plan() {
    assert!(
        !identifiers("config/written").contains("plan"),
        "src/config/written names the plan"
    );
    for shared in ["config/normalize.rs", "config/operations.rs"] {
        let named = identifiers(shared);
        assert!(
            !named.contains("plan") && !named.contains("written"),
            "src/{shared} names a room of config"
        );
    }
}
