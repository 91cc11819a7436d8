use super::*;

fn json(body: &[u8]) -> Result<String, Unreadable> {
    from_body(Place::Json("username"), body, Seen::default())
}

fn form(body: &[u8]) -> Result<String, Unreadable> {
    from_body(Place::Form("username"), body, Seen::default())
}

#[test]
fn json_field_only_when_a_string_at_the_top() {
    let alice = Ok("alice".to_string());
    assert_eq!(json(br#"{"username":" Alice","password":"x"}"#), alice);
    assert_eq!(json(br#"{"username":42}"#), Err(Unreadable::NotAString));
    assert_eq!(json(br#"{"username":null}"#), Err(Unreadable::NotAString));
    assert_eq!(json(br#"{"username":["a"]}"#), Err(Unreadable::NotAString));
    assert_eq!(json(br#"{"username":"  "}"#), Err(Unreadable::Missing));
    assert_eq!(
        json(br#"{"user":{"username":"a"}}"#),
        Err(Unreadable::Missing)
    );
    assert_eq!(json(br#"["username"]"#), Err(Unreadable::Malformed));
    assert_eq!(json(br#"{"username":"ali"#), Err(Unreadable::Malformed));
    assert_eq!(json(br#"{"username":"a"} x"#), Err(Unreadable::Malformed));
    assert_eq!(json(b""), Err(Unreadable::Malformed));
    assert_eq!(
        json(br#"{"username":"a" /* c */}"#),
        Err(Unreadable::Malformed)
    );
    // Whitespace is JSON, and within the cap it is read.
    assert_eq!(json(b" \n\t{ \"username\" : \"Alice\" } \n"), alice);
    // Escapes in names and values are what the server decodes.
    assert_eq!(json(br#"{"user\u006eame":"\u0041lice"}"#), alice);
}

#[test]
fn json_encodings_a_server_might_read_otherwise_are_refused() {
    assert_eq!(
        json(b"\xEF\xBB\xBF{\"username\":\"alice\"}"),
        Err(Unreadable::NotUtf8),
        "UTF-8 byte-order mark"
    );
    let utf16: Vec<u8> = "{\"username\":\"alice\"}"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    assert_eq!(json(&utf16), Err(Unreadable::NotUtf8));
    assert_eq!(
        json(b"{\"username\":\"al\xffce\"}"),
        Err(Unreadable::NotUtf8)
    );
}

#[test]
fn json_the_field_named_again_in_any_spelling() {
    for body in [
        br#"{"username":"decoy","USERNAME":"alice"}"#.as_slice(),
        br#"{"username":"decoy","username":"alice"}"#,
        br#"{"username":"decoy","UserName":"alice"}"#,
        "{\"username\":\"decoy\",\"ｕｓｅｒｎａｍｅ\":\"alice\"}".as_bytes(),
        "{\"username\":\"decoy\",\"u\u{17F}ername\":\"alice\"}".as_bytes(), // long s
        br#"{"username":"alice","USERNAME":7}"#,
    ] {
        assert!(
            matches!(
                json(body),
                Err(Unreadable::Ambiguous | Unreadable::NotAString)
            ),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    assert_eq!(
        json(br#"{"username":"Alice","USERNAME":"alice "}"#),
        Ok("alice".into()),
        "one account, spelled twice"
    );
}

#[test]
fn form_fields_decoded_in_any_spelling() {
    // The space is dropped too (the UCA ignores U+FE70, which NFKC makes a
    // space and a mark: collation.rs).
    assert_eq!(form(b"password=x&username=Al%69ce+B"), Ok("aliceb".into()));
    assert_eq!(form(b"user%6eame=bob"), Ok("bob".into()));
    assert_eq!(form(b"username=%zz"), Err(Unreadable::Malformed));
    assert_eq!(form(b"username=%ff"), Err(Unreadable::NotUtf8));
    assert_eq!(form(b"username="), Err(Unreadable::Missing));
    assert_eq!(form(b"other=1"), Err(Unreadable::Missing));
    assert_eq!(form(b""), Err(Unreadable::Missing));
    assert_eq!(
        form(b"username=eve&username=bob"),
        Err(Unreadable::Ambiguous)
    );
    assert_eq!(
        form(b"username=eve&USERNAME=bob"),
        Err(Unreadable::Ambiguous)
    );
    assert_eq!(form(b"username=eve&%55sername=EVE"), Ok("eve".into()));
    assert_eq!(
        form(b"x=%zz&username=eve"),
        Ok("eve".into()),
        "another field"
    );
}

#[test]
fn the_query_string_and_the_body_must_agree() {
    let types = [b"application/x-www-form-urlencoded".to_vec()];
    let at = |path: &str, body: &[u8]| {
        let head = Head {
            content_type: &types,
            path: Some(path),
            ..Head::default()
        };
        let seen = from_head(Place::Form("username"), &head)?;
        from_body(Place::Form("username"), body, seen)
    };
    assert_eq!(at("/login", b"username=alice"), Ok("alice".into()));
    assert_eq!(
        at("/login?username=alice", b"username=decoy"),
        Err(Unreadable::Ambiguous),
        "servlet getParameter reads the query first"
    );
    assert_eq!(
        at("/login?username=Alice", b"username=alice"),
        Ok("alice".into())
    );
    assert_eq!(
        at("/login?username=alice", b"password=x"),
        Ok("alice".into()),
        "named once, in the query: the body names no other"
    );
}

/// `victim\u{1}` must not be a fresh counter per spelling: Spring
/// (`String.trim`), Django and DRF (`str.strip`) sign in as `victim`.
#[test]
fn a_control_character_anywhere_is_refused_not_folded() {
    let cc = Err(Unreadable::ControlCharacter);
    for c in (0u32..0x20).chain(0x7F..0xA0).filter_map(char::from_u32) {
        for name in [
            format!("victim{c}"),
            format!("{c}victim"),
            format!("vic{c}tim"),
        ] {
            assert_eq!(key(&name), cc, "{name:?}");
            let body = serde_json::json!({ "username": name }).to_string();
            assert_eq!(json(body.as_bytes()), cc, "{body}");
        }
    }
    assert_eq!(form(b"username=victim%01"), cc);
    assert_eq!(form(b"username=victim%00"), cc);
    assert_eq!(form(b"username=victim%1F%1F"), cc);
    assert_eq!(form(b"username=victim%C2%85"), cc, "NEL, a C1 control");
    assert_eq!(form(b"username=%09victim"), cc, "a tab too");
    assert_eq!(json(b"{\"username\":\"victim\\u001f\"}"), cc);
    // White space that is not a control is still trimmed.
    assert_eq!(key("\u{2003}victim\u{3000}"), Ok("victim".into()));
    assert_eq!(key("victim"), Ok("victim".into()));
    let cc_status = Unreadable::ControlCharacter;
    assert_eq!(
        (cc_status.status(), cc_status.reason()),
        (400, "control_character")
    );
}

/// Python's parse_qsl before 3.9.2 splits a form body on `;` as on `&`
/// (a query string: carrier.rs).
#[test]
fn a_form_body_split_on_semicolons_too() {
    // A body too: Python's parse_qsl before 3.9.2 splits it on `;`.
    assert_eq!(
        form(b"username=decoy&x=1;username=victim"),
        Err(Unreadable::Ambiguous)
    );
    assert_eq!(form(b"x=1;username=victim"), Ok("victim".into()));
    // Found by the oracle: Rack reads `username[]` as the field (Devise
    // `["jos\u{e9};username=victim"]`), the split on `;` `victim`.
    assert_eq!(
        form("username[]=jos\u{e9};username=victim".as_bytes()),
        Err(Unreadable::Ambiguous)
    );
    assert_eq!(form(b"username[]=victim"), Err(Unreadable::Ambiguous));
    assert_eq!(form(b"username[a]=victim"), Err(Unreadable::Ambiguous));
    assert_eq!(form(b"user[name]=victim"), Err(Unreadable::Missing));
}

#[test]
fn an_account_longer_than_any_server_keeps_is_refused() {
    let at_most = "a".repeat(normalize::MAX_CHARS);
    assert_eq!(key(&at_most), Ok(at_most.clone()));
    let over = format!("{at_most}a");
    assert_eq!(key(&over), Err(Unreadable::TooLong));
    assert_eq!(Unreadable::TooLong.reason(), "too_long");
}

#[test]
fn statuses_say_what_is_wrong() {
    assert_eq!(Unreadable::TooLarge { cap: 64 }.status(), 413);
    assert_eq!(Unreadable::ContentType.status(), 415);
    assert_eq!(Unreadable::ContentEncoding.status(), 415);
    assert_eq!(Unreadable::Ambiguous.status(), 400);
    let d = Unreadable::TooLarge { cap: 64 }.detail(Place::Json("username"));
    assert!(d.contains("64 bytes") && d.contains("\"username\""), "{d}");
}

#[cfg(not(target_arch = "wasm32"))]
mod properties {
    use super::super::normalize;
    use proptest::prelude::*;

    /// `c` in the fullwidth and mathematical-bold forms NFKC maps back.
    fn fullwidth(c: char) -> char {
        match c {
            '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c),
            _ => c,
        }
    }
    fn bold(c: char) -> char {
        match c {
            'a'..='z' => char::from_u32(c as u32 - 'a' as u32 + 0x1D41A).unwrap_or(c),
            'A'..='Z' => char::from_u32(c as u32 - 'A' as u32 + 0x1D400).unwrap_or(c),
            _ => c,
        }
    }

    proptest! {
        #[test]
        fn compatibility_and_case_spellings_share_one_key(
            name in "[a-zA-Z0-9._@-]{1,24}",
            spaces in 0usize..3,
        ) {
            let key = normalize(&name);
            let pad = " ".repeat(spaces);
            let fw: String = name.chars().map(fullwidth).collect();
            let mb: String = name.chars().map(bold).collect();
            let zw: String = name.chars().flat_map(|c| [c, '\u{200B}']).collect();
            for spelling in [
                name.to_uppercase(),
                name.to_lowercase(),
                format!("{pad}{name}{pad}"),
                fw,
                mb,
                zw,
            ] {
                prop_assert_eq!(&normalize(&spelling), &key, "{:?}", spelling);
            }
        }

        #[test]
        fn the_key_is_a_fixed_point(s in "\\PC{0,16}") {
            if let Some(k) = normalize(&s) {
                prop_assert_eq!(normalize(&k), Some(k.clone()));
            }
        }
    }
}
