//! The cache TTL policy end to end: the real `ask` binary on a clock moved by
//! `CLOCK_OFFSET_FILE` and the stand-in's cache on a manual clock moved by the
//! same gaps, so that a pause expires the entries it would expire.

use degrau::plan::cache_ttl::CacheTtlPolicy;
use degrau::tenant::TenantConfig;
use degrau_tests::stack::is_compactor_call;
use serde_json::Value;

use crate::helpers::stack_on_moved_clocks;

/// Two tenants alike but for their policy (and a word of their instructions, so
/// that their prefixes never share a cache entry).
const TENANTS: [(&str, CacheTtlPolicy); 2] = [
    ("fixed", CacheTtlPolicy::FiveMinutes),
    ("auto", CacheTtlPolicy::Auto),
];

/// About 500 tokens: three of them and their answers pass the 1,024-token
/// minimum cacheable length.
fn long_message(tenant: &str, turn: usize) -> String {
    format!(
        "({tenant}, message {turn}) I would like to move my Friday appointment. {}",
        "My sister and I both need a haircut, and mornings suit us best. ".repeat(30)
    )
}

/// The answer-model calls the stand-in logged for `tenant`, oldest first.
fn calls_of(log: &[Value], tenant: &str) -> Vec<Value> {
    log.iter()
        .filter(|call| !is_compactor_call(call))
        .filter(|call| {
            call["body"]["system"][0]["text"]
                .as_str()
                .is_some_and(|text| text.starts_with(&format!("[{tenant}]")))
        })
        .cloned()
        .collect()
}

/// The `ttl` of every breakpoint of a logged request (`"5m"` when none).
fn ttls(call: &Value) -> Vec<String> {
    let body = &call["body"];
    let system = body["system"].as_array().unwrap().iter();
    let blocks = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap());
    system
        .chain(blocks)
        .filter_map(|b| b.get("cache_control"))
        .map(|c| c["ttl"].as_str().unwrap_or("5m").to_owned())
        .collect()
}

fn usage(call: &Value, field: &str) -> u64 {
    call["response"]["usage"][field].as_u64().unwrap_or(0)
}

#[tokio::test]
async fn after_a_pause_auto_keeps_the_whole_conversation_an_hour_and_the_next_pause_reads_it() {
    let (stack, offset) = stack_on_moved_clocks("cache-ttl").await;
    for (tenant, policy) in TENANTS {
        let config = TenantConfig {
            instructions: Some(format!("[{tenant}] You book haircuts. Answer briefly.")),
            cache_ttl: Some(policy),
            ..TenantConfig::default()
        };
        stack.configure(tenant, &config).await;
    }
    // Gaps before each turn: 40 seconds, then twenty minutes, then half an hour.
    let mut now = 0;
    for (turn, gap) in [0u64, 40, 20 * 60, 30 * 60].into_iter().enumerate() {
        now += gap;
        offset.set(now as i64);
        stack.standin.advance_clock(gap).await;
        for (tenant, _) in TENANTS {
            let reply = stack.post(tenant, "ana", &long_message(tenant, turn)).await;
            assert_eq!(reply.status, 200, "{tenant}, turn {turn}: {}", reply.raw);
        }
    }

    let log = stack.standin.requests().await;
    let (fixed, auto) = (calls_of(&log, "fixed"), calls_of(&log, "auto"));
    // One call a turn: no tool use in these messages.
    assert_eq!((fixed.len(), auto.len()), (4, 4), "{log:#?}");
    let last_of_turn = |calls: &[Value], turn: usize| calls[turn].clone();

    // Before any pause both send five-minute breakpoints only.
    for turn in 0..2 {
        assert!(ttls(&last_of_turn(&auto, turn)).iter().all(|t| t == "5m"));
    }
    // After the twenty-minute pause (gaps 40 s and 20 min), auto gives every
    // breakpoint an hour and pays the one-hour write; the fixed tenant does not.
    let auto_third = last_of_turn(&auto, 2);
    assert!(
        ttls(&auto_third).iter().all(|t| t == "1h"),
        "{:?}",
        ttls(&auto_third)
    );
    assert!(
        auto_third["response"]["usage"]["cache_creation"]["ephemeral_1h_input_tokens"]
            .as_u64()
            .unwrap()
            > 1_000
    );
    assert!(ttls(&last_of_turn(&fixed, 2)).iter().all(|t| t == "5m"));

    // Half an hour later: auto's request reads everything its previous one
    // wrote (all of it but the uncached tail), the fixed tenant's reads nothing
    // and writes it all again.
    let auto_fourth = last_of_turn(&auto, 3);
    let fixed_fourth = last_of_turn(&fixed, 3);
    let written_before = usage(&auto_third, "cache_creation_input_tokens")
        + usage(&auto_third, "cache_read_input_tokens");
    assert_eq!(
        usage(&auto_fourth, "cache_read_input_tokens"),
        written_before,
        "{auto_fourth:#?}"
    );
    assert_eq!(usage(&fixed_fourth, "cache_read_input_tokens"), 0);
    assert!(usage(&fixed_fourth, "cache_creation_input_tokens") > written_before);
    // The whole of it at the prices: 0.1× the read and 2× the new part, against
    // 1.25× the whole prefix again.
    let cost = |call: &Value| {
        let split = &call["response"]["usage"]["cache_creation"];
        usage(call, "input_tokens") as f64
            + 0.1 * usage(call, "cache_read_input_tokens") as f64
            + 1.25 * split["ephemeral_5m_input_tokens"].as_u64().unwrap() as f64
            + 2.0 * split["ephemeral_1h_input_tokens"].as_u64().unwrap() as f64
    };
    assert!(
        cost(&auto_fourth) * 2.0 < cost(&fixed_fourth),
        "auto {} against fixed {}",
        cost(&auto_fourth),
        cost(&fixed_fourth)
    );
    assert_eq!(ttls(&auto_fourth), ["1h"; 4]);
}
