//! The simulated deployment: the core's `ask` service and compactor over the
//! in-memory store (with DynamoDB's semantics and faults), the simulated model, the
//! built-in tools and the simulated queue, on one clock the simulation moves.
//!
//! Three tenants: `shop` (the built-in tools, facts under `name`), `plain` (no
//! tools), and `fragile` (as `shop`, but its configuration can be broken by hand).
//! Thresholds are small, so a few rounds make a step and a late step soon meets the
//! hard cap; sessions close after an hour and transcripts are kept a day, so TTL
//! has work within a few simulated days.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use degrau::compaction::{Compactor, Wiring};
use degrau::converse::Converse;
use degrau::domain::{ContactId, FactKey, TenantId};
use degrau::memory::{MemoryStore, Semantics};
use degrau::operate::Operate;
use degrau::plan::session::Clock;
use degrau::plan::step_plan::CompactionPolicy;
use degrau::records::Records;
use degrau::store::ContactKey;
use degrau::tenant::{Defaults, TenantConfig, TenantStore};

pub use crate::clock::{START, SimClock};
pub use crate::counts::Counts;
use crate::faults::{Faults, FaultyStore};
use crate::model::SimModel;
use crate::queue::SimQueue;
use crate::tools::SimTools;

/// Minutes of silence that close a session.
pub const IDLE_MINUTES: u64 = 60;
/// The tenant whose configuration can be broken.
pub const FRAGILE: &str = "fragile";
/// Most due heads a sweep reads per bucket here: few, so failing heads could
/// crowd the others out.
pub const SWEEP_LIMIT: usize = 2;

/// The tenants, in the order [`crate::Event::Reconfigure`] names them.
pub const TENANTS: [&str; 3] = ["shop", "plain", FRAGILE];

/// What an operator may change in a tenant's configuration while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Live {
    /// `transcript_retention_days`.
    pub retention_days: u32,
    /// `session_idle_minutes`.
    pub idle_minutes: u64,
    /// `compaction_threshold_tokens` (none: the deployment's).
    pub threshold: Option<u64>,
    /// Whether the built-in tools are on (`plain` starts without).
    pub tools: bool,
}

impl Live {
    /// A tenant's settings at the start.
    pub fn initial(tenant: &str) -> Live {
        Live {
            retention_days: 1,
            idle_minutes: IDLE_MINUTES,
            threshold: None,
            tools: tenant != "plain",
        }
    }

    /// Settings an operator might choose.
    pub fn drawn(rng: &mut fastrand::Rng) -> Live {
        Live {
            retention_days: rng.u32(1..=3),
            idle_minutes: [30, IDLE_MINUTES, MAX_IDLE_MINUTES][rng.usize(..3)],
            threshold: rng.bool().then(|| rng.u64(800..2_400)),
            tools: rng.bool(),
        }
    }
}

/// The longest idle timeout a tenant is given.
pub const MAX_IDLE_MINUTES: u64 = 120;
/// The deployment's fact retention, in days.
pub const FACT_RETENTION_DAYS: u32 = 2;

/// The tenant of contact `index`.
pub fn tenant_of(index: usize) -> &'static str {
    ["shop", "shop", "plain", "shop", "plain", FRAGILE, FRAGILE][index % 7]
}

/// The simulated deployment.
pub struct World {
    /// The simulation's clock.
    pub clock: Arc<SimClock>,
    /// What the world did, by kind of fault.
    pub counts: Arc<Counts>,
    /// The store, as the oracle reads it.
    pub memory: Arc<MemoryStore>,
    /// The store, as the services meet it.
    pub store: Arc<FaultyStore>,
    /// The model.
    pub model: Arc<SimModel>,
    /// The jobs queue.
    pub queue: Arc<SimQueue>,
    /// `ask`: the conversation service.
    pub ask: Converse,
    /// What is kept about a contact (erasure).
    pub records: Records,
    /// The operator's routes (fact writes).
    pub operate: Operate,
    /// The compactor.
    pub compactor: Compactor,
    /// The contacts, by index.
    pub contacts: Vec<ContactKey>,
    /// Whether the fragile tenant's configuration is broken now.
    pub broken: bool,
    /// The chance (in percent) that an operation dies at an await.
    pub crash_percent: AtomicU64,
    /// Each tenant's settings now, in the order of [`TENANTS`].
    pub live: [Live; 3],
}

/// The deployment's defaults here (see the module documentation).
pub fn defaults() -> Defaults {
    Defaults {
        compaction: CompactionPolicy {
            threshold_tokens: 1_200,
            keep_messages: 4,
            keep_tokens: 0,
            hard_limit_tokens: 3_000,
            prune_keep_turns: 2,
            prune_min_chars: 400,
            max_fold_tokens: 1_500,
            pause_fold: true,
            // Below the step's keep, so a long absence folds further.
            fold_keep_messages: 2,
        },
        session_idle_minutes: IDLE_MINUTES,
        transcript_retention_days: 1,
        fact_retention_days: FACT_RETENTION_DAYS,
        sweep_buckets: 1,
        sweep_limit_per_bucket: SWEEP_LIMIT,
        ..Defaults::default()
    }
}

/// A tenant's configuration from its live settings (`tools: []` when off), an
/// unusable retention when `broken`.
pub fn config(live: &Live, broken: bool) -> TenantConfig {
    let tools = (!live.tools).then(|| {
        serde_json::from_value(serde_json::json!([])).expect("an empty tool list is valid")
    });
    TenantConfig {
        allowed_fact_keys: Some(vec![FactKey::parse("name").expect("a valid key")]),
        tools,
        session_idle_minutes: Some(live.idle_minutes),
        transcript_retention_days: Some(if broken { 0 } else { live.retention_days }),
        compaction_threshold_tokens: live.threshold,
        ..TenantConfig::default()
    }
}

