use super::*;
use crate::domain::{ContentBlock, Role};
use crate::testing::msg;
use serde_json::json;

/// `turns` user turns of four messages each: text, tool_use, tool_result, reply.
fn history(first_seq: u64, turns: usize) -> Vec<StoredMessage> {
    let mut out = Vec::new();
    let mut seq = first_seq;
    for turn in 0..turns {
        let id = format!("toolu_{seq}");
        let parts = [
            (Role::User, ContentBlock::text(format!("turn {turn}"))),
            (
                Role::Assistant,
                ContentBlock::tool_use(&id, "list_free_slots", json!({})),
            ),
            (Role::User, ContentBlock::tool_result(&id, "x".repeat(500))),
            (Role::Assistant, ContentBlock::text("ok")),
        ];
        for (role, block) in parts {
            out.push(msg(seq, role, vec![block]));
            seq += 1;
        }
    }
    out
}

fn policy() -> CompactionPolicy {
    CompactionPolicy {
        threshold_tokens: 1000,
        keep_messages: 6,
        keep_tokens: 0,
        hard_limit_tokens: 5000,
        prune_keep_turns: 1,
        prune_min_chars: 100,
        max_fold_tokens: 1_000_000,
        pause_fold: true,
        fold_keep_messages: 2,
    }
}

#[test]
fn no_step_below_the_threshold() {
    let head = Head::default();
    assert_eq!(plan_step(&head, &history(1, 5), 999, 0, &policy()), None);
}

#[test]
fn a_due_step_folds_everything_before_the_safe_start() {
    let head = Head::default();
    let messages = history(1, 5);
    let plan = plan_step(&head, &messages, 1000, 0, &policy()).unwrap();
    // 20 messages, keep 6: naive cut at index 14 (a tool_use); next safe start 16.
    assert_eq!(plan.fold_count, 16);
    assert_eq!(plan.new_summarized_until, 16);
    assert_eq!(plan.seen_summarized_until, 0);
    assert!(!plan.capped);
    assert!(messages[plan.fold_count].is_user_text_only());
    // The kept window is one turn: no result in it is older than the last turn.
    assert!(plan.prune.is_empty());
}

#[test]
fn a_step_prunes_old_results_in_the_kept_window() {
    let head = Head::default();
    let messages = history(1, 5);
    let wide = CompactionPolicy {
        keep_messages: 9,
        ..policy()
    };
    let plan = plan_step(&head, &messages, 1000, 0, &wide).unwrap();
    assert_eq!(plan.new_summarized_until, 12);
    // Kept: turns at seq 13 and 17; the result at seq 15 is older than the last turn.
    assert_eq!(
        plan.prune.iter().map(|d| d.seq).collect::<Vec<_>>(),
        vec![15]
    );
}

#[test]
fn a_later_step_starts_from_summarized_until() {
    let head = Head {
        summarized_until: 8,
        ..Head::default()
    };
    let messages = history(1, 5);
    let plan = plan_step(&head, &messages, 5000, 0, &policy()).unwrap();
    assert_eq!(plan.seen_summarized_until, 8);
    assert_eq!(plan.fold_count, 16, "counted from the first message given");
    assert_eq!(plan.new_summarized_until, 16);
}

#[test]
fn nothing_to_fold_when_the_window_is_already_short() {
    let head = Head {
        summarized_until: 16,
        ..Head::default()
    };
    assert_eq!(plan_step(&head, &history(17, 1), 5000, 0, &policy()), None);
}

#[test]
fn a_step_past_its_budget_stops_at_the_furthest_safe_start_within_it() {
    let head = Head::default();
    let messages = history(1, 5);
    let turn: u64 = messages[..4].iter().map(fold_cost_tokens).sum();
    // Everything before the kept window (16 messages, 4 turns) costs 4 turns.
    for (budget, folded) in [(4 * turn, 16), (3 * turn, 12), (2 * turn + 1, 8), (turn, 4)] {
        let plan = plan_step(
            &head,
            &messages,
            1000,
            0,
            &CompactionPolicy {
                max_fold_tokens: budget,
                ..policy()
            },
        )
        .unwrap();
        assert_eq!(plan.new_summarized_until, folded, "budget {budget}");
        assert_eq!(plan.capped, folded < 16, "budget {budget}");
        assert!(messages[plan.fold_count].is_user_text_only());
    }
    // Not even one turn fits: the step still folds one.
    let tiny = CompactionPolicy {
        max_fold_tokens: 1,
        ..policy()
    };
    let plan = plan_step(&head, &messages, 1000, 0, &tiny).unwrap();
    assert_eq!((plan.new_summarized_until, plan.capped), (4, true));
}

#[test]
fn fold_costs_count_what_the_summary_request_shows() {
    let text = msg(1, Role::User, vec![ContentBlock::text("x".repeat(300))]);
    assert_eq!(fold_cost_tokens(&text), (300 + 40_u64).div_ceil(3));
    let long_result = msg(
        2,
        Role::User,
        vec![ContentBlock::tool_result("t", "y".repeat(10_000))],
    );
    assert_eq!(
        fold_cost_tokens(&long_result),
        fold_cost_tokens(&msg(
            2,
            Role::User,
            vec![ContentBlock::tool_result("t", "y".repeat(300))]
        )),
        "long output is shown by its length only"
    );
}

