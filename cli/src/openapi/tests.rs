//! `ratebound openapi` end to end on a small shop document, and its parts.
#![cfg(test)]

use super::document::read_document;
use super::generate::common_prefix;
use super::*;
use crate::input::Format;
use serde_json::{json, Value};

const SHOP: &str = r#"{"openapi":"3.1.0","info":{"title":"shop","version":"1"},
  "servers":[{"url":"https://{region}.shop.example/api/{v}","variables":{"region":{"default":"eu"},"v":{"default":"v1"}}}],
  "paths":{
    "/orders":{"get":{"operationId":"listOrders"},"post":{"operationId":"createOrder"}},
    "/orders/mine":{"get":{"operationId":"listMyOrders"}},
    "/orders/{orderId}":{"get":{"operationId":"getOrder"},"delete":{}},
    "/orders/{orderId}/pay":{"post":{"operationId":"payOrder","servers":[{"url":"/pay"}]}},
    "/weird":{"get":{"operationId":"weird.op/v1"}},
    "/dup":{"get":{"operationId":"dup"},"put":{"operationId":"dup"}},
    "x-internal":{"anything":[1,2,3]}
  },
  "components":{"schemas":{"Order":{"type":"object"}}}}"#;

fn doc() -> OpenapiDocument {
    read_document(SHOP.as_bytes(), Format::Json, "shop.json").unwrap()
}

fn req() -> OpenapiRequest {
    OpenapiRequest {
        route: "shop".into(),
        spec_label: "shop.json".into(),
        bounds_label: "bounds.json".into(),
        ..OpenapiRequest::default()
    }
}

fn picks(json: &str) -> Vec<(String, Value)> {
    read_picks(json.as_bytes(), Format::Json, "bounds.json").unwrap()
}

fn gen(json: &str, r: &OpenapiRequest) -> Result<Generated, Vec<String>> {
    generate(&doc(), &picks(json), None, r).map_err(|e| e.iter().map(ToString::to_string).collect())
}

const B: &str = r#"[{"per":"address","limit":5,"window":"PT1M"}]"#;

#[test]
fn the_document_is_read_for_its_operations_only() {
    let d = doc();
    assert_eq!(d.version, "3.1.0");
    let titles: Vec<String> = d.operations.iter().map(OpenapiOperation::title).collect();
    assert_eq!(
        titles,
        [
            "GET /orders (listOrders)",
            "POST /orders (createOrder)",
            "GET /orders/mine (listMyOrders)",
            "GET /orders/{orderId} (getOrder)",
            "DELETE /orders/{orderId}",
            "POST /orders/{orderId}/pay (payOrder)",
            "GET /weird (weird.op/v1)",
            "GET /dup (dup)",
            "PUT /dup (dup)",
        ]
    );
    assert_eq!(
        d.operations[0].servers,
        [Ok("https://eu.shop.example/api/v1".to_string())]
    );
}

