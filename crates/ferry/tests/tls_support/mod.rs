//! HTTPS and Basic credentials for the REST process tests: a self-signed certificate (rcgen) written
//! as a PEM keystore, and one-request-per-connection HTTPS client trusting only that certificate (as
//! `curl --cacert cert.pem`).

#![allow(dead_code)] // each test file uses a different part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// A self-signed certificate for `names`: the PEM keystore file (key and chain, Kafka Connect's
/// `ssl.keystore.type=PEM` file) written to `dir`, and the certificate's PEM text.
pub fn self_signed(dir: &Path, names: &[&str]) -> (PathBuf, String) {
    let certified = rcgen::generate_simple_self_signed(
        names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
    )
    .expect("a certificate");
    let cert = certified.cert.pem();
    let keystore = dir.join("keystore.pem");
    std::fs::write(
        &keystore,
        format!("{}{cert}", certified.key_pair.serialize_pem()),
    )
    .expect("write the keystore");
    (keystore, cert)
}

/// One answer: status, lower-cased head, body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// `Authorization: Basic base64(user:password)`.
pub fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}");
    let mut out = String::new();
    for chunk in input.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
}

/// One HTTPS request to `addr` (`host:port`, the host checked against the certificate), trusting
/// only `cert` (PEM), with an optional `Authorization` and JSON body.
pub fn request(
    addr: &str,
    cert: &str,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<&str>,
) -> Answer {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(cert.as_bytes()) {
        roots.add(c.expect("PEM")).expect("a usable certificate");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let host = addr.rsplit_once(':').expect("host:port").0.to_owned();
    let name = ServerName::try_from(host).expect("a server name");
    let connection = rustls::ClientConnection::new(Arc::new(config), name).expect("a TLS client");
    let tcp = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    tcp.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("a read timeout");
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    if let Some(a) = authorization {
        head.push_str(&format!("authorization: {a}\r\n"));
    }
    let body = body.unwrap_or_default();
    head.push_str(&format!(
        "content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    ));
    tls.write_all(head.as_bytes())
        .unwrap_or_else(|e| panic!("{method} https://{addr}{path}: {e}"));
    let mut raw = Vec::new();
    // The server may close without close_notify after its answer; what was read is the answer.
    let _ = tls.read_to_end(&mut raw);
    let raw = String::from_utf8(raw).expect("UTF-8");
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer to {method} https://{addr}{path}: {raw:?}"));
    Answer {
        status: head[9..12].parse().expect("a status"),
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}
