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
use std::sync::atomic::{AtomicI64, Ordering};

use degrau::ask::AskService;
use degrau::compactor::Compactor;
use degrau::domain::{ContactId, FactKey, TenantId};
use degrau::memory::{MemoryStore, Semantics};
use degrau::session::Clock;
use degrau::step_plan::CompactionPolicy;
use degrau::store::ContactKey;
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::ToolDispatch;

use crate::faults::{Faults, FaultyStore};
use crate::model::SimModel;
use crate::queue::SimQueue;

/// When every simulation starts (seconds since the epoch, in 2027).
pub const START: i64 = 1_800_000_000;
/// Minutes of silence that close a session.
pub const IDLE_MINUTES: u64 = 60;
/// The tenant whose configuration can be broken.
pub const FRAGILE: &str = "fragile";
/// Most due heads a sweep reads per bucket here: few, so failing heads could
/// crowd the others out.
pub const SWEEP_LIMIT: usize = 2;

/// The tenant of contact `index`.
pub fn tenant_of(index: usize) -> &'static str {
    ["shop", "shop", "plain", "shop", "plain", FRAGILE, FRAGILE][index % 7]
}

/// The simulated deployment.
pub struct World {
    /// The simulation's clock (seconds since the epoch).
    pub clock: Arc<AtomicI64>,
    /// The store, as the oracle reads it.
    pub memory: Arc<MemoryStore>,
    /// The store, as the services meet it.
    pub store: Arc<FaultyStore>,
    /// The model.
    pub model: Arc<SimModel>,
    /// The jobs queue.
    pub queue: Arc<SimQueue>,
    /// `ask`.
    pub ask: AskService,
    /// The compactor.
    pub compactor: Compactor,
    /// The contacts, by index.
    pub contacts: Vec<ContactKey>,
    /// Whether the fragile tenant's configuration is broken now.
    pub broken: bool,
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
        fact_retention_days: 2,
        sweep_buckets: 1,
        sweep_limit_per_bucket: SWEEP_LIMIT,
        ..Defaults::default()
    }
}

/// A tenant's configuration; `tools: []` for `plain`, an unusable retention when
/// `broken`.
pub fn config(tenant: &str, broken: bool) -> TenantConfig {
    let tools = (tenant == "plain").then(|| {
        serde_json::from_value(serde_json::json!([])).expect("an empty tool list is valid")
    });
    TenantConfig {
        allowed_fact_keys: Some(vec![FactKey::parse("name").expect("a valid key")]),
        tools,
        session_idle_minutes: Some(IDLE_MINUTES),
        transcript_retention_days: Some(if broken { 0 } else { 1 }),
        ..TenantConfig::default()
    }
}

impl World {
    /// A deployment whose model has a context window of `window` tokens.
    pub async fn new(window: u64, contacts: usize) -> World {
        let clock = Arc::new(AtomicI64::new(START));
        let now = clock.clone();
        let service_clock: Clock = Arc::new(move || now.load(Ordering::SeqCst));
        let memory = Arc::new(MemoryStore::new());
        memory.set_semantics(Semantics {
            index_lag: true,
            torn: true,
        });
        for tenant in ["shop", "plain", FRAGILE] {
            memory
                .put_tenant_config(&tenant_id(tenant), &config(tenant, false))
                .await
                .expect("the in-memory store takes a config");
        }
        let store = Arc::new(FaultyStore::new(memory.clone(), Faults::default()));
        let model = Arc::new(SimModel::new(window));
        let queue = Arc::new(SimQueue::new(clock.clone()));
        let defaults = defaults();
        let ask = AskService {
            store: store.clone(),
            tenants: store.clone(),
            model: model.clone(),
            tools: Arc::new(ToolDispatch::built_in_only()),
            jobs: queue.clone(),
            defaults: defaults.clone(),
            quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
            clock: service_clock.clone(),
        };
        let compactor = Compactor {
            store: store.clone(),
            tenants: store.clone(),
            model: model.clone(),
            defaults,
            clock: service_clock,
            jobs: queue.clone(),
        };
        let contacts = (0..contacts)
            .map(|index| ContactKey {
                tenant: tenant_id(tenant_of(index)),
                contact: ContactId::parse(&format!("c{index}")).expect("a valid contact id"),
            })
            .collect();
        World {
            clock,
            memory,
            store,
            model,
            queue,
            ask,
            compactor,
            contacts,
            broken: false,
        }
    }

    /// Now, on the simulation's clock.
    pub fn now(&self) -> i64 {
        self.clock.load(Ordering::SeqCst)
    }

    /// Moves the clock on.
    pub fn advance(&self, seconds: i64) {
        self.clock.fetch_add(seconds, Ordering::SeqCst);
    }

    /// Breaks the fragile tenant's configuration (written by hand), or fixes it.
    pub async fn break_tenant(&mut self, broken: bool) {
        self.broken = broken;
        self.memory
            .put_tenant_config(&tenant_id(FRAGILE), &config(FRAGILE, broken))
            .await
            .expect("the in-memory store takes a config");
    }

    /// Faults on all three (rates in percent), or off.
    pub fn set_faults(&self, model: u8, store: u8, queue: u8) {
        self.model.set_faults(f64::from(model) / 100.0);
        self.store.hook.set_faults(f64::from(store) / 100.0);
        self.queue.set_faults(f64::from(queue) / 100.0);
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
