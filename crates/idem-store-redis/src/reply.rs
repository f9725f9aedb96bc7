//! Reading the scripts' replies: arrays of strings and integers, each read by what the
//! script promises to return there. A reply of any other shape is
//! [`RedisError::Reply`], never a guess.

use redis::Value;

use crate::RedisError;

/// A script's reply, read field by field.
#[derive(Debug)]
pub(crate) struct Reply {
    items: std::vec::IntoIter<Value>,
    what: &'static str,
}

impl Reply {
    /// The reply of the script `what`: an array (or a single value, read as one item).
    pub(crate) fn new(value: Value, what: &'static str) -> Self {
        let items = match value {
            Value::Array(items) => items,
            other => vec![other],
        };
        Self { items: items.into_iter(), what }
    }

    fn bad(&self, wanted: &str) -> RedisError {
        RedisError::Reply(format!("{} returned no {wanted} where one belongs", self.what))
    }

    /// The next item, as bytes.
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>, RedisError> {
        match self.items.next() {
            Some(Value::BulkString(bytes)) => Ok(bytes),
            Some(Value::SimpleString(text)) => Ok(text.into_bytes()),
            _ => Err(self.bad("string")),
        }
    }

    /// The next item, as text.
    pub(crate) fn text(&mut self) -> Result<String, RedisError> {
        let bytes = self.bytes()?;
        String::from_utf8(bytes).map_err(|_| self.bad("text"))
    }

    /// The next item, as an integer (Redis sends one as an integer or as digits).
    pub(crate) fn int(&mut self) -> Result<i64, RedisError> {
        match self.items.next() {
            Some(Value::Int(n)) => Ok(n),
            Some(Value::BulkString(bytes)) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| text.parse().ok())
                .ok_or_else(|| self.bad("integer")),
            _ => Err(self.bad("integer")),
        }
    }

    /// Whether items are left.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_read_by_kind_and_a_wrong_one_is_refused() {
        let value = Value::Array(vec![
            Value::BulkString(b"acquired".to_vec()),
            Value::Int(7),
            Value::BulkString(b"1700000030000".to_vec()),
        ]);
        let mut reply = Reply::new(value, "claim");
        assert_eq!(reply.text().expect("status"), "acquired");
        assert_eq!(reply.int().expect("token"), 7);
        assert_eq!(reply.int().expect("deadline"), 1_700_000_030_000);
        assert!(reply.is_empty());
        let refused = reply.int().expect_err("nothing left").to_string();
        assert!(refused.contains("claim returned no integer"), "{refused}");
    }
}
