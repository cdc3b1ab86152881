//! A simulated cooperative group coordinator. Each rebalance revokes first (every member's
//! `revoked` returns before any slot moves) and assigns in a second round, as cooperative-sticky
//! does; members keep what they hold up to their share. A crashed member vanishes: its slots are
//! reassigned without a revoke. A lost member is told `lost` before its slots are reassigned (the
//! model's assumption: a session that expired is noticed by the member before the group moves its
//! slots — the timing race between the two is outside this model). A double assignment (a broker's
//! coordinator giving a slot to a second member without revoking it from its owner, as tansu 0.6
//! can) is injected with [`Coordinator::double_assign`] and ended with [`Coordinator::take_back`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_plugin::{GroupError, GroupHandler, Slot, WorkerGroup};
use ferry_runtime::TaskId;

use super::lock;

struct Member {
    handler: Arc<dyn GroupHandler>,
    url: String,
    owned: BTreeSet<Slot>,
    /// Slots this member was given (`assigned`) while the group's view keeps them at another member:
    /// an injected double assignment. Not counted by the assignor; revoked with the member's others.
    doubled: BTreeSet<Slot>,
    /// Out of the group (session expired) until it rejoins.
    expired: bool,
}

#[derive(Default)]
struct State {
    /// By member id, in join order.
    members: BTreeMap<usize, Member>,
    connectors: BTreeMap<String, usize>,
}

/// The coordinator shared by every member.
#[derive(Default)]
pub struct Coordinator {
    state: Mutex<State>,
    /// One rebalance at a time.
    rebalancing: tokio::sync::Mutex<()>,
    /// Rebalances done.
    pub rebalances: std::sync::atomic::AtomicUsize,
    /// `add_connector` calls still to fail (retriable), as a broker that does not answer.
    pub failing_adds: std::sync::atomic::AtomicUsize,
}

/// A handler call, on a plain thread as the real group makes it.
async fn call(
    handler: &Arc<dyn GroupHandler>,
    f: fn(&dyn GroupHandler, &[Slot]),
    slots: Vec<Slot>,
) {
    if slots.is_empty() {
        return;
    }
    let handler = handler.clone();
    tokio::task::spawn_blocking(move || f(handler.as_ref(), &slots))
        .await
        .expect("handler call");
}

impl Coordinator {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Adds member `id` (with its handler and REST URL) and rebalances.
    pub async fn join(
        self: &Arc<Self>,
        id: usize,
        url: &str,
        handler: Arc<dyn GroupHandler>,
    ) -> FakeGroup {
        let _one = self.rebalancing.lock().await;
        lock(&self.state).members.insert(
            id,
            Member {
                handler,
                url: url.to_owned(),
                owned: BTreeSet::new(),
                doubled: BTreeSet::new(),
                expired: false,
            },
        );
        self.rebalance().await;
        FakeGroup {
            coordinator: self.clone(),
            id,
        }
    }

    /// Member `id`'s process dies (SIGKILL): its tasks end at once without committing — modelled by
    /// aborting them through `lost`, the only way to end a task in-process without a final commit —
    /// and it vanishes from the group without a revoke; its slots go to the others.
    pub async fn crash(&self, id: usize) {
        let _one = self.rebalancing.lock().await;
        // A dead process is told nothing (its tasks died with it: the caller aborts them first).
        lock(&self.state).members.remove(&id);
        self.rebalance().await;
    }

    /// Member `id`'s session expires: it is told `lost`, its slots go to the others; it stays out
    /// until [`Coordinator::rejoin`].
    pub async fn lose(&self, id: usize) {
        let _one = self.rebalancing.lock().await;
        let (handler, slots) = {
            let mut state = lock(&self.state);
            let Some(member) = state.members.get_mut(&id) else {
                return;
            };
            member.expired = true;
            let mut slots: Vec<Slot> = std::mem::take(&mut member.owned).into_iter().collect();
            slots.extend(std::mem::take(&mut member.doubled));
            (member.handler.clone(), slots)
        };
        call(&handler, |h, s| h.lost(s), slots).await;
        self.rebalance().await;
    }

    /// A lost member comes back.
    pub async fn rejoin(&self, id: usize) {
        let _one = self.rebalancing.lock().await;
        if let Some(member) = lock(&self.state).members.get_mut(&id) {
            member.expired = false;
        }
        self.rebalance().await;
    }

    /// The slots member `id` holds.
    pub fn owned(&self, id: usize) -> BTreeSet<Slot> {
        lock(&self.state)
            .members
            .get(&id)
            .map(|m| m.owned.clone())
            .unwrap_or_default()
    }

    /// Gives `slot` to member `id` (its handler's `assigned`) without revoking it from the member
    /// holding it: the group's view does not change, as with a coordinator that assigned from stale
    /// subscriptions. The slot stays doubled until [`Coordinator::take_back`], until the group gives
    /// it to `id` for real (no second `assigned`), or until `id` leaves, crashes or is lost.
    pub async fn double_assign(&self, id: usize, slot: Slot) {
        let _one = self.rebalancing.lock().await;
        let handler = {
            let mut state = lock(&self.state);
            let member = state.members.get_mut(&id).expect("a member");
            assert!(
                !member.owned.contains(&slot) && member.doubled.insert(slot.clone()),
                "member {id} holds {slot:?} already"
            );
            member.handler.clone()
        };
        call(&handler, |h, s| h.assigned(s), vec![slot]).await;
    }

