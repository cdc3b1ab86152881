//! An HTTP client for the REST process tests: every request returns its status, headers and body,
//! whatever the status (errors are what many tests look at).

#![allow(dead_code)] // each test file uses a different part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// One answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub location: Option<String>,
    pub content_type: Option<String>,
}

impl Reply {
    /// The body as JSON; fails the test if it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("the body is not JSON ({e}): {self:?}"))
    }

    /// Asserts the status and returns the JSON body (`Null` when empty).
    pub fn expect(&self, status: u16) -> Value {
        assert_eq!(self.status, status, "unexpected status: {self:?}");
        if self.body.is_empty() {
            Value::Null
        } else {
            self.json()
        }
    }

    /// Asserts a Kafka Connect error body `{"error_code":status,"message":…}` whose message contains
    /// `fragment`; returns the message.
    pub fn expect_error(&self, status: u16, fragment: &str) -> String {
        let body = self.expect(status);
        assert_eq!(body["error_code"], status, "error_code of {self:?}");
        let message = body["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message in {self:?}"))
            .to_owned();
        assert!(
            message.contains(fragment),
            "the message should contain {fragment:?}: {message:?}"
        );
        assert_eq!(
            body.as_object().map(|o| o.len()),
            Some(2),
            "only error_code and message: {self:?}"
        );
        message
    }
}

/// The REST API of one `ferry standalone` process.
pub struct Api {
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
}

impl Api {
    /// The API at `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Self {
            base: base.trim_end_matches('/').to_owned(),
            agent,
            token: None,
        }
    }

    /// The same API, sending `Authorization: Bearer <token>`.
    pub fn with_token(base: &str, token: &str) -> Self {
        Self {
            token: Some(token.to_owned()),
            ..Self::new(base)
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None, &[])
    }

    pub fn post(&self, path: &str, body: Option<&str>) -> Reply {
        self.send("POST", path, body, &[])
    }

    pub fn put(&self, path: &str, body: Option<&str>) -> Reply {
        self.send("PUT", path, body, &[])
    }

    pub fn patch(&self, path: &str, body: &str) -> Reply {
        self.send("PATCH", path, Some(body), &[])
    }

    pub fn delete(&self, path: &str) -> Reply {
        self.send("DELETE", path, None, &[])
    }

    /// Any request, with extra headers.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let url = format!("{}{path}", self.base);
        let mut builder = ureq::http::Request::builder().method(method).uri(&url);
        if let Some(token) = &self.token {
            builder = builder.header("Authorization", format!("Bearer {token}"));
        }
        if body.is_some() {
            builder = builder.header("Content-Type", "application/json");
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        // A POST, PUT or PATCH without a body still says `Content-Length: 0`, as curl's `-d ''` does;
        // a GET or DELETE sends none.
        let body = match (body, method) {
            (Some(body), _) => Some(body.as_bytes().to_vec()),
            (None, "POST" | "PUT" | "PATCH") => Some(Vec::new()),
            (None, _) => None,
        };
        let result = match body {
            Some(body) => {
                let request = builder.body(body).expect("a valid request");
                self.agent.run(request)
            }
            None => {
                let request = builder.body(()).expect("a valid request");
                self.agent.run(request)
            }
        };
        let mut response = result.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (location, content_type) = (header("location"), header("content-type"));
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .read_to_string()
            .unwrap_or_else(|e| panic!("{method} {url}: reading the body: {e}"));
        Reply {
            status,
            body,
            location,
            content_type,
        }
    }

    /// Sends a raw HTTP/1.1 request (`head` without the final blank line, then `body`) over a plain
    /// TCP connection and returns the status and body of the answer. Write errors are ignored: a server
    /// may answer (413) and close before reading everything.
    pub fn raw(&self, head: &str, body: &[u8]) -> Reply {
        let authority = self.base.trim_start_matches("http://");
        let mut stream = TcpStream::connect(authority).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let auth = self
            .token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let _ = stream.write_all(
            format!("{head}\r\nHost: {authority}\r\nConnection: close\r\n{auth}\r\n").as_bytes(),
        );
        let _ = stream.write_all(body);
        let _ = stream.flush();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {text:?}"));
        let content_type = head
            .lines()
            .find_map(|l| l.strip_prefix("content-type: "))
            .map(str::to_owned);
        Reply {
            status,
            body: dechunk(head, body),
            location: None,
            content_type,
        }
    }
}

/// The body of a raw answer, decoded if it is chunked.
fn dechunk(head: &str, body: &str) -> String {
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.to_owned();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}