/// `turns` plain exchanges of `chars`-character texts, without usage.
fn chat(turns: usize, chars: usize) -> Vec<StoredMessage> {
    (0..turns * 2)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            msg(
                i as u64 + 1,
                role,
                vec![ContentBlock::text("x".repeat(chars))],
            )
        })
        .collect()
}

fn usage(context: u64, output: u64) -> crate::usage::Usage {
    crate::usage::Usage {
        input_tokens: 0,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: context,
        output_tokens: output,
        cache_creation: None,
    }
}

#[test]
fn a_step_keeps_enough_tokens_for_the_request_after_it_to_stay_cacheable() {
    // 20 exchanges of 200-character texts: 50 tokens a message by characters.
    let messages = chat(20, 200);
    let tokens = CompactionPolicy {
        keep_messages: 4,
        keep_tokens: 1024,
        threshold_tokens: 3000,
        ..policy()
    };
    // Behind 300 tokens of instructions and context, 15 messages (750
    // tokens) reach 1,024; the window starts at the safe start before them.
    let plan = plan_step(&Head::default(), &messages, 3000, 300, &tokens).unwrap();
    let kept = &messages[plan.fold_count..];
    assert!(kept[0].is_user_text_only());
    let sum: u64 = window_tokens(kept).iter().sum();
    assert!(300 + sum >= 1024, "{sum}");
    assert_eq!(kept.len(), 16, "the latest safe start that holds enough");
    // Without the token keep, four messages.
    let count_only = CompactionPolicy {
        keep_tokens: 0,
        ..tokens
    };
    let plan = plan_step(&Head::default(), &messages, 3000, 300, &count_only).unwrap();
    assert_eq!(messages.len() - plan.fold_count, 4);
    // A larger prefix needs fewer messages.
    let plan = plan_step(&Head::default(), &messages, 3000, 800, &tokens).unwrap();
    assert_eq!(messages.len() - plan.fold_count, 6);
    // A prefix that is enough on its own leaves the message count in charge.
    let plan = plan_step(&Head::default(), &messages, 3000, 1024, &tokens).unwrap();
    assert_eq!(messages.len() - plan.fold_count, 4);
}

#[test]
fn the_message_count_stays_the_floor_of_the_token_sized_keep() {
    // Long messages: two hold 1,024 tokens, but twelve are kept.
    let messages = chat(20, 4000);
    let policy = CompactionPolicy {
        keep_messages: 12,
        keep_tokens: 1024,
        threshold_tokens: 3000,
        ..policy()
    };
    let plan = plan_step(&Head::default(), &messages, 3000, 0, &policy).unwrap();
    assert_eq!(messages.len() - plan.fold_count, 12);
}

#[test]
fn the_token_keep_counts_at_most_half_the_threshold() {
    let messages = chat(20, 200);
    let policy = CompactionPolicy {
        threshold_tokens: 1000,
        keep_messages: 2,
        keep_tokens: 100_000,
        ..policy()
    };
    // 500 tokens: ten messages of 50.
    let plan = plan_step(&Head::default(), &messages, 1000, 0, &policy).unwrap();
    assert_eq!(messages.len() - plan.fold_count, 10);
}

#[test]
fn nothing_is_folded_when_the_whole_window_is_below_the_token_keep() {
    let messages = chat(5, 40);
    let policy = CompactionPolicy {
        keep_messages: 2,
        keep_tokens: 1024,
        threshold_tokens: 3000,
        ..policy()
    };
    assert_eq!(
        plan_step(&Head::default(), &messages, 3000, 100, &policy),
        None
    );
    assert_eq!(kept_window_start(&messages, 100, &policy), 0);
}

#[test]
fn the_retry_after_prompt_too_long_cuts_at_least_what_the_api_said_was_over() {
    // Five turns of four messages (a safe start every fourth), each turn about
    // 180 tokens by the estimate.
    let messages = history(1, 5);
    let tokens = window_tokens(&messages);
    let policy = CompactionPolicy {
        keep_messages: 10,
        ..policy()
    };
    let keep = overflow_cut(&messages, &policy);
    assert_eq!(
        keep.start, 12,
        "the first safe start of the last ten messages"
    );
    // Without a figure, or over by less than the keep cut drops: that cut.
    assert_eq!(retry_cut(&messages, &policy, 0, None), keep);
    assert_eq!(retry_cut(&messages, &policy, 0, Some(10)), keep);
    // Over by more than the keep cut drops: the next safe start that drops
    // the excess and a fifth.
    let dropped = |start: usize| tokens[..start].iter().sum::<u64>();
    let over = dropped(12) + 10;
    let cut = retry_cut(&messages, &policy, 0, Some(over));
    assert_eq!(cut.start, 16);
    assert!(dropped(16) >= over + over / 5);
    // Over by more than the whole window: the window goes.
    assert_eq!(retry_cut(&messages, &policy, 0, Some(1_000_000)).start, 20);
    // A refused request already cut there (the hard cap) is cut further, and
    // what the retry drops is counted from its cut.
    assert_eq!(retry_cut(&messages, &policy, 12, None).start, 16);
    assert_eq!(retry_cut(&messages, &policy, 12, Some(10)).start, 16);
    assert_eq!(retry_cut(&messages, &policy, 16, Some(10)).start, 20);
    assert_eq!(retry_cut(&messages, &policy, 20, None).start, 20);
}

