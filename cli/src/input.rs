//! The CLI's input: a file or stdin, JSON or YAML, read with a cap. YAML is
//! turned into JSON (with budgets on depth, nodes and alias expansion) and
//! then goes through the very same [`config::parse`] as JSON, so errors carry
//! the same JSON paths whichever was written.

use ratebound::config::{self, Config, ConfigError, ErrorKind, MAX_CONFIG_BYTES};
use std::io::Read;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

/// Reads `path` (`-` for stdin), at most one byte more than a configuration
/// may have, so a huge file costs no more memory than an accepted one.
pub fn read(path: &str) -> std::io::Result<Vec<u8>> {
    read_capped(path, MAX_CONFIG_BYTES)
}

/// Reads `path` (`-` for stdin), at most `cap + 1` bytes: more than `cap`
/// means too big, told without reading the rest.
pub fn read_capped(path: &str, cap: usize) -> std::io::Result<Vec<u8>> {
    let limit = cap as u64 + 1;
    let mut bytes = Vec::new();
    if path == "-" {
        std::io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut bytes)?;
    } else {
        std::fs::File::open(path)?
            .take(limit)
            .read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}

/// JSON or YAML: by the file's extension, else by the first character that
/// is not blank (`{` or `[` is JSON; an empty input is an empty JSON config).
pub fn detect(path: &str, bytes: &[u8]) -> Format {
    let ext = std::path::Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("json") => Format::Json,
        Some("yaml" | "yml") => Format::Yaml,
        _ => match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            None | Some(b'{' | b'[') => Format::Json,
            Some(_) => Format::Yaml,
        },
    }
}

/// Parses a configuration written in `format`.
pub fn load(bytes: &[u8], format: Format) -> Result<Config, Vec<ConfigError>> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(vec![too_big("the configuration")]);
    }
    match format {
        Format::Json => config::parse(bytes),
        Format::Yaml => {
            let json = yaml_to_json(bytes).map_err(|e| vec![e])?;
            // Line and column would point into the JSON made from the YAML.
            config::parse(&json).map_err(|errors| {
                errors
                    .into_iter()
                    .map(|e| ConfigError {
                        message: without_json_location(&e.message).to_string(),
                        ..e
                    })
                    .collect()
            })
        }
    }
}

fn too_big(what: &str) -> ConfigError {
    ConfigError {
        path: "$".into(),
        kind: ErrorKind::Text,
        message: format!(
            "{what} is larger than {MAX_CONFIG_BYTES} bytes (1 MiB), the most that is accepted"
        ),
    }
}

fn root_error(message: String) -> ConfigError {
    ConfigError {
        path: "$".into(),
        kind: ErrorKind::Text,
        message,
    }
}

/// A configuration-sized document (at most 1 MiB: a configuration, a
/// bounds file) as JSON bytes: JSON as it is, YAML turned into JSON within
/// the same budgets as a configuration.
pub fn to_json(bytes: &[u8], format: Format) -> Result<Vec<u8>, ConfigError> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(too_big("the file"));
    }
    match format {
        Format::Json => Ok(bytes.to_vec()),
        Format::Yaml => yaml_to_json(bytes),
    }
}

/// Budgets for a large YAML document read only in part (an OpenAPI
/// document of up to `max_bytes`): deep enough for nested schemas, with
/// alias expansion as bounded as in a configuration.
pub fn document_options(max_bytes: usize) -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: 128,
            max_documents: 1,
            max_nodes: 2_000_000,
            max_events: 6_000_000,
            max_aliases: 10_000,
            max_anchors: 10_000,
            max_total_scalar_bytes: max_bytes,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 100_000,
            max_replay_stack_depth: 16,
        },
        strict_booleans: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
    }
}

/// A YAML document as the bytes of the equivalent JSON. Budgets keep a
/// hostile document (deep nesting, alias bombs) to bounded time and memory.
fn yaml_to_json(bytes: &[u8]) -> Result<Vec<u8>, ConfigError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| root_error(format!("the file is not UTF-8 (byte {})", e.valid_up_to())))?;
    let options = yaml_options(1);
    let value: serde_json::Value = serde_saphyr::from_str_with_options(text, options)
        .map_err(|e| root_error(format!("not valid YAML: {e}")))?;
    // A document with nothing in it is an empty configuration, as in JSON.
    let value = if value.is_null() {
        serde_json::Value::Object(serde_json::Map::new())
    } else {
        value
    };
    let json = serde_json::to_vec(&value)
        .map_err(|e| root_error(format!("cannot turn the YAML into JSON: {e}")))?;
    if json.len() > MAX_CONFIG_BYTES {
        return Err(too_big("the YAML, as JSON (aliases expanded),"));
    }
    Ok(json)
}

