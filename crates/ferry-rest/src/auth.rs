//! Authentication of every REST request: `rest.auth.token` (`Authorization: Bearer <token>`) and
//! `rest.basic.auth.credentials.file` (`Authorization: Basic base64(user:password)`, as Kafka
//! Connect's `BasicAuthSecurityRestExtension`). With both, either credential is accepted. Refused
//! requests get `401` with a `WWW-Authenticate` challenge for each configured scheme and Kafka
//! Connect's body `{"error_code":401,"message":"User cannot access the resource."}`. Neither
//! passwords nor tokens are logged; a refusal is logged at debug level with the user name only.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use super::error::ApiError;
use ferry_runtime::config::{BasicCredentials, RestConfig, Secret, constant_time_eq};

/// The `WWW-Authenticate` challenge of Basic authentication.
const BASIC_CHALLENGE: &str = "Basic realm=\"ferry\", charset=\"UTF-8\"";

/// What a request may authenticate with.
#[derive(Clone, Default)]
pub(crate) struct Auth {
    token: Option<Secret>,
    basic: Option<BasicCredentials>,
}

impl Auth {
    pub(crate) fn new(config: &RestConfig) -> Self {
        Self {
            token: config.auth_token.clone(),
            basic: config.basic_auth.clone(),
        }
    }

    /// Whether the `Authorization` header's value is an accepted credential.
    fn accepts(&self, authorization: Option<&str>) -> bool {
        let Some((scheme, credentials)) = authorization.and_then(|v| v.trim().split_once(' '))
        else {
            return false;
        };
        let credentials = credentials.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return self
                .token
                .as_ref()
                .is_some_and(|t| constant_time_eq(credentials.as_bytes(), t.expose().as_bytes()));
        }
        if scheme.eq_ignore_ascii_case("basic") {
            let Some(users) = &self.basic else {
                return false;
            };
            let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credentials) else {
                return false;
            };
            let Ok(decoded) = String::from_utf8(decoded) else {
                return false;
            };
            // RFC 7617: the user name cannot contain ':', the password can.
            let Some((user, password)) = decoded.split_once(':') else {
                return false;
            };
            let accepted = users.check(user, password);
            if !accepted {
                tracing::debug!(user = %user, "REST request refused: unknown user or wrong password");
            }
            return accepted;
        }
        false
    }
}

/// Refuses requests without an accepted credential; passes every request when none is configured.
pub(crate) async fn authenticate(
    State(auth): State<Arc<Auth>>,
    request: Request,
    next: Next,
) -> Response {
    if auth.token.is_none() && auth.basic.is_none() {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if auth.accepts(presented) {
        return next.run(request).await;
    }
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "User cannot access the resource.").into_response();
    let headers = response.headers_mut();
    if auth.basic.is_some() {
        headers.append(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(BASIC_CHALLENGE),
        );
    }
    if auth.token.is_some() {
        headers.append(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_runtime::config::Properties;

    fn basic(user: &str, password: &str) -> String {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {encoded}")
    }

    #[test]
    fn either_configured_credential_is_accepted() {
        let props = Properties::parse("creds", b"alice: s3cret\n").expect("parses");
        let users = BasicCredentials::from_properties(&props).expect("users");
        let both = Auth {
            token: Some(Secret::new("tok")),
            basic: Some(users.clone()),
        };
        assert!(both.accepts(Some("Bearer tok")));
        assert!(both.accepts(Some("bearer  tok ")));
        assert!(both.accepts(Some(&basic("alice", "s3cret"))));
        assert!(!both.accepts(Some(&basic("alice", "wrong"))));
        assert!(!both.accepts(Some(&basic("bob", "s3cret"))));
        assert!(!both.accepts(Some("Basic not-base64!")));
        assert!(!both.accepts(Some("Bearer s3cret")));
        assert!(!both.accepts(None));
        let basic_only = Auth {
            token: None,
            basic: Some(users),
        };
        assert!(!basic_only.accepts(Some("Bearer tok")));
        assert!(basic_only.accepts(Some(&basic("alice", "s3cret"))));
        let token_only = Auth {
            token: Some(Secret::new("tok")),
            basic: None,
        };
        assert!(!token_only.accepts(Some(&basic("alice", "s3cret"))));
    }
}