#[test]
fn picks_by_id_and_by_method_and_path() {
    let g = gen(
        &format!(r#"{{"payOrder":{B},"GET /orders/mine":{B},"delete /orders/{{id}}":{B},"weird.op/v1":{B}}}"#),
        &OpenapiRequest { match_prefix: Some("/orders".into()), ..req() },
    )
    .unwrap();
    let ops = &g.json["routes"][0]["operations"];
    assert_eq!(ops[0]["operation_id"], "payOrder");
    assert_eq!(ops[0]["path"], "/orders/{orderId}/pay");
    assert!(ops[0].get("name").is_none(), "the operationId names it");
    assert_eq!(ops[1]["operation_id"], "listMyOrders");
    assert_eq!(
        ops[2]["path"], "/orders/{orderId}",
        "as the document writes it"
    );
    assert_eq!(ops[2]["name"], "delete_orders_orderId");
    assert_eq!(ops[3]["name"], "weird_op_v1");
    assert_eq!(g.json["routes"][0]["match"]["path_prefix"], "/orders");
    assert_eq!(g.config.routes[0].operations.len(), 4);
    assert!(
        g.notes.iter().any(|n| n.contains("\"dup\"")),
        "{:?}",
        g.notes
    );
}

#[test]
fn every_wrong_pick_is_named() {
    let e = gen(
        &format!(
            r#"{{"payOrders":{B},"dup":{B},"GET /orders/{{id}}/pay":{B},"GET /nowhere":{B},"FETCH /orders":{B},"getOrder":{B},"GET /orders/{{x}}":{B}}}"#
        ),
        &req(),
    )
    .unwrap_err();
    assert_eq!(
        e,
        [
            "bounds.json \"payOrders\": no operation of shop.json has operationId \"payOrders\"; did you mean \"payOrder\"?",
            "bounds.json \"dup\": operationId \"dup\" occurs 2 times in shop.json (GET /dup, PUT /dup); OpenAPI requires it to be unique: pick by \"METHOD /path\" instead, or fix the document",
            "bounds.json \"GET /orders/{id}/pay\": shop.json has no GET /orders/{id}/pay: that path has POST",
            "bounds.json \"GET /nowhere\": shop.json has no path /nowhere",
            "bounds.json \"FETCH /orders\": FETCH is not an OpenAPI operation method (one of GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH, TRACE)",
            "bounds.json \"GET /orders/{x}\": picks GET /orders/{orderId} (getOrder), which \"getOrder\" already picks; give each operation its bounds once",
        ]
    );
}

#[test]
fn a_key_written_twice_and_an_empty_file_are_errors() {
    let p = picks(&format!(r#"{{"payOrder":{B},"payOrder":{B}}}"#));
    let e = generate(&doc(), &p, None, &req()).unwrap_err();
    assert_eq!(
        e[0].to_string(),
        "bounds.json \"payOrder\": is written twice in the bounds file"
    );
    let e = generate(&doc(), &picks("{}"), None, &req()).unwrap_err();
    assert!(e[0].message.starts_with("picks no operation"), "{e:?}");
    assert!(read_picks(b"[1,2]", Format::Json, "b").is_err());
}

#[test]
fn bound_errors_are_told_against_the_bounds_file() {
    let e = gen(
        r#"{"payOrder":[{"per":"user","limit":0,"window":"PT1M"}]}"#,
        &req(),
    )
    .unwrap_err();
    assert!(
        e.iter()
            .any(|m| m.starts_with("bounds.json \"payOrder\"[0].limit: 0 is out of range")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|m| m.starts_with("bounds.json \"payOrder\"[0].per: needs a caller identity")),
        "{e:?}"
    );
    assert_eq!(e.len(), 2, "{e:?}");
    // A structural error stops the parser at the first.
    let e = gen(r#"{"listMyOrders":{"per":"address"}}"#, &req()).unwrap_err();
    assert_eq!(
        e,
        ["bounds.json \"listMyOrders\": invalid type: map, expected a sequence"]
    );
}

#[test]
fn the_base_configuration_keeps_its_routes_and_gains_operations() {
    let base = json!({"instance":"shop","routes":[
        {"name":"health","match":{"path_prefix":"/health"},"bounds":[{"per":"route","limit":10,"window":"PT1S"}]},
        {"name":"shop","match":{"path_prefix":"/orders"},"bounds":[{"per":"address","limit":100,"window":"PT1M"}],
         "operations":[{"operation_id":"old","method":"GET","path":"/old","bounds":[{"per":"address","limit":1,"window":"PT1S"}]}]}]});
    let g = generate(
        &doc(),
        &picks(&format!(r#"{{"payOrder":{B}}}"#)),
        Some(base.clone()),
        &req(),
    )
    .unwrap();
    assert_eq!(g.json["routes"][0], base["routes"][0]);
    assert_eq!(g.json["routes"][1]["bounds"], base["routes"][1]["bounds"]);
    assert_eq!(
        g.json["routes"][1]["operations"].as_array().unwrap().len(),
        1
    );
    assert!(
        g.notes.iter().any(|n| n.contains("replaced")),
        "{:?}",
        g.notes
    );
    // --match-prefix may not change an existing route.
    let r = OpenapiRequest {
        match_prefix: Some("/api".into()),
        ..req()
    };
    let e = generate(
        &doc(),
        &picks(&format!(r#"{{"payOrder":{B}}}"#)),
        Some(base),
        &r,
    )
    .unwrap_err();
    assert_eq!(e[0].path, "--match-prefix");
}

#[test]
fn a_new_route_takes_what_the_picks_have_in_common() {
    let g = gen(&format!(r#"{{"payOrder":{B},"getOrder":{B}}}"#), &req()).unwrap();
    assert_eq!(g.json["routes"][0]["match"]["path_prefix"], "/orders");
    let g = gen(&format!(r#"{{"payOrder":{B},"GET /dup":{B}}}"#), &req()).unwrap();
    assert_eq!(g.json["routes"][0]["match"]["path_prefix"], "/");
    assert_eq!(common_prefix(&["/orders/"]), "/orders");
    assert_eq!(common_prefix(&["/a/b/c", "/a/b/{x}"]), "/a/b");
    assert_eq!(common_prefix(&["/a/b", "/a/b/c"]), "/a/b");
    assert_eq!(common_prefix(&["/{tenant}/a"]), "/");
    let e = gen(
        &format!(r#"{{"payOrder":{B}}}"#),
        &OpenapiRequest {
            route: "a b".into(),
            ..req()
        },
    )
    .unwrap_err();
    assert!(
        e[0].starts_with("--route: must be 1-64 characters"),
        "{e:?}"
    );
}

#[test]
fn servers_put_their_path_in_front_when_asked() {
    let r = OpenapiRequest {
        servers: true,
        ..req()
    };
    let g = gen(&format!(r#"{{"listMyOrders":{B},"payOrder":{B}}}"#), &r).unwrap();
    let ops = &g.json["routes"][0]["operations"];
    assert_eq!(ops[0]["path"], "/api/v1/orders/mine");
    assert_eq!(
        ops[1]["path"], "/pay/orders/{orderId}/pay",
        "the operation's own servers"
    );
    assert_eq!(server_path("https://h.example"), Ok(String::new()));
    assert_eq!(server_path("https://h.example/v1/"), Ok("/v1".into()));
    assert_eq!(server_path("//h/v2?x"), Ok("/v2".into()));
    assert_eq!(server_path("/"), Ok(String::new()));
    assert!(server_path("v1").is_err());
    let two = r#"{"openapi":"3.0.3","servers":[{"url":"/a"},{"url":"/b"}],"paths":{"/x":{"get":{"operationId":"x"}}}}"#;
    let d = read_document(two.as_bytes(), Format::Json, "two.json").unwrap();
    let e = generate(&d, &picks(&format!(r#"{{"x":{B}}}"#)), None, &r).unwrap_err();
    assert!(e[0].message.contains("different paths (/a, /b)"), "{e:?}");
    let bad = r#"{"openapi":"3.0.3","servers":[{"url":"/{v}"}],"paths":{"/x":{"get":{"operationId":"x"}}}}"#;
    let d = read_document(bad.as_bytes(), Format::Json, "bad.json").unwrap();
    let e = generate(&d, &picks(&format!(r#"{{"x":{B}}}"#)), None, &r).unwrap_err();
    assert!(
        e[0].message.contains("uses {v}, which it does not define"),
        "{e:?}"
    );
}

#[test]
fn documents_that_are_not_openapi_3_are_refused_with_a_reason() {
    let e = |text: &str, f: Format| {
        read_document(text.as_bytes(), f, "d")
            .unwrap_err()
            .to_string()
    };
    assert!(e(r#"{"swagger":"2.0","paths":{}}"#, Format::Json).contains("Swagger 2.0"));
    assert!(e(r#"{"paths":{}}"#, Format::Json).contains("no \"openapi\" version field"));
    assert!(e(r#"{"openapi":"2.5"}"#, Format::Json).contains("OpenAPI 2.5 is not read"));
    assert!(e(
        r#"{"openapi":"3.1.0","paths":{"/a":{"get":{"operationId":7}}}}"#,
        Format::Json
    )
    .starts_with("d paths./a.get.operationId: "));
    assert!(e(r#"{"openapi":"3.1.0","paths":[]}"#, Format::Json).starts_with("d paths: "));
    assert!(e(
        "openapi: 3.1.0\npaths:\n  /a: {get: {operationId: [1]}}\n",
        Format::Yaml
    )
    .starts_with("d: not an OpenAPI document"));
    // YAML's unquoted version is a number.
    let d = read_document(
        b"openapi: 3.0\npaths:\n  /a:\n    get: {operationId: a}\n",
        Format::Yaml,
        "d",
    )
    .unwrap();
    assert_eq!(d.version, "3.0");
    assert_eq!(d.operations.len(), 1);
    // A $ref path item is said when a pick is not found.
    let d = read_document(
        br#"{"openapi":"3.1.0","paths":{"/a":{"$ref":"other.yaml#/a"}}}"#,
        Format::Json,
        "d",
    )
    .unwrap();
    let e = generate(&d, &picks(&format!(r#"{{"a":{B}}}"#)), None, &req()).unwrap_err();
    assert!(
        e[0].message
            .contains("$ref, which is not followed: /a ($ref other.yaml#/a)"),
        "{e:?}"
    );
}

#[test]
fn hostile_documents_are_errors_not_panics() {
    let deep = format!(r#"{{"openapi":"3.1.0","x":{}}}"#, "[".repeat(100_000));
    assert!(read_document(deep.as_bytes(), Format::Json, "d").is_err());
    let deep_yaml = format!(
        "openapi: 3.1.0\nx: {}1{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(read_document(deep_yaml.as_bytes(), Format::Yaml, "d").is_err());
    let mut bomb =
        String::from("openapi: 3.1.0\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for w in ["a", "b", "c", "d", "e", "f", "g", "h", "i"].windows(2) {
        bomb.push_str(&format!(
            "{}: &{} [{}]\n",
            w[1],
            w[1],
            vec![format!("*{}", w[0]); 10].join(", ")
        ));
    }
    assert!(read_document(bomb.as_bytes(), Format::Yaml, "d").is_err());
    assert!(read_document(&[0xff, 0xfe], Format::Json, "d").is_err());
    assert!(read_document(&vec![b' '; MAX_DOCUMENT_BYTES + 1], Format::Json, "d").is_err());
    assert!(read_document(b"openapi: 3.1.0\n---\nopenapi: 3.1.0\n", Format::Yaml, "d").is_err());
    assert!(read_document(b"openapi: 3.1.0\nopenapi: 3.1.0\n", Format::Yaml, "d").is_err());
}
