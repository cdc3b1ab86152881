//! One HTTP/1.1 request at a time to an in-process REST server, for the REST tests of this crate.
#![allow(dead_code)] // each test crate uses its own part

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

/// An answer: status, headers (lower-case names) and body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One HTTP/1.1 request on its own connection (`Connection: close`: the answer ends at EOF), with
/// blocking I/O on a blocking thread (the servers run on the test's runtime).
pub async fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    use std::io::{Read, Write};
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let raw = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        // A server refusing an oversized body (413) answers and closes before the whole body is
        // written: the write then fails (broken pipe, reset), and the answer is still there to read.
        let written = stream.write_all(request.as_bytes());
        let mut raw = Vec::new();
        let read = stream.read_to_end(&mut raw);
        if raw.is_empty() {
            written.expect("the request is written");
            read.expect("an answer within 60 s");
        }
        raw
    })
    .await
    .unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

pub const JSON: (&str, &str) = ("content-type", "application/json");
