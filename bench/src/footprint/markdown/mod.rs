//! The markdown report, section by section: one ask at each checkpoint turn
//! beside LangChain's (`asks`), the compaction amortized per ask and the bill per
//! million asks (`costs`), the WhatsApp path (`whatsapp`), the signals' fixed cost
//! (`signals`), the cold starts (`cold`). How its numbers print is
//! [`super::numbers`].

mod asks;
mod cold;
mod costs;
mod signals;
mod whatsapp;

use std::fmt::Write as _;

use super::numbers::thousands;
use super::report::Report;

/// The markdown report.
pub fn markdown(report: &Report, command: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# degrau footprint: the cost of an ask as the history grows\n"
    );
    let _ = writeln!(
        out,
        "Machine: {} · function binaries: **{}** build · `{command}` · seed {} · \
         compaction threshold {} tokens, {} messages kept per step · {} turns, {} steps, \
         {} failed asks.\n",
        report.machine.label(),
        report.profile,
        report.seed,
        thousands(report.threshold_tokens),
        report.keep_messages,
        thousands(report.turns as u64),
        report.steps,
        report.failed_asks,
    );
    if let Some(note) = &report.binaries_note {
        let _ = writeln!(out, "> {note}\n");
    }

    let patterns: Vec<String> = report
        .item_limits
        .iter()
        .map(|l| l.pattern.clone())
        .collect();
    out.push_str(&asks::section(report, &patterns));
    out.push_str(&costs::compaction_section(report));
    out.push_str(&costs::bill_section(report, &patterns));
    out.push_str(&whatsapp::section(report));
    out.push_str(&signals::section(report));
    out.push_str(&cold::section(report));
    out
}
