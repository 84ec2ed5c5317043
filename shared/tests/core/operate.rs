//! The operator routes' service: facts an operator sets (and what the next
//! extraction may do to them), the tenant configuration's versions and checks, a
//! stored configuration that no longer reads, the usage counts, the contact listing.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use degrau::compaction::{Compactor, JobOutcome, RECORD_FACTS_TOOL};
use degrau::converse::{AskError, Converse};
use degrau::domain::{FactKey, TenantId};
use degrau::jobs::{Job, NoJobs};
use degrau::memory::MemoryStore;
use degrau::metering::DAY;
use degrau::model::scripted::ScriptedModel;
use degrau::store::{ContactKey, FactExpectation, FactWrite, JobStore, RecordStore, StoreError};
use degrau::tenant::{Defaults, TenantStore};
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{
    RecordingJobs, START, ask_service, compactor, contact_key, key, minute, operate_of, records_of,
    test_clock,
};

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    clock: Arc<AtomicI64>,
    ask: Converse,
    compactor: Compactor,
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let (clock, now) = test_clock();
    Harness {
        ask: ask_service(
            &store,
            model.clone(),
            Arc::new(ToolDispatch::built_in_only()),
            Arc::new(NoJobs),
            Defaults::default(),
            now.clone(),
        ),
        compactor: compactor(
            &store,
            model.clone(),
            Arc::new(RecordingJobs::default()),
            Defaults::default(),
            now,
        ),
        store,
        model,
        clock,
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 100,
        cache_creation_input_tokens: 40,
        cache_read_input_tokens: 300,
        output_tokens: 20,
        cache_creation: None,
    }
}

fn name() -> FactKey {
    FactKey::parse("name").unwrap()
}

async fn say(h: &Harness, key: &ContactKey, text: &str) {
    h.model.push(ScriptedModel::text("Noted.", usage()));
    h.ask.ask(key, text, None, minute()).await.unwrap();
}

/// A facts job for the closed `session`, the model proposing `facts`.
async fn extract(h: &Harness, session: u32, facts: serde_json::Value) -> JobOutcome {
    h.model.push(ScriptedModel::tool_call(
        "facts",
        RECORD_FACTS_TOOL,
        json!({ "facts": facts, "remove": [] }),
        usage(),
    ));
    let (head, _) = h
        .store
        .load_memory(&key(), h.clock.load(Ordering::SeqCst))
        .await
        .unwrap();
    let job = Job::Facts {
        tenant: key().tenant,
        incarnation: head.unwrap().incarnation.unwrap(),
        session,
    };
    h.compactor.run(&job, minute()).await.unwrap()
}

/// The last request's contact context (the second system block).
fn last_context(h: &Harness) -> String {
    let request = h.model.requests().pop().unwrap();
    serde_json::to_string(&request.system).unwrap()
}

#[tokio::test]
async fn an_operators_correction_reaches_the_next_request_and_outlives_older_proposals() {
    let h = harness();
    say(&h, &key(), "Hi, I'm Rira.").await; // seq 1-2
    let record = operate_of(&h.ask, &h.store)
        .set_fact(&key(), &name(), "Rita", "ops-7")
        .await
        .unwrap();
    assert_eq!(record.fact.operator.as_deref(), Some("ops-7"));
    assert_eq!((record.fact.source.session, record.fact.source.seq), (1, 2));
    assert_eq!(record.expires_at, Some(START + 365 * DAY));

    say(&h, &key(), "Can I book tomorrow?").await; // seq 3-4
    assert!(last_context(&h).contains("Rita"), "{}", last_context(&h));

    // The session closes; its extraction reads "Rira" from message 1, before the
    // correction: the operator's value stays.
    h.clock.fetch_add(DAY + 1, Ordering::SeqCst);
    say(&h, &key(), "Hello again").await;
    let outcome = extract(&h, 1, json!([{"key": "name", "value": "Rira", "seq": 1}])).await;
    assert_eq!(
        outcome,
        JobOutcome::FactsStored {
            stored: 0,
            refused: 0,
            removed: 0
        }
    );
    let facts = operate_of(&h.ask, &h.store).facts(&key()).await.unwrap();
    assert_eq!(facts[0].fact.value, "Rita");

    // A later message that says otherwise replaces it, and the history keeps it.
    say(&h, &key(), "Actually it's Rita Souza, full name.").await; // session 2, seq 3
    h.clock.fetch_add(DAY + 1, Ordering::SeqCst);
    say(&h, &key(), "Hi").await;
    let outcome = extract(
        &h,
        2,
        json!([{"key": "name", "value": "Rita Souza", "seq": 3}]),
    )
    .await;
    assert_eq!(
        outcome,
        JobOutcome::FactsStored {
            stored: 1,
            refused: 0,
            removed: 0
        }
    );
    let facts = operate_of(&h.ask, &h.store).facts(&key()).await.unwrap();
    let fact = &facts[0].fact;
    assert_eq!(
        (fact.value.as_str(), fact.operator.as_deref()),
        ("Rita Souza", None)
    );
    let history: Vec<_> = fact
        .history
        .iter()
        .map(|r| (r.value.as_str(), r.operator.as_deref()))
        .collect();
    assert_eq!(history, vec![("Rita", Some("ops-7"))]);
}

