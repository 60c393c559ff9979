//! A fair share of a process's delivery loops per workspace. A loop holds its SMTP connection
//! for as long as the server takes to answer, so one workspace whose own server is a tarpit (or
//! that simply starts many campaigns) could otherwise fill every delivery slot of the process
//! and stall every other workspace's mail. A delivery job that finds its workspace at its share
//! ends at once, freeing the job slot for another workspace; the campaign's other loops go on,
//! and the supervisor gives it more once the workspace is below its share again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::domain::TenantId;

#[derive(Debug, Default)]
pub struct WorkspaceLoops {
    /// Loops one workspace may run at once in this process; 0 is no limit.
    per_workspace: usize,
    running: Mutex<HashMap<TenantId, usize>>,
}

/// One running loop; dropping it gives the place back.
#[derive(Debug)]
pub struct LoopPermit {
    loops: Arc<WorkspaceLoops>,
    tenant: TenantId,
}

impl WorkspaceLoops {
    pub fn new(per_workspace: usize) -> Arc<Self> {
        Arc::new(Self { per_workspace, running: Mutex::default() })
    }

    pub fn unlimited() -> Arc<Self> {
        Self::new(0)
    }

    /// A place for one more loop of `tenant`, unless it runs its share already.
    pub fn try_take(self: &Arc<Self>, tenant: TenantId) -> Option<LoopPermit> {
        let mut running = self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let n = running.entry(tenant).or_default();
        if self.per_workspace > 0 && *n >= self.per_workspace {
            return None;
        }
        *n += 1;
        Some(LoopPermit { loops: self.clone(), tenant })
    }

    pub fn running(&self, tenant: TenantId) -> usize {
        self.running.lock().map(|r| r.get(&tenant).copied().unwrap_or(0)).unwrap_or(0)
    }
}

impl Drop for LoopPermit {
    fn drop(&mut self) {
        let mut running = self.loops.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(n) = running.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_gets_its_share_and_no_more_and_others_are_unaffected() {
        let loops = WorkspaceLoops::new(2);
        let (a, b) = (TenantId::new(), TenantId::new());
        let a1 = loops.try_take(a).expect("first");
        let _a2 = loops.try_take(a).expect("second");
        assert!(loops.try_take(a).is_none(), "a third loop of the same workspace waits");
        let _b1 = loops.try_take(b).expect("another workspace still gets a loop");
        drop(a1);
        assert_eq!(loops.running(a), 1);
        assert!(loops.try_take(a).is_some(), "a freed place is taken again");
        let unlimited = WorkspaceLoops::unlimited();
        let held: Vec<_> = (0..100).filter_map(|_| unlimited.try_take(a)).collect();
        assert_eq!(held.len(), 100);
    }
}
