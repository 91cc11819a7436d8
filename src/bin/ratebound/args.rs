//! The command line, parsed by hand: a few subcommands and flags.

pub const USAGE: &str = "\
usage: ratebound check [--strict] [--nodes N] [--rls-config PATH] FILE|-
       ratebound explain [--nodes N] [--format text|json] FILE|-
       ratebound rls-config FILE|-
       ratebound openapi SPEC --route NAME --bounds FILE [--config BASE] [--match-prefix P] [--servers]
       ratebound schema
       ratebound --version

  check     validate a configuration (JSON or YAML) with the filter's own parser;
            list every error with its JSON path, then the warnings and notes
  explain   every route's bounds in plain words, by the phase they are checked in
  rls-config  the envoyproxy/ratelimit configuration (YAML) for the installation bounds
  openapi   give operations of an OpenAPI 3.0/3.1 document (JSON or YAML) bounds of their own:
            FILE maps an operationId, or \"METHOD /path\", to its bounds; prints the BASE
            configuration (or a new one) with route NAME's operations set, as JSON on stdout
  schema    print the JSON Schema of the configuration

  --strict        check fails on warnings too (notes never fail)
  --nodes N       how many Envoy nodes run the configuration: counters are per node
  --rls-config PATH  check: warn where the rate-limit service's configuration disagrees
  --format F      text (default) or json
  --route NAME    openapi: the route whose operations are set (created when BASE has none)
  --bounds FILE   openapi: the bounds of the operations picked (JSON or YAML)
  --config BASE   openapi: the configuration to start from
  --match-prefix P  openapi: match.path_prefix of a new route (default: what the paths share)
  --servers       openapi: put the path of the operations' servers URL before their paths

exit status: 0 valid, 1 invalid (or --strict and warnings), 2 usage or unreadable file";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Check {
        file: String,
        strict: bool,
        nodes: Option<u32>,
        rls_config: Option<String>,
    },
    RlsConfig {
        file: String,
    },
    Explain {
        file: String,
        nodes: Option<u32>,
        format: Format,
    },
    Openapi(Openapi),
    Schema,
    Version,
    Help,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Openapi {
    pub spec: String,
    pub route: String,
    pub bounds: String,
    pub config: Option<String>,
    pub match_prefix: Option<String>,
    pub servers: bool,
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let Some((first, rest)) = args.split_first() else {
        return Err("no command given".into());
    };
    match first.as_str() {
        "--version" | "-V" | "version" => no_more(rest, Command::Version),
        "--help" | "-h" | "help" => Ok(Command::Help),
        "schema" => no_more(rest, Command::Schema),
        "openapi" => openapi(rest).map(Command::Openapi),
        "rls-config" => match rest {
            [file] => Ok(Command::RlsConfig { file: file.clone() }),
            _ => Err("rls-config takes one FILE (or - for stdin)".into()),
        },
        "check" | "explain" => {
            let mut flags = Flags::default();
            flags.read(first, rest)?;
            let file = flags
                .file
                .ok_or_else(|| format!("{first} needs a FILE (or - for stdin)"))?;
            if first == "check" {
                if flags.format.is_some() {
                    return Err("check has no --format; explain has".into());
                }
                Ok(Command::Check {
                    file,
                    strict: flags.strict,
                    nodes: flags.nodes,
                    rls_config: flags.rls_config,
                })
            } else {
                if flags.strict {
                    return Err("explain has no --strict; check has".into());
                }
                if flags.rls_config.is_some() {
                    return Err("explain has no --rls-config; check has".into());
                }
                Ok(Command::Explain {
                    file,
                    nodes: flags.nodes,
                    format: flags.format.unwrap_or(Format::Text),
                })
            }
        }
        other => Err(format!("unknown command {other:?}")),
    }
}

/// Walks arguments as `--flag value`, `--flag=value` or plain words.
struct Words<'a> {
    it: std::slice::Iter<'a, String>,
}

/// One argument: the whole word, its flag part, and a value given inline.
struct Word<'a> {
    arg: &'a String,
    flag: &'a str,
    inline: Option<String>,
}

impl<'a> Words<'a> {
    fn new(args: &'a [String]) -> Words<'a> {
        Words { it: args.iter() }
    }

    fn next_word(&mut self) -> Option<Word<'a>> {
        let arg = self.it.next()?;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        Some(Word { arg, flag, inline })
    }

    /// The value of flag `w`: inline, or the next word.
    fn value(&mut self, w: &Word) -> Result<String, String> {
        w.inline
            .clone()
            .or_else(|| self.it.next().cloned())
            .ok_or_else(|| format!("{} needs a value", w.flag))
    }
}