    /// Ends a double assignment: `slot` is revoked from member `id` (its handler's `revoked`); the
    /// member the group's view gives it to keeps it.
    pub async fn take_back(&self, id: usize, slot: Slot) {
        let _one = self.rebalancing.lock().await;
        let handler = {
            let mut state = lock(&self.state);
            let member = state.members.get_mut(&id).expect("a member");
            assert!(
                member.doubled.remove(&slot),
                "{slot:?} is not doubled at member {id}"
            );
            member.handler.clone()
        };
        call(&handler, |h, s| h.revoked(s), vec![slot]).await;
    }

    /// Revokes what moves (all revocations return first), then assigns it.
    async fn rebalance(&self) {
        self.rebalances
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (revokes, target) = {
            let state = lock(&self.state);
            let target = assignment(&state);
            let revokes: Vec<(Arc<dyn GroupHandler>, Vec<Slot>)> = state
                .members
                .iter()
                .map(|(id, m)| {
                    let keep = target.get(id).cloned().unwrap_or_default();
                    (
                        m.handler.clone(),
                        m.owned.difference(&keep).cloned().collect(),
                    )
                })
                .collect();
            (revokes, target)
        };
        for (handler, slots) in revokes {
            call(&handler, |h, s| h.revoked(s), slots).await;
        }
        let assigns: Vec<(Arc<dyn GroupHandler>, Vec<Slot>)> = {
            let mut state = lock(&self.state);
            let mut assigns = Vec::new();
            for (id, member) in &mut state.members {
                let want = target.get(id).cloned().unwrap_or_default();
                // A doubled slot the group now gives this member was assigned to it already.
                let new: Vec<Slot> = want
                    .iter()
                    .filter(|s| !member.owned.contains(*s) && !member.doubled.remove(*s))
                    .cloned()
                    .collect();
                member.owned = want;
                assigns.push((member.handler.clone(), new));
            }
            assigns
        };
        for (handler, slots) in assigns {
            call(&handler, |h, s| h.assigned(s), slots).await;
        }
    }
}

/// Sticky and balanced: each member keeps what it holds up to its share; the rest goes to the least
/// loaded members.
fn assignment(state: &State) -> BTreeMap<usize, BTreeSet<Slot>> {
    let mut slots = vec![Slot::Leader];
    for (connector, count) in &state.connectors {
        slots.extend((0..*count).map(|task| Slot::Task(TaskId::new(connector.as_str(), task))));
    }
    let live: Vec<usize> = state
        .members
        .iter()
        .filter(|(_, m)| !m.expired)
        .map(|(id, _)| *id)
        .collect();
    let mut target: BTreeMap<usize, BTreeSet<Slot>> = BTreeMap::new();
    if live.is_empty() {
        return target;
    }
    let share = slots.len().div_ceil(live.len());
    let all: BTreeSet<Slot> = slots.iter().cloned().collect();
    let mut taken = BTreeSet::new();
    for id in &live {
        let kept: BTreeSet<Slot> = state.members[id]
            .owned
            .intersection(&all)
            .take(share)
            .cloned()
            .collect();
        taken.extend(kept.iter().cloned());
        target.insert(*id, kept);
    }
    for slot in slots {
        if taken.contains(&slot) {
            continue;
        }
        let least = live
            .iter()
            .min_by_key(|id| target[*id].len())
            .copied()
            .expect("a live member");
        target.entry(least).or_default().insert(slot);
    }
    target
}

/// One member's view of the group.
pub struct FakeGroup {
    coordinator: Arc<Coordinator>,
    id: usize,
}

#[ferry_api::async_trait]
impl WorkerGroup for FakeGroup {
    fn describe(&self) -> String {
        format!("the simulated group (member {})", self.id)
    }

    async fn add_connector(&self, connector: &str, slots: usize) -> Result<(), GroupError> {
        let failing = &self.coordinator.failing_adds;
        let failed = failing
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |n| n.checked_sub(1),
            )
            .is_ok();
        if failed {
            return Err(GroupError::new(
                "the broker did not answer (injected)",
                true,
            ));
        }
        let _one = self.coordinator.rebalancing.lock().await;
        let changed = lock(&self.coordinator.state)
            .connectors
            .insert(connector.to_owned(), slots)
            != Some(slots);
        if changed {
            self.coordinator.rebalance().await;
        }
        Ok(())
    }

    async fn remove_connector(&self, connector: &str) -> Result<(), GroupError> {
        let _one = self.coordinator.rebalancing.lock().await;
        let changed = lock(&self.coordinator.state)
            .connectors
            .remove(connector)
            .is_some();
        if changed {
            self.coordinator.rebalance().await;
        }
        Ok(())
    }

    async fn leader_url(&self) -> Result<Option<String>, GroupError> {
        let state = lock(&self.coordinator.state);
        Ok(state
            .members
            .values()
            .find(|m| m.owned.contains(&Slot::Leader))
            .map(|m| m.url.clone()))
    }

    async fn leave(&self, _timeout: Duration) -> Result<(), GroupError> {
        let _one = self.coordinator.rebalancing.lock().await;
        let member = lock(&self.coordinator.state).members.remove(&self.id);
        let Some(member) = member else {
            return Ok(());
        };
        call(
            &member.handler,
            |h, s| h.revoked(s),
            member.owned.union(&member.doubled).cloned().collect(),
        )
        .await;
        self.coordinator.rebalance().await;
        Ok(())
    }
}