#[test]
fn the_token_sized_keep_sizes_the_window_as_sent_after_the_steps_pruning() {
    // 125-token results: a turn is 133 tokens whole, 39 with its result pruned
    // to a placeholder, as every result but the last turn's is at the step.
    let messages = history(1, 15);
    let tokens = CompactionPolicy {
        keep_messages: 4,
        keep_tokens: 1024,
        threshold_tokens: 3000,
        ..policy()
    };
    let plan = plan_step(&Head::default(), &messages, 3000, 500, &tokens).unwrap();
    let mut sent = messages[plan.fold_count..].to_vec();
    apply(&mut sent, &plan.prune);
    let held = 500 + window_tokens(&sent).iter().sum::<u64>();
    assert!(
        held >= 1024,
        "{held} tokens as sent, {} messages",
        sent.len()
    );
    // Whole, four turns hold 532 behind the 500, but pruned they are 250; the
    // last turn and eleven before it are needed (133 + 11 × 39 = 562, ten
    // would be 523).
    assert_eq!(sent.len(), 4 * 12);
    assert_eq!(
        kept_window_start(&messages, 500, &tokens),
        plan.fold_count,
        "the same start for the plan and the keep"
    );
}

#[test]
fn window_tokens_read_the_usage_where_it_measures_and_the_characters_elsewhere() {
    use ContentBlock as B;
    let text = |seq, role, chars| msg(seq, role, vec![B::text("x".repeat(chars))]);
    let with = |mut m: StoredMessage, u| {
        m.usage = Some(u);
        m
    };
    let mut pruned = text(7, Role::User, 400);
    pruned.pruned = Some(vec![B::text("y".repeat(40))]);
    let thinking = msg(
        6,
        Role::Assistant,
        vec![
            B::Thinking {
                thinking: "z".repeat(4000),
                signature: "s".into(),
            },
            B::text("x".repeat(80)),
        ],
    );
    let messages = [
        text(1, Role::User, 100),
        with(text(2, Role::Assistant, 100), usage(500, 30)),
        text(3, Role::User, 100),
        with(text(4, Role::Assistant, 100), usage(600, 31)),
        // A step lies between 4 and 8: the context dropped.
        text(5, Role::User, 100),
        thinking,
        pruned,
        with(text(8, Role::Assistant, 100), usage(300, 25)),
        text(9, Role::User, 100),
        with(text(10, Role::Assistant, 100), usage(360, 25)),
    ];
    assert_eq!(
        window_tokens(&messages),
        [
            25, // characters: nothing measures it
            30, // the model's output
            70, // 600 − 500 − 30: measured
            31, 25, // after 4 but before a message with thinking: characters
            20, // thinking left out: 80 characters
            10, // pruned since: its copy's characters
            25, 35, // 360 − 300 − 25
            25,
        ]
    );
    // A growth too small for the message (a step between two requests) is
    // not believed.
    let across_a_step = [
        with(text(1, Role::Assistant, 100), usage(5000, 30)),
        text(2, Role::User, 400),
        with(text(3, Role::Assistant, 100), usage(5040, 30)),
    ];
    assert_eq!(window_tokens(&across_a_step)[1], 100);
}

#[test]
fn the_hard_cap_cuts_only_when_the_limit_was_reached_and_keeps_summarized_until() {
    let messages = history(1, 5);
    let calm = Head {
        last_context_tokens: 4999,
        ..Head::default()
    };
    assert_eq!(
        request_window(&calm, &messages, &policy()),
        WindowCut {
            start: 0,
            hard_capped: false
        }
    );
    let late = Head {
        last_context_tokens: 5000,
        ..Head::default()
    };
    let cut = request_window(&late, &messages, &policy());
    assert_eq!(
        cut,
        WindowCut {
            start: 16,
            hard_capped: true
        }
    );
    assert!(messages[cut.start].is_user_text_only());
}

#[test]
fn the_hard_cap_stays_on_until_summarized_until_moves() {
    let messages = history(1, 5);
    let cut_before = Head {
        last_context_tokens: 100,
        hard_cap_at: Some(0),
        ..Head::default()
    };
    assert!(request_window(&cut_before, &messages, &policy()).hard_capped);
    let stepped_since = Head {
        summarized_until: 4,
        ..cut_before
    };
    assert!(!request_window(&stepped_since, &messages[4..], &policy()).hard_capped);
}
