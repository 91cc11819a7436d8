// Stamps the git commit so the CLI can say what it is, and hands
// `ratebound console` the browser core when it was built.
include!("../build-support/git_commit.rs");

fn main() {
    console_core();
    git_commit();
}

/// The browser core (console-web/pkg, made by scripts/console-web.sh)
/// copied where `ratebound console` embeds it; empty files when it was not
/// built, so `cargo build` works on a fresh clone (the page then says how
/// to build it). The directory is in git (its .gitignore), so watching it
/// never reruns this for nothing.
fn console_core() {
    let Some(out) = std::env::var_os("OUT_DIR").map(std::path::PathBuf::from) else {
        return;
    };
    let pkg = std::path::Path::new("../console-web/pkg");
    println!("cargo:rerun-if-changed={}", pkg.display());
    for name in ["ratebound_console_web.js", "ratebound_console_web_bg.wasm"] {
        let bytes = std::fs::read(pkg.join(name)).unwrap_or_default();
        let _ = std::fs::write(out.join(name), bytes);
    }
}