fn openapi(args: &[String]) -> Result<Openapi, String> {
    let mut o = Openapi::default();
    let (mut spec, mut route, mut bounds) = (None, None, None);
    let mut words = Words::new(args);
    while let Some(w) = words.next_word() {
        let (arg, inline) = (w.arg, &w.inline);
        match w.flag {
            "--route" => route = Some(words.value(&w)?),
            "--bounds" => bounds = Some(words.value(&w)?),
            "--config" => o.config = Some(words.value(&w)?),
            "--match-prefix" => {
                let p = words.value(&w)?;
                if !p.starts_with('/') {
                    return Err(format!("--match-prefix {p:?} must start with '/'"));
                }
                o.match_prefix = Some(p);
            }
            "--servers" if inline.is_none() => o.servers = true,
            f if f.starts_with('-') && f != "-" => {
                return Err(format!("unknown option {arg:?} for openapi"))
            }
            _ => {
                if let Some(first) = &spec {
                    return Err(format!("openapi takes one SPEC; got {first:?} and {arg:?}"));
                }
                spec = Some(arg.clone());
            }
        }
    }
    o.spec = spec.ok_or("openapi needs a SPEC (an OpenAPI document, or - for stdin)")?;
    o.route = route.ok_or("openapi needs --route NAME")?;
    o.bounds = bounds.ok_or("openapi needs --bounds FILE")?;
    if o.spec == "-" && o.bounds == "-" {
        return Err("SPEC and --bounds cannot both be stdin".into());
    }
    Ok(o)
}

fn no_more(rest: &[String], c: Command) -> Result<Command, String> {
    match rest.first() {
        None => Ok(c),
        Some(extra) => Err(format!("unexpected argument {extra:?}")),
    }
}

#[derive(Default)]
struct Flags {
    file: Option<String>,
    strict: bool,
    nodes: Option<u32>,
    format: Option<Format>,
    rls_config: Option<String>,
}

impl Flags {
    fn read(&mut self, command: &str, args: &[String]) -> Result<(), String> {
        let mut words = Words::new(args);
        while let Some(w) = words.next_word() {
            let (arg, inline) = (w.arg, &w.inline);
            match w.flag {
                "--strict" if inline.is_none() => self.strict = true,
                "--nodes" => self.nodes = Some(nodes(&words.value(&w)?)?),
                "--rls-config" => self.rls_config = Some(words.value(&w)?),
                "--format" => {
                    self.format = Some(match words.value(&w)?.as_str() {
                        "text" => Format::Text,
                        "json" => Format::Json,
                        other => return Err(format!("--format {other:?}: use text or json")),
                    })
                }
                "-" => self.set_file(command, arg)?,
                f if f.starts_with('-') => {
                    return Err(format!("unknown option {arg:?} for {command}"))
                }
                _ => self.set_file(command, arg)?,
            }
        }
        Ok(())
    }

    fn set_file(&mut self, command: &str, arg: &str) -> Result<(), String> {
        if let Some(first) = &self.file {
            return Err(format!(
                "{command} takes one FILE; got {first:?} and {arg:?}"
            ));
        }
        self.file = Some(arg.to_string());
        Ok(())
    }
}

fn nodes(v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "--nodes {v:?}: give the number of Envoy nodes, a whole number from 1 to {}",
            u32::MAX
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, String> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn commands_and_flags() {
        assert_eq!(
            p(&["check", "--strict", "--nodes", "4", "a.json"]),
            Ok(Command::Check {
                file: "a.json".into(),
                strict: true,
                nodes: Some(4),
                rls_config: None
            })
        );
        assert_eq!(
            p(&["explain", "-", "--format=json", "--nodes=2"]),
            Ok(Command::Explain {
                file: "-".into(),
                nodes: Some(2),
                format: Format::Json
            })
        );
        assert_eq!(p(&["--version"]), Ok(Command::Version));
        assert_eq!(
            p(&[
                "openapi",
                "shop.yaml",
                "--route",
                "shop",
                "--bounds=b.json",
                "--servers"
            ]),
            Ok(Command::Openapi(Openapi {
                spec: "shop.yaml".into(),
                route: "shop".into(),
                bounds: "b.json".into(),
                config: None,
                match_prefix: None,
                servers: true
            }))
        );
        assert_eq!(p(&["schema"]), Ok(Command::Schema));
        assert_eq!(
            p(&["rls-config", "a.json"]),
            Ok(Command::RlsConfig {
                file: "a.json".into()
            })
        );
        assert_eq!(
            p(&["check", "--rls-config=r.yaml", "a.json"]),
            Ok(Command::Check {
                file: "a.json".into(),
                strict: false,
                nodes: None,
                rls_config: Some("r.yaml".into())
            })
        );
    }

    #[test]
    fn usage_errors() {
        for bad in [
            &[][..],
            &["frobnicate"],
            &["check"],
            &["check", "a", "b"],
            &["check", "--nodes", "0", "a"],
            &["check", "--nodes", "-3", "a"],
            &["check", "--nodes"],
            &["check", "--bogus", "a"],
            &["check", "--format", "json", "a"],
            &["explain", "--format", "xml", "a"],
            &["explain", "--strict", "a"],
            &["schema", "extra"],
            &["rls-config"],
            &["rls-config", "a", "b"],
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
        ] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
    }
}
