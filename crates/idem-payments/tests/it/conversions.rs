//! Values users print and parse: each `Display` reads back through `FromStr`, and bad text
//! is refused with an error that names it and says what to write instead.

use idem_payments::{Amount, ChargeId, Currency, ValidationError};

#[test]
fn currencies_print_and_parse_back() {
    for code in ["EUR", "USD", "GBP", "JPY", "CHF"] {
        let currency: Currency = code.parse().expect("a known code");
        assert_eq!(currency.to_string(), code);
        assert_eq!(Currency::parse(code), Ok(currency), "parse and FromStr agree");
    }
    let refused = "eur".parse::<Currency>().expect_err("lower case");
    assert_eq!(refused, ValidationError::UnknownCurrency("eur".into()));
    let message = refused.to_string();
    assert!(message.contains("upper-case ISO 4217") && message.contains("EUR"), "{message}");
}

#[test]
fn amounts_print_minor_units_and_parse_them_back() {
    let cases: [(&str, Result<u64, ValidationError>); 7] = [
        ("1050", Ok(1050)),
        ("1", Ok(1)),
        ("9223372036854775807", Ok(i64::MAX as u64)),
        ("0", Err(ValidationError::NonPositiveAmount(0))),
        ("-5", Err(ValidationError::NonPositiveAmount(-5))),
        ("10.50", Err(ValidationError::AmountNotANumber { text: "10.50".into() })),
        ("", Err(ValidationError::AmountNotANumber { text: String::new() })),
    ];
    for (text, expected) in cases {
        let parsed = text.parse::<Amount>();
        assert_eq!(parsed.map(Amount::minor), expected, "{text:?}");
        if let Ok(amount) = text.parse::<Amount>() {
            assert_eq!(amount.to_string(), text, "Display reads back");
        }
    }
    // Hostile text: past i64, and a megabyte; the error keeps only its first 64 bytes.
    let past = "9223372036854775808".parse::<Amount>();
    assert!(matches!(past, Err(ValidationError::AmountNotANumber { .. })), "{past:?}");
    let huge = "é".repeat(1 << 19);
    match huge.parse::<Amount>() {
        Err(ValidationError::AmountNotANumber { text }) => assert_eq!(text, "é".repeat(32)),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_amount_prints_in_its_currency() {
    let amount = Amount::from_minor(1005).expect("positive");
    assert_eq!(amount.in_currency(Currency::Eur).to_string(), "10.05 EUR");
    assert_eq!(amount.in_currency(Currency::Jpy).to_string(), "1005 JPY");
    let cent = Amount::from_minor(1).expect("positive");
    assert_eq!(cent.in_currency(Currency::Usd).to_string(), "0.01 USD");
    assert_eq!(ChargeId(42).to_string(), "ch_42");
}

/// The largest amount charged three times through the simulated gateway: its running
/// total saturates instead of overflowing (a panic there counted a charge whose key the
/// gateway then did not know, and a reconcile released it).
#[test]
fn the_largest_amount_charged_three_times_is_counted_and_remembered() {
    let store = idem_core::MemoryStore::new(idem_core::StoreConfig::default());
    let gateway = idem_payments::SimulatedGateway::new();
    let processor = idem_payments::Processor::new("shop", gateway, store).expect("a processor");
    let largest = idem_payments::PaymentRequest::new("cus_1", i64::MAX, "USD").expect("valid");
    for i in 0..3 {
        let key = idem_core::IdempotencyKey::new(&format!("k{i}")).expect("a key");
        processor.pay(&key, &largest).expect("charged");
    }
    let totals = processor.gateway().totals();
    assert_eq!((totals.charges, totals.charged_minor), (3, u64::MAX));
}
