//! RFC 9457 problem details: the body of every answer the layer gives on its own.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

/// Where each problem type is described; the fragment names the problem.
const TYPE_BASE: &str = "https://example.invalid/idem/docs/http.md#";

/// An answer the layer gives without running the handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    /// The `type` fragment, which also names the case in docs/http.md.
    pub(crate) slug: &'static str,
    pub(crate) title: &'static str,
    pub(crate) detail: String,
    pub(crate) retry_after: Option<Duration>,
}

impl Problem {
    pub(crate) fn new(
        status: StatusCode,
        slug: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self { status, slug, title, detail: detail.into(), retry_after: None }
    }

    /// Adds `Retry-After`, in whole seconds: rounded down, so it never names a time past
    /// `after` (a 1.5 s lease left says 1, never 2), and at least 1.
    pub(crate) fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// The JSON body.
    pub(crate) fn body(&self) -> Bytes {
        let mut json = String::with_capacity(160 + self.detail.len());
        json.push_str("{\"type\":");
        quote(&mut json, &format!("{TYPE_BASE}{}", self.slug));
        json.push_str(",\"title\":");
        quote(&mut json, self.title);
        json.push_str(&format!(",\"status\":{},\"detail\":", self.status.as_u16()));
        quote(&mut json, &self.detail);
        json.push('}');
        Bytes::from(json)
    }

    pub(crate) fn response<B: From<Bytes>>(&self) -> Response<B> {
        let mut response = Response::new(B::from(self.body()));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        let json = HeaderValue::from_static("application/problem+json");
        headers.insert(header::CONTENT_TYPE, json);
        if let Some(after) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(after.as_secs().max(1)));
        }
        response
    }
}

/// Appends `text` as a JSON string.
fn quote(json: &mut String, text: &str) {
    json.push('"');
    for c in text.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            c if u32::from(c) < 0x20 => json.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => json.push(c),
        }
    }
    json.push('"');
}
