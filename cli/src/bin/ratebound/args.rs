//! The command line, declared with clap: subcommands, their flags, help,
//! suggestions for misspellings and shell completions.

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// `--version`: the version and the git commit the binary was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("RATEBOUND_GIT_COMMIT"),
    ")"
);

const EXIT_STATUS: &str = "\
Exit status: 0 valid, 1 invalid (or --strict and warnings), 2 usage error or unreadable file";

#[derive(Debug, Parser)]
#[command(
    name = "ratebound",
    version = VERSION,
    about = "Check, explain and generate ratebound filter configurations",
    after_help = EXIT_STATUS,
    arg_required_else_help = true,
    disable_help_subcommand = false,
    propagate_version = false
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// What `rls-config` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RlsFormat {
    /// The service's configuration file
    Yaml,
    /// That file in a Kubernetes ConfigMap
    Configmap,
}

#[derive(Debug, PartialEq, Subcommand)]
pub enum Command {
    /// Validate configurations (JSON or YAML) with the filter's own parser
    ///
    /// Each FILE is a configuration, an Istio WasmPlugin manifest (its
    /// spec.pluginConfig is checked) or a stream of YAML documents (each
    /// WasmPlugin is checked, other Kubernetes objects skipped with a note);
    /// a DIR is its *.json, *.yaml and *.yml files (-R: and its
    /// subdirectories'). Lists every error with its JSON path, line and
    /// column, then the warnings and notes, then what is wrong across them
    /// (two WasmPlugins with one instance on the same workloads, a
    /// rate-limit service cluster no EnvoyFilter adds). YAML is read as
    /// kubectl reads it (YAML 1.1). The exit status is the worst of all.
    #[command(after_help = EXIT_STATUS)]
    Check(Check),
    /// Every route's bounds in plain words, by the phase they are checked in
    ///
    /// FILE is read as by `check`. Each bound is said in one line (what its
    /// number admits on --nodes nodes), with its warnings; --verbose adds its
    /// full reading under the line. With --format json: the explanation as
    /// JSON, each bound's `line` and `detail` both (an array of {document,
    /// holder, explain} when FILE holds several configurations), or check's
    /// JSON errors when it is invalid.
    #[command(after_help = EXIT_STATUS)]
    Explain(Explain),
    /// The envoyproxy/ratelimit configuration (YAML) for the installation bounds
    ///
    /// --format configmap wraps it in the Kubernetes ConfigMap the service's
    /// manifests mount (deploy/kubernetes/ratelimit.yaml, the Helm chart's
    /// ratelimit.configMaps: ratelimit-config in namespace ratelimit, the
    /// file under the key <domain>.yaml), ready for `kubectl apply -f -`.
    /// Several FILEs (one domain each) give one ConfigMap per domain,
    /// ratelimit-config-<domain>, so deploying a domain never replaces
    /// another's; --name names them instead (one per FILE, in order). Two
    /// FILEs with the same domain are refused: the service would refuse its
    /// whole configuration.
    #[command(after_help = EXIT_STATUS)]
    RlsConfig(RlsConfig),
    /// Give operations of an OpenAPI 3.0/3.1 document bounds of their own
    ///
    /// FILE (--bounds) maps an operationId, or "METHOD /path", to its bounds;
    /// prints the BASE configuration (or a new one) with route NAME's
    /// operations set, as JSON on stdout.
    #[command(after_help = EXIT_STATUS)]
    Openapi(Openapi),
    /// Print the JSON Schema of the configuration
    Schema,
    /// A live view of a running Envoy: what each bound allows and refuses
    ///
    /// Reads the admin endpoint's /stats twice, --interval apart: per
    /// instance, route and bound, allowed, refused and would-refuse (shadow)
    /// per second, refusals so far, callers tracked against the cap of
    /// 10,000 and overflow; per instance store and identity errors. Bounds
    /// that refuse most come first. Refreshes in place until Ctrl-C; --once
    /// prints one view (for scripts).
    #[command(
        after_help = "Exit status: 0 shown, 2 usage error or the admin endpoint cannot be read"
    )]
    Top(Top),
    /// Edit a configuration in the browser: bounds, readings, operations, live rates
    ///
    /// Serves one page on 127.0.0.1 and prints its URL (with the run's
    /// token). The page validates and reads the configuration as you type,
    /// with the same code as `check` and `explain`; it saves FILE (only
    /// when valid) and exports the Istio WasmPlugin manifest. With --admin,
    /// each bound's rates as `top` reads them, refreshed every 2 s.
    #[command(
        after_help = "Exit status: 0 stopped, 2 usage error, FILE unreadable or the address taken"
    )]
    Console(Console),
    /// Which counters a push of NEW over OLD resets, keeps, adds and drops
    ///
    /// Both files are read as by `check` (one configuration each) and
    /// compiled by the filter's own parser; a bound keeps its counts when the
    /// filter would (node and fleet bounds: the same instance and the same
    /// route fingerprint; installation bounds: the same domain, descriptor,
    /// key and window). Any change to a route resets all its bounds.
    #[command(
        after_help = "Exit status: 0 no counts lost (only kept or added), 1 some bound resets or is dropped, 2 usage error or a file unreadable or invalid"
    )]
    Diff(Diff),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    ///
    /// e.g. `ratebound completions bash > /etc/bash_completion.d/ratebound`
    Completions {
        /// The shell to complete in
        shell: clap_complete::Shell,
    },
    /// Print the version and the git commit (as --version)
    #[command(hide = true)]
    Version,
}

