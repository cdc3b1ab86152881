//! JSON bodies for the answers hyper writes itself: a request hyper cannot parse (`400`), a request
//! target over its limit (`414`) or a request head over its limit (`431`) is answered by hyper
//! before any handler runs, with an empty body. The API promises Kafka Connect's
//! `{"error_code":…,"message":…}` for every error, so the connection's writes are watched for
//! exactly such an answer — a whole response head with `content-length: 0` and one of those
//! statuses, which no handler answers (handlers' errors always carry a JSON body) — and it is
//! replaced by the same status with a JSON body.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose writes are watched for hyper's own error answers.
pub(crate) struct JsonErrorsIo<S> {
    inner: S,
    /// A replacement being written: its bytes, how many are written, and how many bytes of the
    /// caller's buffer it stands for (reported once all of it is written).
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<S> JsonErrorsIo<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            pending: None,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonErrorsIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonErrorsIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.pending.is_none() {
            match with_json_body(buf) {
                Some(replacement) => this.pending = Some((replacement, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        // The caller retries with the same buffer while this is pending.
        while let Some((bytes, written, stands_for)) = &mut this.pending {
            if *written == bytes.len() {
                let n = *stands_for;
                this.pending = None;
                return Poll::Ready(Ok(n));
            }
            match ready!(Pin::new(&mut this.inner).poll_write(cx, &bytes[*written..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => *written += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(0))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// hyper's bodiless `400`/`414`/`431` head in `buf`, rewritten with a JSON body; `None` for anything
/// else.
fn with_json_body(buf: &[u8]) -> Option<Vec<u8>> {
    if !buf.starts_with(b"HTTP/1.1 4") || !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let head = std::str::from_utf8(buf).ok()?;
    let message = match head.get(9..12)? {
        "400" => {
            "Bad Request: the request is not valid HTTP/1.1 (request line or a header is malformed)"
        }
        "414" => "URI Too Long: the request target is longer than the server accepts",
        "431" => {
            "Request Header Fields Too Large: the request has too many headers or they are too long"
        }
        _ => return None,
    };
    let lines: Vec<&str> = head.trim_end_matches("\r\n").split("\r\n").collect();
    let (status_line, headers) = lines.split_first()?;
    let lower = |l: &&str| l.to_ascii_lowercase();
    if headers
        .iter()
        .map(lower)
        .any(|l| l.starts_with("content-type:"))
        || !headers
            .iter()
            .map(lower)
            .any(|l| l.replace(' ', "") == "content-length:0")
    {
        return None;
    }
    let status = &head[9..12];
    let body = format!(
        "{{\"error_code\":{status},\"message\":{}}}",
        serde_json::Value::String(message.to_owned())
    );
    let mut out = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for header in headers {
        if !header.to_ascii_lowercase().starts_with("content-length:") {
            out.push_str(header);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bodiless_parse_error_heads_are_rewritten() {
        let hyper =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let rewritten = String::from_utf8(with_json_body(hyper).expect("rewritten")).expect("text");
        let (head, body) = rewritten.split_once("\r\n\r\n").expect("head and body");
        assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(head.contains("date: x"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(json["error_code"], 431);

        for other in [
            &b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
        ] {
            assert!(with_json_body(other).is_none());
        }
    }
}
