//! The names of a namespace's keys, all under one hash tag (`{P}`, one Cluster slot), and
//! the record's member string, from which its scope and key are read back.
//!
//! A member is `<scope length>:<scope>:<key>`: the length makes it unambiguous whatever
//! characters the scope holds (`a}:b` and `a` with key `b}:c` are two members).

use idem_core::{Scope, ScopedKey};

use crate::RedisError;

/// The longest namespace prefix, in bytes.
pub(crate) const PREFIX_BYTES_MAX: usize = 64;

/// A namespace's key names.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// `{P}:r:`, before a member.
    record_prefix: String,
    pub(crate) leases: String,
    pub(crate) results: String,
    pub(crate) tokens: String,
    tag: String,
}

impl Keys {
    /// The names under `prefix`: 1 to [`PREFIX_BYTES_MAX`] bytes of ASCII letters, digits
    /// and `_ - . :`.
    pub(crate) fn new(prefix: &str) -> Result<Self, RedisError> {
        let refuse = |reason| RedisError::Prefix { prefix: prefix.to_owned(), reason };
        if prefix.is_empty() || prefix.len() > PREFIX_BYTES_MAX {
            return Err(refuse("must be 1 to 64 bytes long"));
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || "_-.:".contains(c);
        if !prefix.chars().all(allowed) {
            return Err(refuse("may hold only ASCII letters, digits and _ - . :"));
        }
        let tag = format!("{{{prefix}}}");
        Ok(Self {
            record_prefix: format!("{tag}:r:"),
            leases: format!("{tag}:leases"),
            results: format!("{tag}:results"),
            tokens: format!("{tag}:tokens"),
            tag,
        })
    }

    /// The member string of `key`.
    pub(crate) fn member(key: &ScopedKey) -> String {
        let scope = key.scope().as_str();
        format!("{}:{scope}:{}", scope.len(), key.key().as_str())
    }

    /// The record hash of `member`.
    pub(crate) fn record(&self, member: &str) -> String {
        format!("{}{member}", self.record_prefix)
    }

    /// What every record's name starts with (the sweep and the pending list add members).
    pub(crate) fn record_prefix(&self) -> &str {
        &self.record_prefix
    }

    /// The counter of `scope`'s records in flight.
    pub(crate) fn quota(&self, scope: &Scope) -> String {
        let scope = scope.as_str();
        format!("{}:q:{}:{scope}", self.tag, scope.len())
    }

    /// Every key of the namespace matches this pattern (`SCAN MATCH`, for dropping it):
    /// the prefix holds none of the glob's special characters (`* ? [ ] \\`).
    pub(crate) fn pattern(&self) -> String {
        format!("{}:*", self.tag)
    }

    /// The key a member names.
    pub(crate) fn parse_member(member: &[u8]) -> Result<ScopedKey, RedisError> {
        let bad =
            || RedisError::Reply(format!("a stored member {:?}", String::from_utf8_lossy(member)));
        let text = std::str::from_utf8(member).map_err(|_| bad())?;
        let (len, rest) = text.split_once(':').ok_or_else(bad)?;
        let len: usize = len.parse().map_err(|_| bad())?;
        let scope = rest.get(..len).ok_or_else(bad)?;
        let key = rest.get(len..).and_then(|k| k.strip_prefix(':')).ok_or_else(bad)?;
        ScopedKey::parse(scope, key).map_err(|_| bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_unambiguous_and_read_back() {
        let tricky = ScopedKey::parse("a}:b", "c").expect("key");
        let other = ScopedKey::parse("a", "b}:c").expect("key");
        let (one, two) = (Keys::member(&tricky), Keys::member(&other));
        assert_ne!(one, two);
        assert_eq!(Keys::parse_member(one.as_bytes()).expect("parses"), tricky);
        assert_eq!(Keys::parse_member(two.as_bytes()).expect("parses"), other);
        assert!(Keys::parse_member(b"9:ab:c").is_err(), "a length past the end");
    }

    #[test]
    fn a_prefix_is_refused_naming_why() {
        for bad in ["", "has space", "{tag}", &"x".repeat(65)] {
            let refused = Keys::new(bad).expect_err(bad).to_string();
            assert!(refused.contains("namespace"), "{refused}");
        }
        let keys = Keys::new("shop.eu-1:keys").expect("accepted");
        assert_eq!(keys.leases, "{shop.eu-1:keys}:leases");
        assert_eq!(keys.pattern(), "{shop.eu-1:keys}:*");
    }
}