#[derive(Debug, PartialEq, Eq, Args)]
pub struct RlsConfig {
    /// The configurations (JSON or YAML, one per file), or - for stdin
    #[arg(value_name = "FILE|-", required = true)]
    pub files: Vec<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = RlsFormat::Yaml)]
    pub format: RlsFormat,
    /// The ConfigMap's name (--format configmap), one per FILE in order
    #[arg(long, value_name = "NAME")]
    pub name: Vec<String>,
}

#[derive(Debug, PartialEq, Eq, Args)]
pub struct Diff {
    /// The configuration in force (JSON or YAML, or a WasmPlugin)
    #[arg(value_name = "OLD")]
    pub old: String,
    /// The configuration to push
    #[arg(value_name = "NEW")]
    pub new: String,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, PartialEq, Eq, Args)]
pub struct Check {
    /// Configurations or manifests (JSON or YAML), directories of them, or
    /// - for stdin
    #[arg(value_name = "FILE|DIR|-", required = true)]
    pub files: Vec<String>,
    /// Also check the files of the directories' subdirectories
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Fail on warnings too (notes never fail)
    #[arg(long)]
    pub strict: bool,
    /// How many Envoy nodes run the configuration: counters are per node
    #[arg(long, value_name = "N", value_parser = nodes)]
    pub nodes: Option<u32>,
    /// Warn where the rate-limit service's configuration disagrees
    #[arg(long, value_name = "PATH")]
    pub rls_config: Option<String>,
    /// Output format: json prints the results, errors and warnings (with
    /// their lines and columns) as one JSON object on stdout,
    /// {"version": 1, ..., "files": [...]}
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, PartialEq, Args)]
pub struct Top {
    /// The Envoy admin endpoint
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9901")]
    pub admin: String,
    /// Print one view and exit (two samples --interval apart)
    #[arg(long)]
    pub once: bool,
    /// Seconds between samples (Envoy gets the counters each second)
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, value_parser = interval)]
    pub interval: f64,
    /// Output format (json only with --once)
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, PartialEq, Eq, Args)]
pub struct Console {
    /// The configuration to edit (JSON or YAML; saved in the same format);
    /// when it does not exist, the page starts empty and the first valid
    /// save creates it
    #[arg(value_name = "FILE")]
    pub file: String,
    /// An Envoy admin endpoint to read live rates from; one per node
    #[arg(long, value_name = "URL")]
    pub admin: Vec<String>,
    /// How many Envoy nodes run the configuration (editable on the page)
    #[arg(long, value_name = "N", value_parser = nodes)]
    pub nodes: Option<u32>,
    /// Where to listen; a loopback address unless you mean otherwise
    #[arg(long, value_name = "ADDRESS:PORT", default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// A route's OpenAPI inventory: ROUTE=SPEC (JSON or YAML), repeatable
    #[arg(long, value_name = "ROUTE=SPEC")]
    pub openapi: Vec<String>,
    /// The module's url in the exported WasmPlugin manifest
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
}

fn interval(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(s) if (0.1..=3600.0).contains(&s) => Ok(s),
        _ => Err("give the seconds between samples, from 0.1 to 3600".into()),
    }
}

#[derive(Debug, PartialEq, Eq, Args)]
pub struct Explain {
    /// The configuration (JSON or YAML), or - for stdin
    #[arg(value_name = "FILE|-")]
    pub file: String,
    /// How many Envoy nodes run the configuration: counters are per node
    #[arg(long, value_name = "N", value_parser = nodes)]
    pub nodes: Option<u32>,
    /// Requests each node admits a second, for fleet bounds' figure (by
    /// default each node's even share of the limit)
    #[arg(long, value_name = "R", value_parser = rate)]
    pub rate: Option<u32>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Each bound's full reading (its words and every note) under its line
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

fn rate(v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .map_err(|_| "give the requests each node admits a second, a whole number".to_string())
}

#[derive(Debug, Default, PartialEq, Eq, Args)]
pub struct Openapi {
    /// The OpenAPI document (JSON or YAML), or - for stdin
    #[arg(value_name = "SPEC")]
    pub spec: String,
    /// The route whose operations are set (created when BASE has none)
    #[arg(long, value_name = "NAME")]
    pub route: String,
    /// The bounds of the operations picked (JSON or YAML)
    #[arg(long, value_name = "FILE")]
    pub bounds: String,
    /// The configuration to start from
    #[arg(long, value_name = "BASE")]
    pub config: Option<String>,
    /// match.path_prefix of a new route (default: what the paths share)
    #[arg(long, value_name = "P", value_parser = path_prefix)]
    pub match_prefix: Option<String>,
    /// Put the path of the operations' servers URL before their paths
    #[arg(long)]
    pub servers: bool,
}

fn nodes(v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "give the number of Envoy nodes, a whole number from 1 to {}",
            u32::MAX
        )),
    }
}

