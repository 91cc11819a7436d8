//! Each kind of edit on a commented YAML file.

use super::*;
use ratebound_cli::input::{self, Format};

pub(super) fn read(text: &str) -> Option<Value> {
    serde_json::from_slice(&input::to_json(text.as_bytes(), Format::Yaml).ok()?).ok()
}

const COMMENTED: &str = concat!(
    "# Rate limits of the shop (owned by the platform team).\n",
    "instance: shop   # the counters' prefix\n",
    "routes:\n",
    "  # The public API.\n",
    "  - name: api\n",
    "    match: {path_prefix: /api}\n",
    "    bounds:\n",
    "      - name: partner        # the partner tier\n",
    "        per: user\n",
    "        limit: 1000\n",
    "        window: 'PT1M'\n",
    "        applies_to: {roles: [partner]}\n",
    "      - {name: trial, per: user, limit: 60, window: \"PT1M\", applies_to: {roles: [trial]}}\n",
);

#[test]
fn a_changed_value_is_rewritten_where_it_stands_and_the_rest_is_kept() {
    let old = read(COMMENTED).unwrap();
    let mut new = old.clone();
    new["routes"][0]["bounds"][0]["limit"] = serde_json::json!(2000);
    new["routes"][0]["bounds"][1]["window"] = serde_json::json!("PT1H");
    new["routes"][0]["bounds"][0]["window"] = serde_json::json!("PT30S");
    new["routes"][0]["bounds"][1]["applies_to"]["roles"][0] = serde_json::json!("free trial");
    let text = edit(COMMENTED, &old, &new, read).unwrap();
    let want = COMMENTED
        .replace("limit: 1000", "limit: 2000")
        .replace("window: 'PT1M'", "window: 'PT30S'")
        .replace("window: \"PT1M\"", "window: \"PT1H\"")
        .replace("roles: [trial]", "roles: [\"free trial\"]");
    assert_eq!(text, want);
    assert_eq!(read(&text).unwrap(), new);
}

#[test]
fn nothing_changed_is_the_same_text() {
    let old = read(COMMENTED).unwrap();
    assert_eq!(
        edit(COMMENTED, &old, &old, read).as_deref(),
        Some(COMMENTED)
    );
    assert!(edit("", &Value::Null, &old, read).is_none());
}

/// `before` edited by `change` of its configuration: the text written.
fn edited(before: &str, change: impl FnOnce(&mut Value)) -> String {
    let old = read(before).unwrap();
    let mut new = old.clone();
    change(&mut new);
    let text = edit(before, &old, &new, read).expect("edited in place");
    assert_eq!(read(&text).unwrap(), new, "{text}");
    text
}

const ROUTES: &str = concat!(
    "# Rate limits of the shop.\n",
    "instance: shop   # the counters' prefix\n",
    "\n",
    "routes:\n",
    "  # The public API.\n",
    "  - name: api\n",
    "    match: {path_prefix: /api}\n",
    "    bounds:\n",
    "      # Partners pay for more.\n",
    "      - name: partner\n",
    "        per: user\n",
    "        limit: 1000   # agreed in the contract\n",
    "        window: 'PT1M'\n",
    "      # Everyone else, by address.\n",
    "      - name: per_address\n",
    "        per: address\n",
    "        limit: 100\n",
    "        window: PT1M\n",
    "  # Sign-in is tight.\n",
    "  - name: signin\n",
    "    match: {path_prefix: /signin}\n",
    "    bounds:\n",
    "      - {name: per_address, per: address, limit: 5, window: PT1M}\n",
);

fn bound(name: &str, limit: u64) -> Value {
    serde_json::json!({"name": name, "per": "user", "limit": limit, "window": "PT1H"})
}

#[test]
fn a_new_bound_is_appended_in_block_style_and_every_comment_stays() {
    let text = edited(ROUTES, |c| {
        c["routes"][0]["bounds"]
            .as_array_mut()
            .unwrap()
            .push(bound("trial", 60));
    });
    let want = ROUTES.replace(
        "        window: PT1M\n  # Sign-in",
        "        window: PT1M\n      - name: trial\n        per: user\n        limit: 60\n        window: PT1H\n  # Sign-in",
    );
    assert_eq!(text, want);
}

