//! Recall over earlier sessions end to end: the real `ask` and `compactor`
//! binaries on moto and the stand-in (whose side of the `recall` tool is scripted;
//! the indexes, their ranking and their reads are degrau's). Sessions close when
//! the contact's last activity is moved back past the idle timeout (or the
//! functions' clock forward); the queue is drained after each message, so the
//! compactor indexes the session that message closed.

use degrau::tenant::TenantConfig;
use degrau::tools::{ToolDeclaration, ToolDeclarations};
use degrau_tests::stack::{FullStack, attr_s, is_compactor_call, model_calls};
use serde_json::Value;

use crate::helpers::assert_error;

const TENANT: &str = "recall";
const HOUR: i64 = 3_600;

/// The demo tools and `recall`, sessions closing after an hour.
fn recalling(digest: bool) -> TenantConfig {
    let tools: Vec<ToolDeclaration> = ["list_free_slots", "book_slot", "recall"]
        .iter()
        .map(|name| ToolDeclaration::BuiltIn((*name).to_owned()))
        .collect();
    TenantConfig {
        tools: Some(ToolDeclarations::try_from(tools).unwrap()),
        session_idle_minutes: Some(60),
        recall_digest: Some(digest),
        ..TenantConfig::default()
    }
}

/// One message in a new session (the last one closed an hour ago and more), then
/// the queue drained: the closed session is indexed.
async fn next_session(stack: &FullStack, tenant: &str, contact: &str, text: &str) -> Value {
    stack.age_contact(tenant, contact, 2 * HOUR).await;
    let reply = stack.post(tenant, contact, text).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    stack.drain().await;
    reply.body
}

/// The contact's items whose sort key starts with `prefix`.
async fn items_of(stack: &FullStack, tenant: &str, contact: &str, prefix: &str) -> usize {
    stack
        .contact_items(tenant, contact)
        .await
        .iter()
        .filter(|item| attr_s(item, "sk").starts_with(prefix))
        .count()
}

