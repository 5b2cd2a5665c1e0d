//! Staged rollouts (docs/rollouts.md): the [`Rollouts`] component — its operations
//! (`ops.rs`), the per-node driver that publishes their steps under a database lease,
//! evaluates their guards, rolls back and promotes (`driver.rs`), and the driver's wiring
//! (`state.rs`).

mod driver;
mod guards;
mod ops;
mod state;

pub use ops::{
    step_label, CohortProgress, NodeCohort, RolloutInput, RolloutOps, Rollouts, MAX_ACTIVE_ROLLOUTS,
};
pub use state::{DriverConfig, GuardProbe, ProbeFuture};
