//! Waiting on events, not fixed sleeps: a condition checked every few milliseconds until it holds,
//! failing the test with what it waited for once the deadline passes.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is checked.
const EVERY: Duration = Duration::from_millis(5);

/// Waits until `cond` holds; panics (fails the test) naming `what` after `deadline`.
pub async fn eventually(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + deadline;
    while !cond() {
        assert!(
            Instant::now() < until,
            "timed out after {deadline:?} waiting for: {what}"
        );
        tokio::time::sleep(EVERY).await;
    }
}

/// [`eventually`] for a condition that must be awaited.
pub async fn eventually_async<F, Fut>(what: &str, deadline: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let until = Instant::now() + deadline;
    while !cond().await {
        assert!(
            Instant::now() < until,
            "timed out after {deadline:?} waiting for: {what}"
        );
        tokio::time::sleep(EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_condition_that_comes_true_ends_the_wait() {
        let mut checks = 0;
        eventually("three checks", Duration::from_secs(5), || {
            checks += 1;
            checks == 3
        })
        .await;
        assert_eq!(checks, 3);
        eventually_async("at once", Duration::from_secs(5), || async { true }).await;
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 20ms waiting for: never")]
    async fn a_condition_that_never_holds_fails_the_test_with_what_it_waited_for() {
        eventually("never", Duration::from_millis(20), || false).await;
    }
}
