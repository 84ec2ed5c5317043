//! Recall measured on long conversations ([`generate`]), side by side in one run:
//!
//! - **degrau**: each session indexed by the core's own `index_session` from its
//!   whole text, with the search summary the offline stand-in writes of it (the
//!   compactor's request, answered by the stand-in's own summariser), ranked by the
//!   core's `rank` over the indexes one recall reads (the newest, within the
//!   store's byte budget);
//! - **full text**: plain Okapi BM25 (the `bm25` crate) over every session's whole
//!   text, with the same stemming tokenizer;
//! - **20 newest**: the same over the contact's 20 newest sessions (what degrau's
//!   records held before);
//! - **recency**: the newest sessions first.
//!
//! And what a recall costs in DynamoDB: the items it reads (every index, then the
//! found sessions' texts and archives), sized by DynamoDB's rules, and the items a
//! closed session adds.

pub mod generate;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use bm25::{Document, SearchEngineBuilder};
use degrau::domain::{ContactId, StoredMessage, TenantId};
use degrau::plan::recall::index::{
    SessionIndex, SessionText, index_session, lines_of, with_summary,
};
use degrau::plan::recall::rank::rank_weighted;
use degrau::plan::recall::tokenize::StemmingTokenizer;
use degrau::store::{ContactKey, MAX_INDEX_READ_BYTES};
use serde_json::{Value, json};

/// The systems compared, in the report's order.
pub const SYSTEMS: [&str; 5] = [
    "degrau (index + search summary)",
    "degrau, the index alone",
    "BM25, every session's whole text",
    "BM25, the 20 newest sessions",
    "recency (newest first)",
];

/// The k of recall@k reported.
pub const KS: [usize; 3] = [1, 3, 5];

/// An `AttributeValue` as DynamoDB JSON, for the size rules.
pub fn wire(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::L(items) => json!({"L": items.iter().map(wire).collect::<Vec<_>>()}),
        AttributeValue::M(map) => {
            json!({"M": map.iter().map(|(k, v)| (k.clone(), wire(v))).collect::<serde_json::Map<_, _>>()})
        }
        other => panic!("recall's items hold no {other:?}"),
    }
}

/// An item's size by DynamoDB's rules.
pub fn size(item: &HashMap<String, AttributeValue>) -> u64 {
    degrau_awsproxy::size::item_size(&Value::Object(
        item.iter().map(|(k, v)| (k.clone(), wire(v))).collect(),
    ))
}

/// A session's whole text, one line a message part, as both BM25 peers read it.
pub fn whole_text(messages: &[StoredMessage]) -> String {
    lines_of(messages)
        .into_iter()
        .map(|line| line.text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A contact as degrau keeps it: each session's index (with its search summary)
/// and text, and the sizes of the items each adds (index, text).
pub struct Indexed {
    /// Oldest first.
    pub indexes: Vec<SessionIndex>,
    /// Oldest first.
    pub texts: Vec<SessionText>,
    /// (index item bytes, text item bytes), oldest first.
    pub sizes: Vec<(u64, u64)>,
}

/// Indexes every session of a contact as the compactor's index job does.
pub fn index_contact(key: &ContactKey, sessions: &[Vec<StoredMessage>]) -> Indexed {
    let tokenizer = StemmingTokenizer::default();
    let mut indexed = Indexed {
        indexes: Vec::new(),
        texts: Vec::new(),
        sizes: Vec::new(),
    };
    for (number, messages) in (1u32..).zip(sessions) {
        let (index, text) = index_session(number, messages, &tokenizer);
        let card = degrau_standin::answer::summarize_conversation(&conversation(&text));
        let index = with_summary(index, &card, &tokenizer);
        let expires = generate::START + 400 * generate::DAY;
        let index_bytes =
            size(&degrau_adapters::dynamodb::index_item(key, &index, expires).expect("item"));
        let text_bytes =
            size(&degrau_adapters::dynamodb::text_item(key, &text, expires).expect("item"));
        indexed.indexes.push(index);
        indexed.texts.push(text);
        indexed.sizes.push((index_bytes, text_bytes));
    }
    indexed
}

/// The conversation as the search-summary request shows it (`customer:` lines).
fn conversation(text: &SessionText) -> String {
    text.lines
        .iter()
        .map(|line| {
            let who = match line.speaker {
                degrau::plan::recall::index::Speaker::Customer => "customer",
                degrau::plan::recall::index::Speaker::Agent => "agent",
                degrau::plan::recall::index::Speaker::Tool => "tool",
            };
            format!("{who}: {}", line.text)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The indexes one recall reads: the newest, while their items fit the store's
/// byte budget; and the bytes read.
pub fn read_indexes(indexed: &Indexed) -> (Vec<SessionIndex>, u64) {
    let mut read = 0;
    let mut taken = Vec::new();
    for (index, (bytes, _)) in indexed.indexes.iter().zip(&indexed.sizes).rev() {
        if read + bytes > MAX_INDEX_READ_BYTES as u64 {
            break;
        }
        read += bytes;
        taken.push(index.clone());
    }
    (taken, read)
}

/// Each system's sessions for `query`, best first (at most `k`); degrau's search
/// summary weighted `summary_weight`.
pub fn answers(
    indexes: &[SessionIndex],
    texts: &[String],
    query: &str,
    k: usize,
    tokenizer: &StemmingTokenizer,
    summary_weight: f64,
) -> [Vec<u32>; 5] {
    let count = texts.len();
    let sessions = |found: Vec<degrau::plan::recall::rank::Scored>| {
        found.into_iter().map(|found| found.session).collect()
    };
    let recency = (1..=count as u32).rev().take(k).collect();
    [
        sessions(rank_weighted(indexes, query, k, tokenizer, summary_weight)),
        sessions(rank_weighted(indexes, query, k, tokenizer, 0.0)),
        bm25_over(texts, 0, query, k),
        bm25_over(texts, count.saturating_sub(20), query, k),
        recency,
    ]
}

/// Okapi BM25 over the texts from `from` on (session `from + 1` first), best
/// first, ties to the newer.
fn bm25_over(texts: &[String], from: usize, query: &str, k: usize) -> Vec<u32> {
    let documents: Vec<Document<u32>> = texts
        .iter()
        .enumerate()
        .skip(from)
        .map(|(i, text)| Document::new(i as u32 + 1, text.clone()))
        .collect();
    if documents.is_empty() {
        return Vec::new();
    }
    let engine = SearchEngineBuilder::<u32, u32, StemmingTokenizer>::with_tokenizer_and_documents(
        StemmingTokenizer::default(),
        documents,
    )
    .build();
    let mut found = engine.search(query, None);
    found.retain(|result| result.score > 0.0);
    found.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.document.id.cmp(&a.document.id))
    });
    found.into_iter().take(k).map(|r| r.document.id).collect()
}

/// The bench's contact key (the partition its items are sized in).
pub fn key(index: usize) -> ContactKey {
    ContactKey {
        tenant: TenantId::parse("bench").expect("tenant"),
        contact: ContactId::parse(&format!("c{index}")).expect("contact"),
    }
}