#[test]
fn a_new_bound_is_inserted_where_the_new_order_puts_it() {
    let text = edited(ROUTES, |c| {
        c["routes"][0]["bounds"]
            .as_array_mut()
            .unwrap()
            .insert(1, bound("trial", 60));
    });
    let want = ROUTES.replace(
        "        window: 'PT1M'\n",
        "        window: 'PT1M'\n      - name: trial\n        per: user\n        limit: 60\n        window: PT1H\n",
    );
    assert_eq!(text, want);
    // Before the first: above the first's own comment.
    let text = edited(ROUTES, |c| {
        c["routes"][0]["bounds"]
            .as_array_mut()
            .unwrap()
            .insert(0, bound("trial", 60));
    });
    let want = ROUTES.replace(
        "      # Partners pay",
        "      - name: trial\n        per: user\n        limit: 60\n        window: PT1H\n      # Partners pay",
    );
    assert_eq!(text, want);
}

#[test]
fn a_removed_item_takes_its_lines_and_the_comment_above_it() {
    let text = edited(ROUTES, |c| {
        c["routes"][0]["bounds"].as_array_mut().unwrap().remove(0);
    });
    let want = ROUTES.replace(
        "      # Partners pay for more.\n      - name: partner\n        per: user\n        limit: 1000   # agreed in the contract\n        window: 'PT1M'\n",
        "",
    );
    assert_eq!(text, want);
    let text = edited(ROUTES, |c| {
        c["routes"].as_array_mut().unwrap().remove(1);
    });
    assert_eq!(text, ROUTES[..ROUTES.find("  # Sign-in").unwrap()]);
}

#[test]
fn a_new_route_with_its_bounds_is_written_at_the_files_indentation() {
    // Mappings four columns in, lists not indented under their key.
    let four = concat!(
        "routes:\n",
        "- name: api   # the API\n",
        "  match:\n",
        "      path_prefix: /api\n",
        "  bounds:\n",
        "  - {name: a, per: user, limit: 1, window: PT1M}\n",
    );
    let mut route =
        serde_json::json!({"name": "admin", "match": {"path_prefix": "/admin"}, "bounds": []});
    route["bounds"]
        .as_array_mut()
        .unwrap()
        .push(bound("staff", 10));
    let text = edited(ROUTES, |c| {
        c["routes"].as_array_mut().unwrap().push(route.clone())
    });
    assert!(text.starts_with(ROUTES), "{text}");
    assert_eq!(
        &text[ROUTES.len()..],
        "  - name: admin\n    match:\n      path_prefix: /admin\n    bounds:\n      - name: staff\n        per: user\n        limit: 10\n        window: PT1H\n"
    );
    let text = edited(four, |c| {
        c["routes"].as_array_mut().unwrap().push(route.clone())
    });
    assert!(text.starts_with(four), "{text}");
    assert_eq!(
        &text[four.len()..],
        "- name: admin\n  match:\n      path_prefix: /admin\n  bounds:\n  - name: staff\n    per: user\n    limit: 10\n    window: PT1H\n"
    );
}

#[test]
fn a_new_key_goes_after_its_predecessor_and_a_removed_key_takes_its_comment() {
    let text = edited(ROUTES, |c| {
        let b = c["routes"][0]["bounds"][0].as_object_mut().unwrap();
        let mut m = serde_json::Map::new();
        for (k, v) in b.iter() {
            m.insert(k.clone(), v.clone());
            if k == "per" {
                m.insert("scope".into(), "fleet".into());
            }
        }
        *b = m;
    });
    assert_eq!(
        text,
        ROUTES.replace(
            "        per: user\n",
            "        per: user\n        scope: fleet\n"
        )
    );
    // A key first in its item's mapping (after the dash): one put
    // before it, and one removed.
    let text = edited(ROUTES, |c| {
        let b = c["routes"][0]["bounds"][0].as_object_mut().unwrap();
        let mut m = serde_json::Map::new();
        m.insert("id".into(), 7.into());
        m.extend(b.clone());
        *b = m;
        c["routes"][0]["bounds"][1]
            .as_object_mut()
            .unwrap()
            .remove("name");
    });
    let want = ROUTES
        .replace(
            "      - name: partner\n",
            "      - id: 7\n        name: partner\n",
        )
        .replace(
            "      - name: per_address\n        per: address\n",
            "      -\n        per: address\n",
        );
    assert_eq!(text, want);
    // The first key removed and a new one first: the file's opening
    // comment stays the file's.
    let text = edited(ROUTES, |c| {
        let mut top = serde_json::Map::new();
        top.insert("version".into(), 2.into());
        top.extend(c.as_object().unwrap().clone());
        top.remove("instance");
        *c = Value::Object(top);
    });
    let want = ROUTES.replace("instance: shop   # the counters' prefix\n", "version: 2\n");
    assert_eq!(text, want);
}

