//! The chain of Single Message Transforms a connector names: which transforms a connector's `transforms=…` names
//! ([`Transforms`], checked with the connector's configuration), the chain each task applies to its
//! records ([`Chain`]), and the connector's error-handling keys for them ([`ErrorHandling`]).
//!
//! Kafka Connect's rules: `transforms=a,b` lists aliases; `transforms.a.type` names a
//! transformation class; `transforms.a.predicate=p` (an alias listed in `predicates=…`, with
//! `predicates.p.type`) applies `a` only to records for which `p` holds, `transforms.a.negate=true`
//! to those for which it does not; every other `transforms.a.<key>` / `predicates.p.<key>` goes to
//! the transform or predicate without the prefix. Ferry also refuses keys of an alias that is not
//! listed (Kafka Connect ignores them), so a typo in an alias is not silently a no-op.

mod apply;
mod errors;
mod spec;

pub use apply::{Chain, ChainError, StepError};
pub use errors::{
    ERRORS_LOG_ENABLE, ERRORS_LOG_INCLUDE_MESSAGES, ERRORS_RETRY_DELAY_MAX_MS,
    ERRORS_RETRY_TIMEOUT, ErrorHandling,
};
pub use spec::{TransformRegistry, Transforms, aliases, is_chain_key};
