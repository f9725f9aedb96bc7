//! Fingerprints: pinned vectors (stability across releases) and unambiguity.

use idem_core::Fingerprint;

/// Durable stores keep fingerprints: if this vector changes, every stored key breaks.
#[test]
fn known_vector_is_pinned() {
    let fp = Fingerprint::builder("payment")
        .str("customer", "cus_42")
        .u64("amount_minor", 1250)
        .str("currency", "EUR")
        .finish();
    assert_eq!(fp.to_hex(), PINNED);
    assert_eq!(Fingerprint::from_bytes(*fp.as_bytes()), fp);
}

/// Computed independently of this crate, from the documented encoding (a Python one-liner:
/// SHA-256 of `idem-fingerprint-v1`, then per field tag byte, u64 BE name length, name,
/// u64 BE value length, value).
const PINNED: &str = "a5920fa2dbb04112eec7a0227a1003c175fc738870895f42bc1f149d0e5defba";

#[test]
fn length_prefix_separates_fields() {
    let ab_c = Fingerprint::builder("t").str("x", "ab").str("y", "c").finish();
    let a_bc = Fingerprint::builder("t").str("x", "a").str("y", "bc").finish();
    assert_ne!(ab_c, a_bc);
}

#[test]
fn every_part_of_the_encoding_matters() {
    let base = || Fingerprint::builder("t").u64("n", 5);
    let variants = [
        base().finish(),
        Fingerprint::builder("u").u64("n", 5).finish(),
        Fingerprint::builder("t").u64("m", 5).finish(),
        Fingerprint::builder("t").u64("n", 6).finish(),
        Fingerprint::builder("t").i64("n", 5).finish(),
        Fingerprint::builder("t").u128("n", 5).finish(),
        Fingerprint::builder("t").bytes("n", &5u64.to_be_bytes()).finish(),
        Fingerprint::builder("t").str("n", "5").finish(),
        Fingerprint::builder("t").bool("n", true).finish(),
        base().u64("n", 5).finish(),
        Fingerprint::builder("tn").finish(),
    ];
    for (i, a) in variants.iter().enumerate() {
        for b in &variants[i + 1..] {
            assert_ne!(a, b, "two different encodings share a fingerprint");
        }
    }
    assert_eq!(base().finish(), base().finish(), "the same request fingerprints alike");
}