#[test]
fn a_value_that_changes_shape_is_written_anew_after_its_key() {
    // A scalar become a mapping: the comment on its line stays.
    let text = edited(ROUTES, |c| {
        c["routes"][0]["bounds"][0]["limit"] = serde_json::json!({"base": 1000, "burst": 50});
    });
    assert_eq!(
        text,
        ROUTES.replace(
            "        limit: 1000   # agreed in the contract\n",
            "        limit:   # agreed in the contract\n          base: 1000\n          burst: 50\n"
        )
    );
    // A list emptied: `[]` (no item lines would read as null).
    let text = edited(ROUTES, |c| c["routes"][0]["bounds"] = serde_json::json!([]));
    let start = ROUTES.find("      # Partners").unwrap();
    let end = ROUTES.find("  # Sign-in").unwrap();
    let want = format!("{}{}", &ROUTES[..start], &ROUTES[end..]).replace(
        "    match: {path_prefix: /api}\n    bounds:\n",
        "    match: {path_prefix: /api}\n    bounds: []\n",
    );
    assert_eq!(text, want);
}

#[test]
fn a_flow_collection_that_changes_is_written_whole_on_its_line() {
    let text = edited(ROUTES, |c| {
        c["routes"][1]["match"]["methods"] = serde_json::json!(["POST"]);
        c["routes"][1]["bounds"][0]["scope"] = "fleet".into();
    });
    assert_eq!(
        text,
        ROUTES
            .replace(
                "{path_prefix: /signin}",
                "{path_prefix: /signin, methods: [POST]}"
            )
            .replace(
                "{name: per_address, per: address, limit: 5, window: PT1M}",
                "{name: per_address, per: address, limit: 5, window: PT1M, scope: fleet}"
            )
    );
}

#[test]
fn keys_keep_the_files_order_and_text_that_does_not_read_back_is_written_whole() {
    let old = read(ROUTES).unwrap();
    let mut swapped = serde_json::Map::new();
    swapped.insert("routes".into(), old["routes"].clone());
    swapped.insert("instance".into(), "web".into());
    let text = edit(ROUTES, &old, &Value::Object(swapped), read).unwrap();
    assert_eq!(text, ROUTES.replace("instance: shop", "instance: web"));
    // The safety net: a reading that disagrees refuses the edit.
    let mut new = old.clone();
    new["instance"] = "web".into();
    assert!(edit(ROUTES, &old, &new, |_| Some(old.clone())).is_none());
}

#[test]
fn anchors_and_aliases_not_touched_are_kept() {
    let text = concat!(
        "window: &w PT1M   # one window for all\n",
        "routes:\n",
        "  - name: api\n",
        "    bounds:\n",
        "      - {name: a, per: address, limit: 100, window: *w}\n",
    );
    let out = edited(text, |c| {
        c["routes"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"name": "b"}));
    });
    assert_eq!(out, format!("{text}  - name: b\n"));
}

#[test]
fn a_renamed_bound_keeps_its_place_and_comments_beside_a_new_one() {
    let text = edited(ROUTES, |c| {
        let bounds = c["routes"][0]["bounds"].as_array_mut().unwrap();
        bounds[0]["name"] = "partners".into();
        bounds[0]["limit"] = 2000.into();
        bounds.push(bound("trial", 60));
    });
    let want = ROUTES
        .replace("- name: partner\n", "- name: partners\n")
        .replace("limit: 1000   #", "limit: 2000   #")
        .replace(
            "        window: PT1M\n  # Sign-in",
            "        window: PT1M\n      - name: trial\n        per: user\n        limit: 60\n        window: PT1H\n  # Sign-in",
        );
    assert_eq!(text, want);
}

#[test]
fn a_file_opening_with_dashes_or_ending_without_a_newline_is_edited_in_place() {
    let text = "---\n# The shop.\ninstance: shop\nroutes:\n- name: api\n  bounds: [{name: a, per: route, limit: 1, window: PT1M}]";
    let out = edited(text, |c| {
        c["routes"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"name": "b"}));
        c.as_object_mut().unwrap().remove("instance");
    });
    assert_eq!(
        out,
        "---\n# The shop.\nroutes:\n- name: api\n  bounds: [{name: a, per: route, limit: 1, window: PT1M}]\n- name: b\n"
    );
}