/// The in-memory store as DynamoDB behaves (a lagging index, torn reads, an
/// erase in passes, calls that take time), each
/// tenant's first configuration stored.
async fn seeded_memory() -> Arc<MemoryStore> {
    let memory = Arc::new(MemoryStore::new());
    memory.set_semantics(Semantics {
        index_lag: true,
        torn: true,
        erase_passes: true,
        call_latency: true,
    });
    for tenant in TENANTS {
        memory
            .put_tenant_config(&tenant_id(tenant), &config(&Live::initial(tenant), false))
            .await
            .expect("the in-memory store takes a config");
    }
    memory
}

impl World {
    /// A deployment whose model has a context window of `window` tokens.
    pub async fn new(window: u64, contacts: usize) -> World {
        let clock = Arc::new(SimClock::new());
        let counts = Arc::new(Counts::default());
        let now = clock.clone();
        let service_clock: Clock = Arc::new(move || now.now());
        let memory = seeded_memory().await;
        let store = Arc::new(FaultyStore::new(
            memory.clone(),
            Faults::new(memory.clone(), counts.clone()),
        ));
        let model = Arc::new(SimModel::new(window, counts.clone()));
        let queue = Arc::new(SimQueue::new(clock.clone()));
        let defaults = defaults();
        let ask = Converse {
            store: store.clone(),
            records: store.clone(),
            recall: store.clone(),
            usage: store.clone(),
            tenants: store.clone(),
            model: model.clone(),
            tools: Arc::new(SimTools::new(model.clone())),
            jobs: queue.clone(),
            defaults: defaults.clone(),
            quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
            clock: service_clock.clone(),
        };
        let records = Records::on(store.clone(), defaults.clone(), service_clock.clone());
        let operate = Operate::on(store.clone(), defaults.clone(), service_clock.clone());
        let compactor = Compactor::on(
            store.clone(),
            Wiring {
                tenants: store.clone(),
                model: model.clone(),
                defaults,
                clock: service_clock,
                jobs: queue.clone(),
                events: Arc::new(degrau::events::NoEvents),
            },
        );
        let contacts = (0..contacts)
            .map(|index| ContactKey {
                tenant: tenant_id(tenant_of(index)),
                contact: ContactId::parse(&format!("c{index}")).expect("a valid contact id"),
            })
            .collect();
        World {
            clock,
            counts,
            memory,
            store,
            model,
            queue,
            ask,
            records,
            operate,
            compactor,
            contacts,
            broken: false,
            crash_percent: AtomicU64::new(0),
            live: TENANTS.map(Live::initial),
        }
    }

    /// Now, on the simulation's clock.
    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Moves the clock on.
    pub fn advance(&self, seconds: i64) {
        self.clock.advance(seconds);
    }

    /// Breaks the fragile tenant's configuration (written by hand), or fixes it.
    pub async fn break_tenant(&mut self, broken: bool) {
        self.broken = broken;
        self.write_config(FRAGILE).await;
    }

    /// An operator gives `tenant` new settings.
    pub async fn reconfigure(&mut self, tenant: usize, settings: Live) {
        let Some(&name) = TENANTS.get(tenant) else {
            return;
        };
        self.live[tenant] = settings;
        Counts::bump(&self.counts.config_changes);
        self.write_config(name).await;
    }

    async fn write_config(&self, tenant: &str) {
        let index = TENANTS.iter().position(|t| *t == tenant).unwrap_or(0);
        let broken = self.broken && tenant == FRAGILE;
        self.memory
            .put_tenant_config(&tenant_id(tenant), &config(&self.live[index], broken))
            .await
            .expect("the in-memory store takes a config");
    }

    /// Faults on all three (rates in percent), or off.
    pub fn set_faults(&self, model: u8, store: u8, queue: u8) {
        self.model.set_faults(f64::from(model) / 100.0);
        self.store.hook.set_faults(f64::from(store) / 100.0);
        self.queue.set_faults(f64::from(queue) / 100.0);
    }

    /// The chance (in percent) that an operation's process dies at one of its
    /// awaits (0: none).
    pub fn set_crashes(&self, percent: u8) {
        self.crash_percent
            .store(u64::from(percent), Ordering::Relaxed);
    }

    /// The idle timeout of contact `index`'s tenant now, in seconds.
    pub fn idle_seconds(&self, index: usize) -> i64 {
        let tenant = TENANTS
            .iter()
            .position(|t| *t == tenant_of(index))
            .unwrap_or(0);
        self.live[tenant].idle_minutes as i64 * 60
    }

    /// The retention contact `index`'s tenant has now: its transcripts' after
    /// the session's last activity (the idle timeout on top), and its facts'.
    pub fn retention(&self, index: usize) -> crate::oracle::Retention {
        let tenant = TENANTS
            .iter()
            .position(|t| *t == tenant_of(index))
            .unwrap_or(0);
        let live = &self.live[tenant];
        crate::oracle::Retention {
            longest: i64::from(live.retention_days) * 86_400 + live.idle_minutes as i64 * 60,
            facts: i64::from(FACT_RETENTION_DAYS) * 86_400,
        }
    }

    /// Whether contact `index` belongs to a tenant whose configuration is broken.
    pub fn unusable(&self, index: usize) -> bool {
        self.broken && tenant_of(index) == FRAGILE
    }
}

/// A tenant id.
pub fn tenant_id(tenant: &str) -> TenantId {
    TenantId::parse(tenant).expect("a valid tenant id")
}