// In structure.rs, which the browser build has too.
pub use ratebound::reading::structure::without_json_location;

/// The YAML reader's limits, for a file of at most `max_documents`
/// documents: a hostile file cannot make it allocate without bound.
pub(crate) fn yaml_options(max_documents: usize) -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: 32,
            max_documents: max_documents,
            max_nodes: 100_000,
            max_events: 300_000,
            max_aliases: 1_000,
            max_anchors: 1_000,
            max_total_scalar_bytes: MAX_CONFIG_BYTES,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 100_000,
            max_replay_stack_depth: 16,
        },
        strict_booleans: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Result<Config, Vec<String>> {
        load(text.as_bytes(), Format::Yaml).map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn formats_are_told_by_extension_then_content() {
        assert_eq!(detect("a.json", b"routes: []"), Format::Json);
        assert_eq!(detect("a.YML", b"{}"), Format::Yaml);
        assert_eq!(detect("-", b"  \n{\"routes\":[]}"), Format::Json);
        assert_eq!(detect("-", b"routes: []"), Format::Yaml);
        assert_eq!(detect("conf", b""), Format::Json);
    }

    #[test]
    fn yaml_goes_through_the_same_parser_with_the_same_paths() {
        let c = yaml(
            "instance: demo\nroutes:\n  - name: hello\n    match: {path_prefix: /hello, methods: [GET]}\n    bounds:\n      - {per: address, limit: 5, window: PT1M}\n",
        )
        .unwrap();
        assert_eq!(c.routes[0].bounds[0].limit, 5);
        let e = yaml(
            "routes:\n  - name: a\n    bounds:\n      - {per: address, limit: 0, window: PT0S}\n",
        )
        .unwrap_err();
        assert!(e[0].starts_with("$.routes[0].bounds[0].limit: "), "{e:?}");
        assert!(e[1].starts_with("$.routes[0].bounds[0].window: "), "{e:?}");
        let e = yaml("routes:\n  - name: a\n    burst: 3\n").unwrap_err();
        assert!(e[0].starts_with("$.routes[0]"), "{e:?}");
        assert!(e[0].contains("unknown field `burst`"), "{e:?}");
        assert!(!e[0].contains(" at line "), "{e:?}");
    }

    #[test]
    fn yaml_one_point_one_booleans_are_not_booleans() {
        let e = yaml("success_headers: yes\n").unwrap_err();
        assert!(e[0].starts_with("$.success_headers"), "{e:?}");
        assert!(yaml("success_headers: false\n").is_ok());
    }

    #[test]
    fn an_empty_yaml_document_is_an_empty_configuration() {
        assert_eq!(yaml("# nothing yet\n").unwrap().routes.len(), 0);
        assert_eq!(yaml("").unwrap().routes.len(), 0);
    }

    #[test]
    fn hostile_yaml_is_an_error_not_a_panic() {
        // Billion laughs: nine levels of ten aliases each.
        let mut bomb = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            let refs = vec![format!("*{prev}"); 10].join(",");
            bomb.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        assert!(yaml(&bomb).is_err());
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(yaml(&deep).is_err());
        let deep_block: String = (0..200)
            .map(|i| format!("{}k:\n", "  ".repeat(i)))
            .collect();
        assert!(yaml(&deep_block).is_err());
        assert!(load(&[b'a', b':', b' ', 0xff, 0xfe], Format::Yaml).is_err());
        assert!(yaml("a: 1\n---\nb: 2\n").is_err());
        assert!(yaml("routes: []\nroutes: []\n").is_err());
        assert!(load(&vec![b'#'; MAX_CONFIG_BYTES + 1], Format::Yaml).is_err());
    }

    #[test]
    fn json_locations_are_stripped_only_when_they_are_locations() {
        assert_eq!(without_json_location("bad at line 1 column 20"), "bad");
        assert_eq!(
            without_json_location("stands at line five"),
            "stands at line five"
        );
        assert_eq!(without_json_location("plain"), "plain");
    }
}
