//! Key and scope validation, as a table of inputs and verdicts.

use idem_core::{IdempotencyKey, KEY_LEN_MAX, KeyError, Scope, ScopedKey, ScopedKeyError};

#[track_caller]
fn check(input: &str, expected: Result<(), KeyError>) {
    let got = IdempotencyKey::new(input).map(|k| assert_eq!(k.as_str(), input));
    assert_eq!(got, expected, "key {input:?}");
    let got = Scope::new(input).map(|s| assert_eq!(s.as_str(), input));
    assert_eq!(got, expected, "scope {input:?}");
}

#[test]
fn validation_table() {
    let longest = "k".repeat(KEY_LEN_MAX);
    let too_long = "k".repeat(KEY_LEN_MAX + 1);
    let cases: &[(&str, Result<(), KeyError>)] = &[
        ("a", Ok(())),
        ("order-1234/checkout", Ok(())),
        ("with space", Ok(())),
        ("~!@#$%^&*()_+{}|:\"<>?", Ok(())),
        (&longest, Ok(())),
        ("", Err(KeyError::Empty)),
        (&too_long, Err(KeyError::TooLong { len_bytes: KEY_LEN_MAX + 1 })),
        ("tab\there", Err(KeyError::BadByte { position: 3, byte: b'\t' })),
        ("nul\0", Err(KeyError::BadByte { position: 3, byte: 0 })),
        ("del\x7f", Err(KeyError::BadByte { position: 3, byte: 0x7f })),
        ("\nfirst", Err(KeyError::BadByte { position: 0, byte: b'\n' })),
        ("caf\u{e9}", Err(KeyError::BadByte { position: 3, byte: 0xc3 })),
        (" lead", Err(KeyError::SurroundingSpace { position: 0 })),
        ("trail ", Err(KeyError::SurroundingSpace { position: 5 })),
        (" ", Err(KeyError::SurroundingSpace { position: 0 })),
        ("tab\t ", Err(KeyError::BadByte { position: 3, byte: b'\t' })),
    ];
    for (input, expected) in cases {
        check(input, *expected);
    }
}

#[test]
fn errors_say_what_is_wrong() {
    let cases = [
        (KeyError::Empty, "key is empty"),
        (KeyError::TooLong { len_bytes: 300 }, "key is 300 bytes long, the limit is 255"),
        (
            KeyError::BadByte { position: 3, byte: 9 },
            "key has byte 0x09 at position 3, only printable ASCII is allowed",
        ),
        (
            KeyError::SurroundingSpace { position: 0 },
            "key has a space at position 0; spaces at either end are not allowed",
        ),
    ];
    for (error, message) in cases {
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn scoped_key_parse_names_the_bad_part() {
    let empty_scope = ScopedKey::parse("", "k");
    assert_eq!(empty_scope, Err(ScopedKeyError::Scope(KeyError::Empty)));
    assert_eq!(empty_scope.expect_err("refused").to_string(), "scope is empty");
    let empty_key = ScopedKey::parse("s", "");
    assert_eq!(empty_key, Err(ScopedKeyError::Key(KeyError::Empty)));
    assert_eq!(empty_key.expect_err("refused").to_string(), "key is empty");
    // Both bad: the scope is named first.
    let long = "x".repeat(KEY_LEN_MAX + 1);
    let both = ScopedKey::parse(" s", &long).expect_err("refused");
    assert_eq!(
        both.to_string(),
        "scope has a space at position 0; spaces at either end are not allowed"
    );
    let key_only = ScopedKey::parse("s", &long).expect_err("refused");
    assert_eq!(key_only.error(), KeyError::TooLong { len_bytes: KEY_LEN_MAX + 1 });
    assert_eq!(key_only.to_string(), "key is 256 bytes long, the limit is 255");
    let key = ScopedKey::parse("tenant:1", "k-1").expect("valid");
    assert_eq!((key.scope().as_str(), key.key().as_str()), ("tenant:1", "k-1"));
    assert_ne!(key, ScopedKey::parse("tenant:2", "k-1").expect("valid"));
}

#[test]
fn parse_and_try_from_agree_with_new() {
    let parsed: IdempotencyKey = "abc".parse().expect("valid");
    assert_eq!(parsed, IdempotencyKey::try_from("abc").expect("valid"));
    assert_eq!("".parse::<Scope>(), Err(KeyError::Empty));
}

#[test]
fn public_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<IdempotencyKey>();
    assert_send_sync::<ScopedKey>();
    assert_send_sync::<KeyError>();
    assert_send_sync::<idem_core::StoreError>();
    assert_send_sync::<idem_core::MemoryStore<String>>();
    assert_send_sync::<idem_core::Fingerprint>();
}

#[test]
fn a_joined_scope_is_the_scope_new_would_make_up_to_the_limit() {
    let parent = Scope::new("m").expect("valid");
    for child_len in [1, KEY_LEN_MAX - 3, KEY_LEN_MAX - 2] {
        let child = Scope::new(&"c".repeat(child_len)).expect("valid");
        let joined = parent.join(&child).expect("fits");
        let text = format!("m/{}", child.as_str());
        assert_eq!(joined, Scope::new(&text).expect("valid"));
        assert_eq!(joined.as_str().len(), child_len + 2);
    }
    let child = Scope::new(&"c".repeat(KEY_LEN_MAX - 1)).expect("valid");
    assert_eq!(parent.join(&child), Err(KeyError::TooLong { len_bytes: KEY_LEN_MAX + 1 }));
    let max = Scope::new(&"c".repeat(KEY_LEN_MAX)).expect("valid");
    assert_eq!(max.join(&max), Err(KeyError::TooLong { len_bytes: 2 * KEY_LEN_MAX + 1 }));
}