/// Session 1 books a slot; returns its confirmation id.
async fn book(stack: &FullStack, tenant: &str, contact: &str) -> String {
    let reply = stack
        .post(
            tenant,
            contact,
            "please book a haircut on 2026-12-04 at 10:00",
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let text = reply.body["reply"]["text"].as_str().unwrap().to_owned();
    let id = text
        .split(|c: char| c.is_whitespace() || c == '.')
        .find(|word| word.starts_with("BK-"))
        .unwrap_or_else(|| panic!("no booking id in {text}"));
    id.to_owned()
}

async fn sessions(stack: &FullStack, tenant: &str, contact: &str, query: &str) -> Value {
    let reply = stack
        .call_with(
            "GET",
            &format!("/v1/contacts/{contact}/sessions"),
            query,
            tenant,
            &[],
            None,
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    reply.body
}

#[tokio::test]
async fn a_new_session_retrieves_a_booking_id_from_two_sessions_earlier_through_the_tool() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &recalling(false)).await;
    let booking = book(&stack, TENANT, "ana").await;
    let second = next_session(&stack, TENANT, "ana", "hello, how much is a beard trim?").await;
    assert_eq!(second["session"], 2);
    let third = next_session(
        &stack,
        TENANT,
        "ana",
        "Same as last time please: what was my booking?",
    )
    .await;
    assert_eq!(third["session"], 3);
    let text = third["reply"]["text"].as_str().unwrap();
    assert!(
        text.contains(&booking) && text.contains("session 1 (2026-"),
        "{text}"
    );
    // What the model was shown: the tool's result, from session 1's record.
    let log = stack.standin.requests().await;
    let last = model_calls(&log)
        .into_iter()
        .rev()
        .find(|c| !is_compactor_call(c))
        .unwrap();
    let result =
        last["body"]["messages"].as_array().unwrap().last().unwrap()["content"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned();
    let found: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(found["sessions"][0]["session"], 1, "{found}");
    assert!(
        found["sessions"][0]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .any(|id| id == booking.as_str())
    );
    // Sessions 1 and 2 are on record now; the search route finds the booking by
    // its id and by its words, and lists them newest first without a query.
    let by_id = sessions(&stack, TENANT, "ana", &format!("q={booking}")).await;
    assert_eq!(by_id["sessions"][0]["session"], 1, "{by_id}");
    assert!(by_id["sessions"][0]["score"].as_f64().unwrap() > 0.0);
    let by_words = sessions(&stack, TENANT, "ana", "q=haircut,booked&limit=1").await;
    assert_eq!(by_words["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(by_words["sessions"][0]["session"], 1, "{by_words}");
    let newest = sessions(&stack, TENANT, "ana", "").await;
    let numbers: Vec<u64> = newest["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [2, 1]);
    assert!(newest["sessions"][0].get("score").is_none());
}

#[tokio::test]
async fn an_erase_removes_every_record() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &recalling(true)).await;
    book(&stack, TENANT, "bia").await;
    next_session(&stack, TENANT, "bia", "hi again").await;
    next_session(&stack, TENANT, "bia", "and again").await;
    let archives = |items: &[degrau_tests::stack::RawItem]| {
        items
            .iter()
            .filter(|item| attr_s(item, "sk").starts_with("SUM#"))
            .count()
    };
    assert_eq!(archives(&stack.contact_items(TENANT, "bia").await), 2);
    assert_eq!(
        items_of(&stack, TENANT, "bia", "IDX#").await,
        2,
        "two sessions indexed"
    );
    assert_eq!(items_of(&stack, TENANT, "bia", "TXT#").await, 2);
    let erased = stack.call("DELETE", "/v1/contacts/bia", TENANT, None).await;
    assert_eq!(erased.status, 200, "{}", erased.raw);
    assert!(stack.contact_items(TENANT, "bia").await.is_empty());
    let after = sessions(&stack, TENANT, "bia", "q=haircut").await;
    assert_eq!(after["sessions"], serde_json::json!([]));
    // The contact's next life recalls nothing of the erased one.
    let reply = stack
        .post(TENANT, "bia", "do you remember my last booking?")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert!(
        reply.body["reply"]["text"]
            .as_str()
            .unwrap()
            .contains("recall found no earlier session"),
        "{}",
        reply.raw
    );
}

#[tokio::test]
async fn a_record_never_crosses_contacts_or_tenants() {
    let stack = FullStack::start(&[]).await;
    let other = "recall-other";
    for tenant in [TENANT, other] {
        stack.configure(tenant, &recalling(true)).await;
    }
    let booking = book(&stack, TENANT, "caio").await;
    next_session(&stack, TENANT, "caio", "hi").await;
    assert_eq!(
        sessions(&stack, TENANT, "caio", "q=haircut").await["sessions"][0]["session"],
        1
    );
    // The same contact id in another tenant, and another contact of the tenant:
    // each with a closed session of its own, and none of caio's.
    for (tenant, contact) in [(other, "caio"), (TENANT, "duda")] {
        assert_eq!(stack.post(tenant, contact, "hello").await.status, 200);
        let body = next_session(&stack, tenant, contact, "remember my last booking?").await;
        let text = body["reply"]["text"].as_str().unwrap();
        assert!(!text.contains(&booking), "{tenant}/{contact}: {text}");
        assert!(text.contains("recall found"), "{text}");
        let found = sessions(&stack, tenant, contact, &format!("q={booking}")).await;
        assert_eq!(
            found["sessions"],
            serde_json::json!([]),
            "{tenant}/{contact}"
        );
        let all = sessions(&stack, tenant, contact, "").await;
        assert_eq!(all["sessions"].as_array().unwrap().len(), 1);
        assert!(!all.to_string().contains("haircut"), "{all}");
    }
}

#[tokio::test]
async fn with_the_digest_every_request_of_a_new_session_carries_the_last_sessions_paragraph() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &recalling(true)).await;
    let booking = book(&stack, TENANT, "edu").await;
    next_session(&stack, TENANT, "edu", "good morning").await;
    assert_eq!(stack.post(TENANT, "edu", "thanks").await.status, 200);
    let log = stack.standin.requests().await;
    let contexts: Vec<String> = model_calls(&log)
        .into_iter()
        .filter(|c| !is_compactor_call(c))
        .map(|c| c["body"]["system"][1]["text"].as_str().unwrap().to_owned())
        .collect();
    let (first_session, second_session) = contexts.split_at(contexts.len() - 2);
    assert!(first_session.iter().all(|c| !c.contains("<last_session>")));
    assert_eq!(
        second_session[0], second_session[1],
        "stable for the session"
    );
    assert!(
        second_session[0].contains("<last_session>\nSession 1 ended 20")
            && second_session[0].contains(&booking),
        "{}",
        second_session[0]
    );
}

