//! Leaving the group, bounded: the poll thread stops on a flag (a full command queue cannot lose
//! it), drops the consumer (which revokes every slot through the handler and leaves), and the
//! handler thread ends after its last queued call. A handler stuck in a call must not hold the caller
//! past its timeout; the threads then finish in the background.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::SlotsError;

/// The threads of a joined member.
pub(super) struct Threads {
    pub(super) poll: JoinHandle<()>,
    pub(super) handler: JoinHandle<()>,
    /// Told when the poll thread has left the group.
    pub(super) closed: Receiver<()>,
    /// Told when the handler thread has run its last call.
    pub(super) handler_done: Receiver<()>,
}

/// Closes the member once; later calls return at once.
pub(super) struct Closer {
    pub(super) group: String,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) threads: Mutex<Option<Threads>>,
}

impl Closer {
    pub(super) fn close(&self, timeout: Duration) -> Result<(), SlotsError> {
        let Some(threads) = self
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(());
        };
        self.stop.store(true, Ordering::Release);
        let deadline = Instant::now() + timeout;
        let unfinished = |what: &str| SlotsError::Broker {
            group: self.group.clone(),
            message: format!(
                "leaving the group did not finish within {timeout:?}: {what}; it goes on in the \
                 background"
            ),
        };
        match threads.closed.recv_timeout(timeout) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                let _ = threads.poll.join();
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(unfinished(
                    "the consumer is still closing (a revoke handler running, or the broker slow)",
                ));
            }
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        match threads.handler_done.recv_timeout(remaining) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                let _ = threads.handler.join();
                Ok(())
            }
            Err(RecvTimeoutError::Timeout) => Err(unfinished(
                "the slot handler is still running its last call",
            )),
        }
    }
}
