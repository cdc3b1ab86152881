//! Each task's loop runs on a thread of its own, as Kafka Connect runs each task on its own thread.
//!
//! A connector may block the thread it runs on: a synchronous `open()` of a FIFO without a writer, a
//! blocking read, a busy loop inside `start()` or `poll()`. On the runtime's worker threads, a few such
//! tasks would stall every other task, the REST API and the timers that bound a stop — the worker
//! could not even be stopped. On its own thread (driving its future with the runtime's handle, so
//! its I/O, timers and spawned helpers still use the runtime) a blocked task blocks only itself.
//!
//! A blocked thread cannot be interrupted. A stop that outlasts `task.shutdown.graceful.timeout.ms`
//! therefore gives up on the task ([`TaskThread::cancel`]): its helpers on the runtime (delivery
//! watcher, periodic committer) are aborted at once, so nothing of it commits any more, and its loop
//! is dropped at its next await if the thread ever comes back. The thread itself is left behind; the
//! process exits without waiting for it.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

/// The helpers a task spawned on the runtime, and whether the task was given up on.
#[derive(Debug, Default)]
pub(crate) struct Helpers {
    cancelled: AtomicBool,
    handles: Mutex<Vec<AbortHandle>>,
}

impl Helpers {
    /// Registers a helper, aborted at once if the task was already cancelled.
    pub(crate) fn register(&self, helper: AbortHandle) {
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_cancelled() {
            helper.abort();
        } else {
            handles.push(helper);
        }
    }

    /// Whether the task was given up on: it must not commit any more.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    fn cancel(&self) {
        let handles = {
            let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
            self.cancelled.store(true, Ordering::Release);
            std::mem::take(&mut *handles)
        };
        for helper in handles {
            helper.abort();
        }
    }
}

/// A task loop running on its own thread.
pub(crate) struct TaskThread {
    done: oneshot::Receiver<()>,
    cancel: Option<oneshot::Sender<()>>,
    helpers: Arc<Helpers>,
}

impl TaskThread {
    /// Runs `run` on a new thread named after the task, with the current runtime's handle. If the
    /// loop panics (a bug in the connector or the runtime), `panicked` gets the panic message.
    ///
    /// # Errors
    /// The thread could not be created (the OS refused).
    pub(crate) fn spawn(
        name: &str,
        helpers: Arc<Helpers>,
        run: impl Future<Output = ()> + Send + 'static,
        panicked: impl FnOnce(String) + Send + 'static,
    ) -> std::io::Result<Self> {
        let runtime = Handle::current();
        let (done_tx, done) = oneshot::channel();
        let (cancel, mut cancelled) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("ferry-task-{name}"))
            .spawn(move || {
                let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    runtime.block_on(async move {
                        tokio::select! {
                            biased;
                            // Only a sent cancel: a dropped handle (the worker dropped) lets the
                            // loop wind down by itself.
                            Ok(()) = &mut cancelled => {}
                            () = run => {}
                        }
                    });
                }));
                if let Err(panic) = ran {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic without a message".to_owned());
                    panicked(message);
                }
                drop(done_tx);
            })?;
        Ok(Self {
            done,
            cancel: Some(cancel),
            helpers,
        })
    }

    /// Waits until the loop has ended (or its thread died).
    pub(crate) async fn finished(&mut self) {
        let _ = (&mut self.done).await;
    }

    /// Gives up on the task: its helpers are aborted now, its loop is dropped at its next await.
    pub(crate) fn cancel(&mut self) {
        self.helpers.cancel();
        if let Some(cancel) = self.cancel.take() {
            let _ = cancel.send(());
        }
    }
}
