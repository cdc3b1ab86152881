//! `DeliverySet` (the delivery watcher's set of pending deliveries) against
//! `futures_util::stream::FuturesUnordered`, the well-kept crate that does the same job.
//!
//! Each case pushes N tokio oneshot receivers (what the file sink's deliveries are) and polls the set
//! until all resolved, the way the watcher does: deliveries arrive in chunks of 1024, the set is polled
//! after each chunk. Resolution order: `ready` (sent before being pushed: resolved at the first poll),
//! `in_order` (all pushed, then resolved in push order, a poll per 1024), `random` (the same in a
//! shuffled order). `cargo bench -p ferry-runtime --bench deliveries`.

#![allow(missing_docs)] // A bench binary.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use futures_util::stream::{FuturesUnordered, Stream};
use tokio::sync::oneshot;

// The set itself, compiled into the bench: it is private to the runtime.
#[allow(dead_code, unused_imports, unreachable_pub)]
#[path = "../src/worker/deliveries.rs"]
mod deliveries;

use deliveries::DeliverySet;

const CHUNK: usize = 1024;

#[derive(Clone, Copy)]
enum Resolution {
    Ready,
    InOrder,
    Random,
}

impl Resolution {
    fn name(self) -> &'static str {
        match self {
            Resolution::Ready => "ready",
            Resolution::InOrder => "in_order",
            Resolution::Random => "random",
        }
    }
}

/// The order in which the senders complete (xorshift shuffle: no rand dependency).
fn completion_order(n: usize, order: Resolution) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..n).collect();
    if let Resolution::Random = order {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in (1..n).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let j = usize::try_from(state % (i as u64 + 1)).unwrap_or(0);
            indices.swap(i, j);
        }
    }
    indices
}

/// One way of awaiting a set of deliveries.
trait Set {
    fn push(&mut self, index: usize, receiver: oneshot::Receiver<u64>);
    /// Polls once; returns how many resolved.
    fn poll(&mut self, cx: &mut Context<'_>) -> usize;
}

struct Ours {
    set: DeliverySet<usize, oneshot::Receiver<u64>>,
    out: Vec<(usize, Result<u64, oneshot::error::RecvError>)>,
}

impl Set for Ours {
    fn push(&mut self, index: usize, receiver: oneshot::Receiver<u64>) {
        self.set.push(index, receiver);
    }
    fn poll(&mut self, cx: &mut Context<'_>) -> usize {
        self.set.poll_resolved(cx, &mut self.out);
        let n = self.out.len();
        self.out.clear();
        n
    }
}

/// A receiver with its index, as the watcher keeps the record with its delivery.
struct Tagged(usize, oneshot::Receiver<u64>);

impl Future for Tagged {
    type Output = (usize, Result<u64, oneshot::error::RecvError>);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let index = self.0;
        Pin::new(&mut self.1).poll(cx).map(|r| (index, r))
    }
}

struct Theirs(FuturesUnordered<Tagged>);

impl Set for Theirs {
    fn push(&mut self, index: usize, receiver: oneshot::Receiver<u64>) {
        self.0.push(Tagged(index, receiver));
    }
    fn poll(&mut self, cx: &mut Context<'_>) -> usize {
        let mut n = 0;
        while let Poll::Ready(Some(_)) = Pin::new(&mut self.0).poll_next(cx) {
            n += 1;
        }
        n
    }
}

fn run(set: &mut impl Set, n: usize, order: Resolution) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut senders: Vec<Option<oneshot::Sender<u64>>> = Vec::with_capacity(n);
    let mut resolved = 0;
    for start in (0..n).step_by(CHUNK) {
        for index in start..(start + CHUNK).min(n) {
            let (tx, rx) = oneshot::channel();
            if let Resolution::Ready = order {
                let _ = tx.send(index as u64);
                senders.push(None);
            } else {
                senders.push(Some(tx));
            }
            set.push(index, rx);
        }
        resolved += set.poll(&mut cx);
    }
    for (i, index) in completion_order(n, order).into_iter().enumerate() {
        if let Some(tx) = senders[index].take() {
            let _ = tx.send(index as u64);
        }
        if i % CHUNK == CHUNK - 1 {
            resolved += set.poll(&mut cx);
        }
    }
    resolved += set.poll(&mut cx);
    assert_eq!(resolved, n, "every delivery resolves");
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("deliveries");
    group.sample_size(20);
    for n in [10_000, 100_000] {
        for order in [Resolution::Ready, Resolution::InOrder, Resolution::Random] {
            let label = format!("{}/{n}", order.name());
            group.bench_function(BenchmarkId::new("DeliverySet", &label), |b| {
                b.iter(|| {
                    let mut set = Ours {
                        set: DeliverySet::new(),
                        out: Vec::new(),
                    };
                    run(&mut set, n, order);
                });
            });
            group.bench_function(BenchmarkId::new("FuturesUnordered", &label), |b| {
                b.iter(|| {
                    let mut set = Theirs(FuturesUnordered::new());
                    run(&mut set, n, order);
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