#[tokio::test]
async fn bad_input_on_the_sessions_route_gets_the_documented_400_and_changes_nothing() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &recalling(false)).await;
    book(&stack, TENANT, "fabi").await;
    next_session(&stack, TENANT, "fabi", "hi").await;
    let before = stack.contact_items(TENANT, "fabi").await;
    let long = "a".repeat(501);
    for query in [
        "limit=0".to_owned(),
        "limit=21".to_owned(),
        "limit=two".to_owned(),
        "q=".to_owned(),
        format!("q={long}"),
    ] {
        let reply = stack
            .call_with(
                "GET",
                "/v1/contacts/fabi/sessions",
                &query,
                TENANT,
                &[],
                None,
            )
            .await;
        assert_error(&reply, 400, "invalid_request");
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with('`'),
            "{query}: {}",
            reply.raw
        );
    }
    // The route answers GET (search) and POST (close the session): no other.
    let put = stack
        .call("PUT", "/v1/contacts/fabi/sessions", TENANT, Some("{}"))
        .await;
    assert_error(&put, 405, "method_not_allowed");
    assert_eq!(stack.contact_items(TENANT, "fabi").await, before);
}

#[tokio::test]
async fn a_detail_said_in_session_3_is_found_from_session_30_with_its_passage() {
    // Past the 20 records a contact once kept, and in the middle of its session.
    let (stack, offset) = crate::helpers::stack_on_moved_clocks("recall-30").await;
    stack.configure(TENANT, &recalling(false)).await;
    let mut now = 0;
    for session in 1..=29 {
        let text = match session {
            3 => "Morning! By the way, I left my black umbrella on the waiting chair.".to_owned(),
            n => format!("hello again ({n}), is the shop open on Saturday?"),
        };
        let reply = stack.post(TENANT, "eva", &text).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        assert_eq!(reply.body["session"], session);
        if session == 3 {
            let more = stack
                .post(TENANT, "eva", "also, what time do you close?")
                .await;
            assert_eq!(more.status, 200, "{}", more.raw);
        }
        stack.drain().await;
        now += 2 * HOUR;
        offset.set(now);
    }
    let reply = stack
        .post(
            TENANT,
            "eva",
            "did anyone find the umbrella I forgot last time?",
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["session"], 30);
    let text = reply.body["reply"]["text"].as_str().unwrap();
    assert!(text.contains("session 3 (2026-"), "{text}");
    stack.drain().await;
    assert_eq!(items_of(&stack, TENANT, "eva", "IDX#").await, 29);
    let found = sessions(&stack, TENANT, "eva", "q=umbrella&limit=3").await;
    let first = &found["sessions"][0];
    assert_eq!(first["session"], 3, "{found}");
    let lines = first["passages"][0]["lines"].as_array().unwrap();
    assert!(
        lines.iter().any(|line| line
            .as_str()
            .unwrap()
            .contains("black umbrella on the waiting chair")),
        "{first}"
    );
    assert!(
        first["search_summary"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "the compactor wrote its search summary: {first}"
    );
    crate::helpers::assert_error(
        &stack
            .call_with(
                "GET",
                "/v1/contacts/eva/sessions",
                "q=%20",
                TENANT,
                &[],
                None,
            )
            .await,
        400,
        "invalid_request",
    );
}

#[tokio::test]
async fn a_session_past_its_retention_is_not_found() {
    let (stack, offset) = crate::helpers::stack_on_moved_clocks("recall-expiry").await;
    stack
        .configure(
            TENANT,
            &TenantConfig {
                transcript_retention_days: Some(1),
                ..recalling(false)
            },
        )
        .await;
    assert_eq!(
        stack
            .post(TENANT, "fia", "I left my red scarf here yesterday")
            .await
            .status,
        200
    );
    offset.set(2 * HOUR);
    assert_eq!(stack.post(TENANT, "fia", "hi again").await.status, 200);
    stack.drain().await;
    let found = sessions(&stack, TENANT, "fia", "q=scarf").await;
    assert_eq!(found["sessions"][0]["session"], 1, "{found}");
    // Three days on, session 1 is past its retention (a day after it could close).
    offset.set(3 * 24 * HOUR);
    assert_eq!(stack.post(TENANT, "fia", "hello").await.status, 200);
    stack.drain().await;
    let found = sessions(&stack, TENANT, "fia", "q=scarf").await;
    assert_eq!(found["sessions"], serde_json::json!([]), "{found}");
}