fn path_prefix(p: &str) -> Result<String, String> {
    if p.starts_with('/') {
        Ok(p.to_string())
    } else {
        Err(format!("{p:?} must start with '/'"))
    }
}

/// Parses the command line (program name first); a usage error is clap's
/// error, which prints itself with a short usage and exits 2.
pub fn parse<I, T>(argv: I) -> Result<Command, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(argv)?;
    if let Command::Top(t) = &cli.command {
        if t.format == Format::Json && !t.once {
            return Err(Cli::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                "top --format json needs --once",
            ));
        }
    }
    if let Command::Openapi(o) = &cli.command {
        if o.spec == "-" && o.bounds == "-" {
            return Err(Cli::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                "SPEC and --bounds cannot both be stdin",
            ));
        }
    }
    Ok(cli.command)
}

/// The command line as clap sees it (for completions and help).
pub fn command() -> clap::Command {
    Cli::command()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, clap::Error> {
        parse(std::iter::once("ratebound").chain(args.iter().copied()))
    }

    #[test]
    fn the_declaration_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn commands_and_flags() {
        assert_eq!(
            p(&["check", "--strict", "--nodes", "4", "a.json"]).ok(),
            Some(Command::Check(Check {
                files: vec!["a.json".into()],
                recursive: false,
                strict: true,
                nodes: Some(4),
                rls_config: None,
                format: Format::Text,
            }))
        );
        assert_eq!(
            p(&["check", "-R", "deploy/", "a.yaml", "-", "-o", "json"]).ok(),
            Some(Command::Check(Check {
                files: vec!["deploy/".into(), "a.yaml".into(), "-".into()],
                recursive: true,
                strict: false,
                nodes: None,
                rls_config: None,
                format: Format::Json,
            }))
        );
        assert_eq!(
            p(&["explain", "-", "--format=json", "--nodes=2", "--rate", "40"]).ok(),
            Some(Command::Explain(Explain {
                file: "-".into(),
                nodes: Some(2),
                rate: Some(40),
                format: Format::Json,
                verbose: false,
            }))
        );
        assert_eq!(
            p(&["explain", "a.json", "-v"]).ok(),
            Some(Command::Explain(Explain {
                file: "a.json".into(),
                nodes: None,
                rate: None,
                format: Format::Text,
                verbose: true,
            }))
        );
        assert_eq!(
            p(&[
                "openapi",
                "shop.yaml",
                "--route",
                "shop",
                "--bounds=b.json",
                "--servers"
            ])
            .ok(),
            Some(Command::Openapi(Openapi {
                spec: "shop.yaml".into(),
                route: "shop".into(),
                bounds: "b.json".into(),
                config: None,
                match_prefix: None,
                servers: true
            }))
        );
        assert_eq!(p(&["schema"]).ok(), Some(Command::Schema));
        assert_eq!(p(&["version"]).ok(), Some(Command::Version));
        assert_eq!(
            p(&["rls-config", "a.json"]).ok(),
            Some(Command::RlsConfig(RlsConfig {
                files: vec!["a.json".into()],
                format: RlsFormat::Yaml,
                name: vec![],
            }))
        );
        assert_eq!(
            p(&[
                "rls-config",
                "--format",
                "configmap",
                "a.json",
                "b.json",
                "--name",
                "x",
                "--name=y"
            ])
            .ok(),
            Some(Command::RlsConfig(RlsConfig {
                files: vec!["a.json".into(), "b.json".into()],
                format: RlsFormat::Configmap,
                name: vec!["x".into(), "y".into()],
            }))
        );
        assert_eq!(
            p(&["completions", "bash"]).ok(),
            Some(Command::Completions {
                shell: clap_complete::Shell::Bash
            })
        );
    }

    #[test]
    fn usage_errors() {
        for bad in [
            &[][..],
            &["frobnicate"],
            &["check"],
            &["check", "-o", "yaml", "a"],
            &["check", "--nodes", "0", "a"],
            &["check", "--nodes", "-3", "a"],
            &["check", "--nodes"],
            &["check", "--bogus", "a"],
            &["explain", "--format", "xml", "a"],
            &["explain", "--strict", "a"],
            &["schema", "extra"],
            &["rls-config"],
            &["rls-config", "--name", "a"],
            &["explain", "--rls-config", "r", "a"],
            &["openapi", "--route", "a", "--bounds", "b"],
            &["openapi", "s.json", "--bounds", "b"],
            &["openapi", "s.json", "--route", "a"],
            &[
                "openapi", "s.json", "t.json", "--route", "a", "--bounds", "b",
            ],
            &[
                "openapi",
                "s.json",
                "--route",
                "a",
                "--bounds",
                "b",
                "--match-prefix",
                "api",
            ],
            &["openapi", "-", "--route", "a", "--bounds", "-"],
            &[
                "openapi", "s.json", "--route", "a", "--bounds", "b", "--nodes", "3",
            ],
            &["completions", "tcsh"],
        ] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
    }
}
