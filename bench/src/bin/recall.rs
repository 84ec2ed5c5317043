//! `recall`: recall over a contact's earlier sessions, measured on long
//! conversations (`degrau_bench::recall`): generated contacts with 25 to 40
//! sessions each, 20 to 40 exchanges a session, a detail placed anywhere in a
//! session (often in one older than the 20 newest), and questions worded as a
//! customer words them months later. Side by side in one run: degrau's recall,
//! plain BM25 over every session's whole text, the same over the 20 newest, and
//! recency; recall@1, @3 and @5 by kind of question. Then what a recall costs in
//! DynamoDB at 10, 50 and 200 sessions a contact, and what a session adds.
//!
//! ```text
//! recall [--contacts N] [--seed N] [--out DIR]
//! ```
//!
//! No stack is needed: indexes are made by the core's own `index_session` (and
//! the search summary by the offline stand-in's summariser, as the local stack's
//! compactor gets it), ranked by the core's `rank`, sized as the DynamoDB adapter
//! writes the items. The same seed prints the same figures. Prints the tables and
//! writes `results/recall.md`.

use std::fmt::Write as _;
use std::path::PathBuf;

use degrau::plan::recall::record_of;
use degrau::plan::recall::tokenize::StemmingTokenizer;
use degrau::store::SessionArchive;
use degrau_awsproxy::size::{read_units, write_units};
use degrau_bench::recall::generate::{self, DAY, KINDS, START, Shape};
use degrau_bench::recall::{
    KS, SYSTEMS, answers, index_contact, key, read_indexes, size, whole_text,
};

const USAGE: &str = "usage: recall [--contacts N] [--seed N] [--summary-weight W] [--out DIR]";

/// Hits by system and k, for one kind of question.
#[derive(Default, Clone)]
struct Tally {
    asked: usize,
    hits: [[usize; 3]; 5],
}

fn percent(part: usize, whole: usize) -> String {
    format!("{:.1} %", 100.0 * part as f64 / whole.max(1) as f64)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut contacts, mut seed, mut out) = (60usize, 2026u64, None::<PathBuf>);
    let mut weight = degrau::plan::recall::rank::SUMMARY_WEIGHT;
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--contacts" => contacts = value().parse().expect("--contacts N"),
            "--seed" => seed = value().parse().expect("--seed N"),
            "--summary-weight" => weight = value().parse().expect("--summary-weight W"),
            "--out" => out = Some(PathBuf::from(value())),
            other => panic!("unknown option {other}\n{USAGE}"),
        }
    }
    let (retrieval, header) = compare(contacts, seed, weight);
    let costs = costs(seed);
    println!("{header}\n\n{retrieval}\n{costs}");
    let markdown = format!(
        "# Recall over earlier sessions\n\n`cargo run -q --release -p degrau-bench --bin recall -- \
         --contacts {contacts} --seed {seed}`\n\n{header}\n\nSide by side in one run: degrau's \
         recall (each session indexed from its whole text by the core's `index_session`, with \
         the search summary the offline stand-in writes of it, ranked by the core's `rank` over \
         the indexes one recall reads), plain Okapi BM25 (the `bm25` crate, the same stemming \
         tokenizer) over every session's whole text and over the 20 newest, and recency. \
         Questions share no id with what was said; the last kind shares no word at all \
         (synonyms only), and no lexical search finds it.\n\n{retrieval}\n{costs}"
    );
    let dir = out.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results"));
    std::fs::create_dir_all(&dir).expect("results directory");
    std::fs::write(dir.join("recall.md"), markdown).expect("write results/recall.md");
}

