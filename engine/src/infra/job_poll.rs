//! A poll gate for apalis's Postgres backend.
//!
//! apalis-core 1.0's poll strategies (`PollWith`) only add wake-ups: they never hold a fetch
//! back, and the backend starts a new `apalis.get_jobs` on every wake of the worker's task.
//! Measured here with pg_stat_statements: an idle `herald worker` ran `get_jobs` about 370 times
//! a second (apalis#477 reports the same pattern on 0.6), a quarter of Postgres's time during a
//! campaign send. [`Gated`] lets the backend be polled again only after a pause once it has
//! nothing to hand out: a short one while the queue was busy a moment ago (the next batch
//! follows at once), the full interval once it is idle. New jobs are therefore picked up within
//! about two intervals; campaign work does not depend on that latency (the supervisor and the
//! delivery loops keep their own pace).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::{Backend, BackendConfig, WireFormatBackend};
use apalis_core::worker::context::WorkerContext;
use futures::{Sink, SinkExt};

/// Pause after an empty poll that followed a task (a batch may be in flight).
const BUSY_PAUSE: Duration = Duration::from_millis(5);

pub struct Gated<B> {
    backend: B,
    idle_pause: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The last poll handed out a task.
    busy: bool,
}

impl<B> Gated<B> {
    pub fn new(backend: B, idle_pause: Duration) -> Self {
        Self { backend, idle_pause, sleep: None, busy: false }
    }
}

impl<B: Backend> Backend for Gated<B> {
    type Task = B::Task;
    type Error = B::Error;

    fn poll_ready(&mut self, cx: &mut Context<'_>, worker: &WorkerContext) -> Poll<Result<(), Self::Error>> {
        self.backend.poll_ready(cx, worker)
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Option<Result<Self::Task, Self::Error>>> {
        if let Some(sleep) = self.sleep.as_mut() {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.sleep = None;
        }
        match self.backend.poll_next(cx, worker) {
            Poll::Ready(item) => {
                self.busy = true;
                Poll::Ready(item)
            }
            Poll::Pending => {
                let pause = if self.busy { BUSY_PAUSE } else { self.idle_pause };
                self.busy = false;
                let mut sleep = Box::pin(tokio::time::sleep(pause));
                // Registers this task's waker with the timer.
                let _ = sleep.as_mut().poll(cx);
                self.sleep = Some(sleep);
                Poll::Pending
            }
        }
    }

    fn poll_close(&mut self, cx: &mut Context<'_>, worker: &WorkerContext) -> Poll<Result<(), Self::Error>> {
        self.backend.poll_close(cx, worker)
    }
}

apalis_core::delegate_sink!(Gated<B>, backend);
apalis_core::delegate_codec!(Gated<B>, backend);
apalis_core::delegate_config!(Gated<B>, backend);
