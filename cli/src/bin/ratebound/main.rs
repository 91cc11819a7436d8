//! The CLI: `check` and `explain` a configuration with the filter's own
//! parser, and print its JSON Schema. Everything it says comes from the
//! libraries (`ratebound::reading`, `ratebound_cli`); each command reads its arguments and
//! prints in a file of its own, and this one dispatches.

mod args;
mod check;
mod completions;
mod console;
mod diff;
mod explain;
mod load;
mod openapi;
mod output;
mod rls_config;
mod schema;
mod top;
mod version;

use args::Command;
use output::{USAGE, VALID};
use std::process::ExitCode;

fn main() -> ExitCode {
    let code = match args::parse(std::env::args_os()) {
        Ok(command) => run(command),
        Err(e) => {
            // Help and --version are "errors" that print to stdout and exit 0;
            // a usage error prints itself with a short usage: exit 2.
            let _ = e.print();
            if e.use_stderr() {
                USAGE
            } else {
                VALID
            }
        }
    };
    ExitCode::from(code)
}

/// Each command in its own file.
fn run(command: Command) -> u8 {
    match command {
        Command::Version => version::run(),
        Command::Completions { shell } => completions::run(shell),
        Command::Openapi(o) => openapi::run(&o),
        Command::Top(t) => top::run(&t),
        Command::Console(c) => console::run(&c),
        Command::Schema => schema::run(),
        Command::Check(c) => check::run(&c),
        Command::RlsConfig(r) => rls_config::run(&r),
        Command::Explain(e) => explain::run(e),
        Command::Diff(d) => diff::run(&d),
    }
}