#[tokio::test]
async fn an_operators_value_goes_through_the_fact_policy_and_a_refusal_never_quotes_it() {
    let h = harness();
    say(&h, &key(), "Hi").await;
    for (fact, value, rule) in [
        ("name", "CPF 529.982.247-25", "cpf"),
        ("name", "4111 1111 1111 1111", "card_number"),
        ("name", "has diabetes", "health_data"),
        ("name", "two\nlines", "control_characters"),
        ("favorite_color", "blue", "key_not_allowed"),
    ] {
        let key_ = FactKey::parse(fact).unwrap();
        let Err(AskError::InvalidRequest(message)) = operate_of(&h.ask, &h.store)
            .set_fact(&key(), &key_, value, "ops")
            .await
        else {
            panic!("{value:?} must be refused");
        };
        assert!(message.contains(rule), "{message}");
        assert!(
            !message.contains("529") && !message.contains("4111") && !message.contains("diabetes"),
            "{message}"
        );
    }
    assert!(
        operate_of(&h.ask, &h.store)
            .facts(&key())
            .await
            .unwrap()
            .is_empty(),
        "nothing stored"
    );
    // A contact degrau knows nothing about gets a 404, not a fact.
    let stranger = contact_key("acme", "nobody");
    assert!(matches!(
        operate_of(&h.ask, &h.store)
            .set_fact(&stranger, &name(), "Ana", "ops")
            .await,
        Err(AskError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_deleted_fact_is_gone_with_its_history_and_a_second_delete_is_not_found() {
    let h = harness();
    say(&h, &key(), "Hi").await;
    operate_of(&h.ask, &h.store)
        .set_fact(&key(), &name(), "Ana", "ops")
        .await
        .unwrap();
    h.clock.fetch_add(10, Ordering::SeqCst);
    let record = operate_of(&h.ask, &h.store)
        .set_fact(&key(), &name(), "Ana Lima", "ops")
        .await
        .unwrap();
    assert_eq!(record.fact.history.len(), 1);
    operate_of(&h.ask, &h.store)
        .delete_fact(&key(), &name())
        .await
        .unwrap();
    assert!(
        operate_of(&h.ask, &h.store)
            .facts(&key())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        operate_of(&h.ask, &h.store)
            .delete_fact(&key(), &name())
            .await,
        Err(AskError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_fact_write_that_expects_what_is_no_longer_stored_conflicts_and_writes_nothing() {
    let h = harness();
    say(&h, &key(), "Hi").await;
    let first = operate_of(&h.ask, &h.store)
        .set_fact(&key(), &name(), "Ana", "ops")
        .await
        .unwrap();
    h.clock.fetch_add(5, Ordering::SeqCst);
    operate_of(&h.ask, &h.store)
        .set_fact(&key(), &name(), "Ana Lima", "ops")
        .await
        .unwrap();
    // An extraction that read "Ana" before the second correction.
    let (head, _) = h.store.load_memory(&key(), START + 5).await.unwrap();
    let stale = FactWrite {
        fact: degrau::domain::Fact::extracted(name(), "Anna".into(), first.fact.source, START + 6),
        expires_at: START + DAY,
        expect: FactExpectation::UpdatedAt(first.fact.updated_at),
    };
    let result = h
        .store
        .save_facts(&key(), &head.unwrap().incarnation.unwrap(), &[stale], &[])
        .await;
    assert!(matches!(result, Err(StoreError::Conflict(_))), "{result:?}");
    assert_eq!(
        operate_of(&h.ask, &h.store).facts(&key()).await.unwrap()[0]
            .fact
            .value,
        "Ana Lima"
    );
}

#[tokio::test]
async fn a_stored_config_that_no_longer_reads_answers_its_own_error_until_it_is_replaced() {
    let h = harness();
    let tenant = key().tenant;
    h.store
        .put_config_text(&tenant, r#"{"session_idle_minutes": "soon"}"#);
    h.model.push(ScriptedModel::text("never sent", usage()));
    let error = h.ask.ask(&key(), "Hi", None, minute()).await.unwrap_err();
    let AskError::TenantConfig(reason) = &error else {
        panic!("{error:?}")
    };
    assert!(
        reason.starts_with("session_idle_minutes: invalid type"),
        "{reason}"
    );
    assert!(h.model.requests().is_empty(), "no model call");
    let state = operate_of(&h.ask, &h.store)
        .config_state(&tenant)
        .await
        .unwrap();
    assert_eq!(state.version(), 1);
    assert!(state.problem.is_some());
    // The operator fixes it from the version they read.
    let fixed = operate_of(&h.ask, &h.store)
        .replace_config(&tenant, r#"{"session_idle_minutes": 30}"#, 1)
        .await
        .unwrap();
    assert_eq!((fixed.version(), fixed.problem), (2, None));
    h.ask.ask(&key(), "Hi", None, minute()).await.unwrap();
}

#[tokio::test]
async fn a_config_change_is_checked_in_full_and_only_lands_on_the_version_it_was_read_at() {
    let h = harness();
    let tenant = key().tenant;
    for (text, names) in [
        (r#"{"session_idle_minutes": 60, "colour": "red"}"#, "colour"),
        (
            r#"{"transcript_retention_days": 0}"#,
            "transcript_retention_days",
        ),
        (r#"{"tools": ["no_such_tool"]}"#, "tools[0]"),
        (r#"{"cache_ttl": "2h"}"#, "cache_ttl"),
    ] {
        let Err(AskError::InvalidRequest(message)) = operate_of(&h.ask, &h.store)
            .replace_config(&tenant, text, 0)
            .await
        else {
            panic!("{text} must be refused");
        };
        assert!(message.contains(names), "{text}: {message}");
    }
    assert_eq!(
        operate_of(&h.ask, &h.store)
            .config_state(&tenant)
            .await
            .unwrap()
            .stored,
        None,
        "nothing stored"
    );

    let first = operate_of(&h.ask, &h.store)
        .replace_config(&tenant, r#"{"model": "a"}"#, 0)
        .await
        .unwrap();
    assert_eq!(first.version(), 1);
    // Two operators read version 1; the second to write is refused.
    operate_of(&h.ask, &h.store)
        .replace_config(&tenant, r#"{"model": "b"}"#, 1)
        .await
        .unwrap();
    let lost = operate_of(&h.ask, &h.store)
        .replace_config(&tenant, r#"{"model": "c"}"#, 1)
        .await;
    assert!(
        matches!(lost, Err(AskError::PreconditionFailed(_))),
        "{lost:?}"
    );
    let config = h.store.tenant_config(&tenant).await.unwrap().unwrap();
    assert_eq!(config.model.as_deref(), Some("b"));
}

#[tokio::test]
async fn usage_is_counted_per_day_by_model_and_kind() {
    let h = harness();
    let tenant = key().tenant;
    say(&h, &key(), "Hi").await;
    say(&h, &key(), "Book me at 10").await;
    h.clock.fetch_add(DAY + 1, Ordering::SeqCst);
    say(&h, &key(), "Hello again").await;
    extract(&h, 1, json!([{"key": "name", "value": "Ana", "seq": 1}])).await;
    let today = h.clock.load(Ordering::SeqCst).div_euclid(DAY);
    let days = operate_of(&h.ask, &h.store)
        .usage(&tenant, today - 1, today)
        .await
        .unwrap();
    let summary: Vec<_> = days
        .iter()
        .map(|d| (d.rounds, d.model_calls, d.facts_calls, d.summary_calls))
        .collect();
    assert_eq!(summary, vec![(2, 2, 0, 0), (1, 1, 1, 0)]);
    let first = &days[0];
    let model = &first.tokens[0];
    assert_eq!(model.model, Defaults::default().model);
    assert_eq!(
        (
            model.input,
            model.cache_write_5m,
            model.cache_read,
            model.output
        ),
        (200, 80, 600, 40)
    );
    assert_eq!(first.cost_usd, None, "no price table");
    // The facts call counts under the summary model.
    assert!(
        days[1]
            .tokens
            .iter()
            .any(|t| t.model == Defaults::default().summary_model)
    );
    assert!(matches!(
        operate_of(&h.ask, &h.store)
            .usage(&tenant, today, today - 1)
            .await,
        Err(AskError::InvalidRequest(_))
    ));
    assert!(matches!(
        operate_of(&h.ask, &h.store)
            .usage(&tenant, today - 92, today)
            .await,
        Err(AskError::InvalidRequest(_))
    ));
    // Another tenant's counts are its own.
    let other = TenantId::parse("other").unwrap();
    assert!(
        operate_of(&h.ask, &h.store)
            .usage(&other, today - 1, today)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn contacts_are_listed_newest_first_in_pages_and_an_erased_one_is_gone() {
    let h = harness();
    let tenant = key().tenant;
    for contact in ["ana", "bia", "caio"] {
        say(&h, &contact_key(tenant.as_str(), contact), "Hi").await;
        h.clock.fetch_add(60, Ordering::SeqCst);
    }
    say(&h, &contact_key("other", "dora"), "Hi").await;
    operate_of(&h.ask, &h.store)
        .set_fact(&contact_key(tenant.as_str(), "bia"), &name(), "Bia", "ops")
        .await
        .unwrap();
    let first = operate_of(&h.ask, &h.store)
        .contacts(&tenant, Some(2), None)
        .await
        .unwrap();
    let listed: Vec<_> = first
        .contacts
        .iter()
        .map(|c| (c.contact.as_str(), c.messages, c.facts))
        .collect();
    assert_eq!(listed, vec![("caio", 2, 0), ("bia", 2, 1)]);
    let next = first.next.expect("a second page");
    let parsed = degrau::store::ContactCursor::parse(&next.format()).unwrap();
    let second = operate_of(&h.ask, &h.store)
        .contacts(&tenant, Some(2), Some(&parsed))
        .await
        .unwrap();
    let listed: Vec<_> = second.contacts.iter().map(|c| c.contact.as_str()).collect();
    assert_eq!((listed, second.next), (vec!["ana"], None));

    records_of(&h.ask, &h.store)
        .erase(&contact_key(tenant.as_str(), "caio"))
        .await
        .unwrap();
    let page = operate_of(&h.ask, &h.store)
        .contacts(&tenant, None, None)
        .await
        .unwrap();
    let listed: Vec<_> = page.contacts.iter().map(|c| c.contact.as_str()).collect();
    assert_eq!(listed, vec!["bia", "ana"]);
    for limit in [0, 101] {
        assert!(matches!(
            operate_of(&h.ask, &h.store)
                .contacts(&tenant, Some(limit), None)
                .await,
            Err(AskError::InvalidRequest(_))
        ));
    }
    assert_eq!(degrau::store::ContactCursor::parse("zz"), None);
}

#[tokio::test]
async fn the_fact_routes_work_while_facts_live_after_the_transcript_expired() {
    let h = harness();
    say(&h, &key(), "Hi, I'm Rita.").await;
    operate_of(&h.ask, &h.store)
        .set_fact(&key(), &name(), "Rita", "ops-7")
        .await
        .unwrap();
    // The transcript's retention (90 days after the session could close) passes;
    // the facts (365 days) live on.
    h.clock.fetch_add(100 * DAY, Ordering::SeqCst);
    let memory = records_of(&h.ask, &h.store).memory(&key()).await;
    assert!(matches!(memory, Err(AskError::NotFound(_))), "{memory:?}");
    let facts = operate_of(&h.ask, &h.store).facts(&key()).await.unwrap();
    assert_eq!(facts[0].fact.value, "Rita");
    let set = operate_of(&h.ask, &h.store)
        .set_fact(&key(), &name(), "Rita Souza", "ops-7")
        .await
        .unwrap();
    assert_eq!((set.fact.source.session, set.fact.source.seq), (0, 0));
    let time = FactKey::parse("preferred_time").unwrap();
    operate_of(&h.ask, &h.store)
        .set_fact(&key(), &time, "mornings", "ops-7")
        .await
        .unwrap();
    operate_of(&h.ask, &h.store)
        .delete_fact(&key(), &name())
        .await
        .unwrap();
    let facts = operate_of(&h.ask, &h.store).facts(&key()).await.unwrap();
    let keys: Vec<&str> = facts.iter().map(|r| r.fact.key.as_str()).collect();
    assert_eq!(keys, ["preferred_time"]);
    operate_of(&h.ask, &h.store)
        .delete_fact(&key(), &time)
        .await
        .unwrap();
    // No head and no fact: nothing known of the contact.
    let gone = operate_of(&h.ask, &h.store).facts(&key()).await;
    assert!(matches!(gone, Err(AskError::NotFound(_))), "{gone:?}");
    let refused = operate_of(&h.ask, &h.store)
        .set_fact(&key(), &name(), "Rita", "ops-7")
        .await;
    assert!(matches!(refused, Err(AskError::NotFound(_))), "{refused:?}");
}

/// A channel's check for the tests: its section holds only `{"on": bool}`.
struct OnOnly;

impl degrau::channel::ChannelSettingsCheck for OnOnly {
    fn channel(&self) -> &'static str {
        "whatsapp"
    }

    fn check(&self, section: &degrau::channel::ChannelSection) -> Result<(), String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct On {
            #[allow(dead_code)]
            on: bool,
        }
        section.read::<On>(self.channel()).map(|_| ())
    }
}

#[tokio::test]
async fn a_channels_section_is_kept_opaque_and_checked_by_the_check_registered_for_it() {
    let h = harness();
    let tenant = key().tenant;
    let unchecked = operate_of(&h.ask, &h.store);
    let odd = r#"{"whatsapp": {"colour": "red"}}"#;
    let stored = unchecked.replace_config(&tenant, odd, 0).await.unwrap();
    assert_eq!(stored.problem, None, "no check registered: kept as it is");
    let config = h.store.tenant_config(&tenant).await.unwrap().unwrap();
    assert_eq!(
        config.channel_section("whatsapp").unwrap().fields()["colour"],
        "red"
    );
    h.model.push(ScriptedModel::text("Hello.", usage()));
    h.ask.ask(&key(), "Hi", None, minute()).await.unwrap();

    let checks = degrau::channel::ChannelChecks::default().with(Arc::new(OnOnly));
    let checked = operate_of(&h.ask, &h.store).checking(checks);
    let state = checked.config_state(&tenant).await.unwrap();
    let problem = state.problem.unwrap();
    assert!(
        problem.starts_with("whatsapp.colour: unknown field `colour`"),
        "{problem}"
    );
    for (text, names) in [
        (odd, "config: whatsapp.colour: unknown field `colour`"),
        (
            r#"{"whatsapp": {"on": "yes"}}"#,
            "config: whatsapp.on: invalid type",
        ),
        (r#"{"whatsapp": "on"}"#, "config: whatsapp: invalid type"),
    ] {
        let Err(AskError::InvalidRequest(message)) = checked.replace_config(&tenant, text, 1).await
        else {
            panic!("{text} must be refused");
        };
        assert!(message.starts_with(names), "{text}: {message}");
    }
    let fixed = checked
        .replace_config(&tenant, r#"{"whatsapp": {"on": true}}"#, 1)
        .await
        .unwrap();
    assert_eq!((fixed.version(), fixed.problem), (2, None));
}