/// recall@k of every system by kind of question, over `contacts` long contacts.
fn compare(contacts: usize, seed: u64, weight: f64) -> (String, String) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let shape = Shape {
        sessions: (25, 40),
        turns: (20, 40),
    };
    let tokenizer = StemmingTokenizer::default();
    let mut tallies = vec![Tally::default(); KINDS.len()];
    let (mut sessions, mut messages, mut older) = (0usize, 0usize, 0usize);
    for number in 0..contacts {
        let contact = generate::contact(&mut rng, shape);
        sessions += contact.sessions.len();
        messages += contact.sessions.iter().map(Vec::len).sum::<usize>();
        let indexed = index_contact(&key(number), &contact.sessions);
        let (indexes, _) = read_indexes(&indexed);
        let texts: Vec<String> = contact.sessions.iter().map(|s| whole_text(s)).collect();
        for (kind, asked, target) in &contact.questions {
            let tally = &mut tallies[*kind];
            tally.asked += 1;
            older += usize::from((*target as usize) + 20 <= contact.sessions.len());
            for (system, found) in answers(&indexes, &texts, asked, 5, &tokenizer, weight)
                .iter()
                .enumerate()
            {
                for (slot, k) in KS.iter().enumerate() {
                    tally.hits[system][slot] +=
                        usize::from(found.iter().take(*k).any(|s| s == target));
                }
            }
        }
    }
    let (table, all) = retrieval_table(&tallies);
    let header = format!(
        "{contacts} contacts, {sessions} sessions (25 to 40 a contact, 7 to 28 days apart), {messages} \
         messages (20 to 40 exchanges a session); {} questions, {older} of them about a session \
         older than the contact's 20 newest; seed {seed}.",
        all.asked
    );
    (table, header)
}

/// The recall@k table: each system by kind of question, then over all of them;
/// and the tally over all.
fn retrieval_table(tallies: &[Tally]) -> (String, Tally) {
    let mut table = String::from(
        "| question about | asked | system | recall@1 | recall@3 | recall@5 |\n|---|---:|---|---:|---:|---:|\n",
    );
    let mut all = Tally::default();
    for (kind, tally) in KINDS.iter().zip(tallies) {
        all.asked += tally.asked;
        for (system, name) in SYSTEMS.iter().enumerate() {
            let [at1, at3, at5] = tally.hits[system];
            let _ = writeln!(
                table,
                "| {} | {} | {name} | {} | {} | {} |",
                kind.name,
                tally.asked,
                percent(at1, tally.asked),
                percent(at3, tally.asked),
                percent(at5, tally.asked)
            );
            for slot in 0..3 {
                all.hits[system][slot] += tally.hits[system][slot];
            }
        }
    }
    for (system, name) in SYSTEMS.iter().enumerate() {
        let [at1, at3, at5] = all.hits[system];
        let _ = writeln!(
            table,
            "| **all** | {} | **{name}** | {} | {} | {} |",
            all.asked,
            percent(at1, all.asked),
            percent(at3, all.asked),
            percent(at5, all.asked)
        );
    }
    (table, all)
}

/// What a recall reads and a closed session writes, at 10, 50 and 200 sessions a
/// contact (30 exchanges a session).
fn costs(seed: u64) -> String {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
    let mut table = String::from(
        "| sessions a contact | index bytes read | + found sessions' texts and records | read units per recall | bytes stored a session (index + text) | write units a session |\n|---:|---:|---:|---:|---:|---:|\n",
    );
    for count in [10usize, 50, 200] {
        let shape = Shape {
            sessions: (count, count),
            turns: (30, 30),
        };
        let contact = generate::contact(&mut rng, shape);
        let indexed = index_contact(&key(0), &contact.sessions);
        let (read, index_bytes) = read_indexes(&indexed);
        // The three sessions a recall shows: their texts and archives, one batch read.
        let shown: u64 = indexed
            .sizes
            .iter()
            .rev()
            .take(3)
            .map(|(_, text)| text)
            .sum::<u64>()
            + contact
                .sessions
                .iter()
                .rev()
                .take(3)
                .enumerate()
                .map(|(i, messages)| {
                    let number = (contact.sessions.len() - i) as u32;
                    let record = record_of(number, None, messages, messages.len() as u64, START);
                    let archive = SessionArchive::from_record(&record, 0, START + 400 * DAY);
                    size(&degrau_adapters::dynamodb::archive_item(&key(0), &archive).expect("item"))
                })
                .sum::<u64>();
        let units = read_units(index_bytes, false)
            + indexed
                .sizes
                .iter()
                .rev()
                .take(3)
                .map(|(_, t)| read_units(*t, true))
                .sum::<f64>()
            + 3.0 * read_units(1_000, true);
        let (stored, written) = indexed.sizes.iter().fold((0u64, 0f64), |(b, w), (i, t)| {
            // Two transactions (2× units): the index and text, then the index with
            // its search summary.
            (
                b + i + t,
                w + 2.0 * (2.0 * write_units(*i) + write_units(*t)),
            )
        });
        let _ = writeln!(
            table,
            "| {count} ({} read) | {index_bytes} | {shown} | {units:.1} | {:.0} | {:.1} |",
            read.len(),
            stored as f64 / count as f64,
            written / count as f64
        );
    }
    table
}
