//! The console: checks a configuration with the filter's own parser.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = match args.get(1).map(String::as_str) {
        Some("--version") => {
            println!("ratebound {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("check") => check(args.get(2).map(String::as_str).unwrap_or("-")),
        _ => {
            eprintln!("usage: ratebound check FILE|-\n       ratebound --version");
            2
        }
    };
    std::process::exit(code);
}

fn check(path: &str) -> i32 {
    use std::io::Read;
    let mut bytes = Vec::new();
    let read = if path == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|f| {
            f.take(ratebound::config::MAX_CONFIG_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .map(|_| ())
        })
    };
    if let Err(e) = read {
        eprintln!("{path}: {e}");
        return 1;
    }
    match ratebound::config::parse(&bytes) {
        Ok(c) => {
            println!("{path}: valid ({} routes)", c.routes.len());
            0
        }
        Err(errors) => {
            for e in errors {
                println!("error: {e}");
            }
            1
        }
    }
}
