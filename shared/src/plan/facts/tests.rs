use super::documents::all_same;
use super::*;
use proptest::prelude::*;

fn key(name: &str) -> FactKey {
    FactKey::parse(name).unwrap()
}

fn policy() -> FactPolicy {
    FactPolicy::new([key("preferred_time"), key("note"), key("language")])
}

fn check(value: &str) -> Result<(), FactRefusal> {
    policy().check(&key("note"), value)
}

fn digits(text: &str) -> Vec<u8> {
    text.bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect()
}

fn to_text(digits: &[u8]) -> String {
    digits.iter().map(|d| char::from(b'0' + d)).collect()
}

/// CPF check digits by the textbook formula (11 minus the remainder, 10 and 11
/// becoming 0), written independently of the code under test.
fn with_cpf_check_digits(nine: &[u8]) -> Vec<u8> {
    let mut all = nine.to_vec();
    for len in [9, 10] {
        let sum: usize = all
            .iter()
            .enumerate()
            .map(|(i, &d)| usize::from(d) * (len + 1 - i))
            .sum();
        let dv = 11 - sum % 11;
        all.push(if dv >= 10 { 0 } else { dv as u8 });
    }
    all
}

fn with_cnpj_check_digits(twelve: &[u8]) -> Vec<u8> {
    let mut all = twelve.to_vec();
    for len in [12, 13] {
        // Weights run 2..=9 cyclically from the right.
        let sum: usize = all
            .iter()
            .rev()
            .enumerate()
            .map(|(i, &d)| usize::from(d) * (2 + i % 8))
            .sum();
        let rest = sum % 11;
        all.push(if rest < 2 { 0 } else { (11 - rest) as u8 });
        assert_eq!(all.len(), len + 1);
    }
    all
}

fn with_luhn_digit(body: &[u8]) -> Vec<u8> {
    let mut all = body.to_vec();
    all.push(0);
    let sum: u32 = all
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                (d * 2) / 10 + (d * 2) % 10
            } else {
                d
            }
        })
        .sum();
    *all.last_mut().unwrap() = ((10 - sum % 10) % 10) as u8;
    all
}

fn punctuated_cpf(d: &[u8]) -> String {
    let t = to_text(d);
    format!("{}.{}.{}-{}", &t[0..3], &t[3..6], &t[6..9], &t[9..11])
}

#[test]
fn cpf_validation_accepts_the_public_example_and_computed_numbers() {
    assert!(is_valid_cpf(&digits("529.982.247-25")));
    let computed = with_cpf_check_digits(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(to_text(&computed), "12345678909");
    assert!(is_valid_cpf(&computed));
}

#[test]
fn cpf_validation_refuses_wrong_check_digits_repeated_digits_and_wrong_lengths() {
    assert!(!is_valid_cpf(&digits("529.982.247-24")));
    assert!(!is_valid_cpf(&digits("529.982.247-15")));
    for d in 0..=9u8 {
        assert!(!is_valid_cpf(&[d; 11]), "{d} repeated");
    }
    assert!(!is_valid_cpf(&digits("5299822472")));
    assert!(!is_valid_cpf(&digits("529982247250")));
    assert!(!is_valid_cpf(&[]));
    let mut out_of_range = digits("52998224725");
    out_of_range[0] = 15;
    assert!(!is_valid_cpf(&out_of_range));
}

#[test]
fn cnpj_validation_accepts_the_public_example_and_computed_numbers() {
    assert!(is_valid_cnpj(&digits("11.222.333/0001-81")));
    let computed = with_cnpj_check_digits(&[9, 8, 7, 6, 5, 4, 3, 2, 0, 0, 0, 1]);
    assert!(is_valid_cnpj(&computed));
}

#[test]
fn cnpj_validation_refuses_wrong_check_digits_repeated_digits_and_wrong_lengths() {
    assert!(!is_valid_cnpj(&digits("11.222.333/0001-82")));
    assert!(!is_valid_cnpj(&digits("11.222.333/0001-91")));
    for d in 0..=9u8 {
        assert!(!is_valid_cnpj(&[d; 14]), "{d} repeated");
    }
    assert!(!is_valid_cnpj(&digits("1122233300018")));
    assert!(!is_valid_cnpj(&digits("52998224725")));
}

#[test]
fn luhn_accepts_well_known_test_cards_and_refuses_altered_ones() {
    for card in ["4111111111111111", "5555555555554444", "378282246310005"] {
        assert!(passes_luhn(&digits(card)), "{card}");
    }
    for card in ["4111111111111112", "5555555555554445", "378282246310006"] {
        assert!(!passes_luhn(&digits(card)), "{card}");
    }
    assert!(passes_luhn(&digits("79927398713")));
    assert!(!passes_luhn(&[]));
    assert!(!passes_luhn(&[10, 8]));
}

#[test]
fn refuses_a_cpf_with_or_without_punctuation() {
    for value in [
        "529.982.247-25",
        "52998224725",
        "CPF: 529.982.247-25 ok",
        "cpf 529 982 247 25",
        "meu cpf é 52998224725.",
        "doc529.982.247-25x",
    ] {
        assert_eq!(check(value), Err(FactRefusal::Cpf), "{value}");
    }
}

#[test]
fn refuses_a_cnpj_with_or_without_punctuation() {
    for value in [
        "11.222.333/0001-81",
        "11222333000181",
        "empresa CNPJ 11.222.333/0001-81",
    ] {
        assert_eq!(check(value), Err(FactRefusal::Cnpj), "{value}");
    }
}

#[test]
fn refuses_an_alphanumeric_cnpj_with_or_without_punctuation() {
    // The Receita Federal's example of the format issued since July 2026.
    for value in [
        "12.ABC.345/01DE-35",
        "12ABC34501DE35",
        "empresa CNPJ 12.ABC.345/01DE-35 ok",
        "cnpj 12abc34501de35",
    ] {
        assert_eq!(check(value), Err(FactRefusal::Cnpj), "{value}");
    }
    // A wrong check digit, letters in the check digits, or a longer run pass.
    for value in [
        "12.ABC.345/01DE-36",
        "12ABC34501DEA5",
        "X12ABC34501DE35",
        "reference ABCDEFGHIJKLMN",
    ] {
        assert_eq!(check(value), Ok(()), "{value}");
    }
}

#[test]
fn refuses_card_numbers_grouped_or_embedded_in_text() {
    for value in [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111111111111111",
        "cartão4111111111111111",
        "card 5555 5555 5555 4444 exp 12/30",
        "amex 3782 822463 10005",
        "turma 3 4111 1111 1111 1111",
    ] {
        assert_eq!(check(value), Err(FactRefusal::CardNumber), "{value}");
    }
}

#[test]
fn lets_short_numbers_times_and_dates_pass() {
    for value in [
        "3 kids",
        "room 12",
        "14:30",
        "2026-12-01",
        "2026-12-01 14:30",
        "01/12/2026 às 9h",
        "R$ 150,00",
        "size 38.5",
        "(11) 3456-7890",
    ] {
        assert_eq!(check(value), Ok(()), "{value}");
    }
}

#[test]
fn phone_numbers_pass_unless_they_happen_to_pass_a_check() {
    // Both were checked by hand: the first passes no check, the second's 13 digits
    // pass Luhn, a false positive the module accepts as the safe side.
    assert_eq!(check("+55 11 98765-4321"), Ok(()));
    assert_eq!(check("+55 11 98765-4325"), Err(FactRefusal::CardNumber));
}

#[test]
fn a_cpf_wins_over_a_card_found_in_the_same_value() {
    assert_eq!(
        check("4111111111111111 e 52998224725"),
        Err(FactRefusal::Cpf)
    );
    assert_eq!(
        check("4111111111111111 e 11222333000181"),
        Err(FactRefusal::Cnpj)
    );
}

#[test]
fn refuses_a_disallowed_key_before_anything_else() {
    let refusal = policy()
        .check(&key("cpf"), "529.982.247-25\nDiabético")
        .unwrap_err();
    assert_eq!(
        refusal,
        FactRefusal::KeyNotAllowed {
            key: "cpf".to_owned()
        }
    );
    assert_eq!(
        refusal.to_string(),
        "fact key `cpf` is not in the tenant's allowed keys"
    );
    let nothing_allowed = FactPolicy::new([]);
    assert!(matches!(
        nothing_allowed.check(&key("note"), "ok"),
        Err(FactRefusal::KeyNotAllowed { .. })
    ));
}

#[test]
fn refuses_empty_and_whitespace_only_values() {
    for value in ["", " ", "   \t ", "\u{a0}"] {
        assert_eq!(check(value), Err(FactRefusal::EmptyValue), "{value:?}");
    }
}

#[test]
fn refuses_control_characters_including_line_breaks() {
    for value in [
        "line one\nline two",
        "tab\there",
        "nul\u{0}",
        "bell\u{7}",
        "x\r",
    ] {
        assert_eq!(
            check(value),
            Err(FactRefusal::ControlCharacters),
            "{value:?}"
        );
    }
}

#[test]
fn checks_run_in_the_documented_order() {
    let mut short = policy();
    short.max_value_chars = 10;
    let note = key("note");
    assert_eq!(
        short.check(&note, "a very long value\nwith two lines"),
        Err(FactRefusal::ControlCharacters)
    );
    assert_eq!(
        short.check(&note, "CPF 529.982.247-25"),
        Err(FactRefusal::TooLong { chars: 18, max: 10 })
    );
    assert_eq!(check("diabetes, cpf 529.982.247-25"), Err(FactRefusal::Cpf));
}

#[test]
fn length_counts_characters_not_bytes() {
    let policy = policy();
    assert_eq!(policy.max_value_chars, FactPolicy::DEFAULT_MAX_VALUE_CHARS);
    let note = key("note");
    assert_eq!(policy.check(&note, &"é".repeat(200)), Ok(()));
    assert_eq!(
        policy.check(&note, &"é".repeat(201)),
        Err(FactRefusal::TooLong {
            chars: 201,
            max: 200
        })
    );
}

#[test]
fn finds_health_terms_in_portuguese_with_or_without_accents() {
    for (value, term) in [
        ("Diabético tipo 2", "diabet"),
        ("diabetico tipo 2", "diabet"),
        ("está grávida", "gravid"),
        ("GRÁVIDA de 5 meses", "gravid"),
        ("tem alergia a dipirona", "alerg"),
        ("é alérgica a camarão", "alerg"),
        ("toma remédio para pressão", "remedio"),
        ("faz quimio às terças", "quimio"),
        ("teve um AVC", "avc"),
        ("hipertensão", "hipertens"),
        ("criança com TDAH", "tdah"),
        ("doença celíaca", "doenca"),
        ("sessão de fisioterapia", "fisioterap"),
    ] {
        assert_eq!(find_health_term(value), Some(term), "{value}");
        assert_eq!(
            check(value),
            Err(FactRefusal::HealthData { term }),
            "{value}"
        );
    }
}

#[test]
fn finds_health_terms_written_with_combining_accents() {
    assert_eq!(find_health_term("Diabe\u{301}tico"), Some("diabet"));
    assert_eq!(find_health_term("gra\u{301}vida"), Some("gravid"));
}

#[test]
fn finds_health_terms_in_english() {
    for (value, term) in [
        ("diagnosed with asthma", "diagnos"),
        ("asthmatic", "asthma"),
        ("allergic to peanuts", "allerg"),
        ("Pregnant, due in May", "pregnan"),
        ("HIV positive", "hiv"),
        ("recovering from surgery", "surgery"),
        ("takes insulin", "insulin"),
    ] {
        assert_eq!(find_health_term(value), Some(term), "{value}");
    }
}

#[test]
fn lets_ordinary_values_pass() {
    for value in [
        "prefers mornings",
        "Dra. Ana",
        "cancelar às 14h",
        "cancel on rainy days",
        "corte de cabelo",
        "haircut on Fridays",
        "English",
        "vegetariana",
        "venha depressa",
        "gravidade baixa",
        "gosta de tubérculos assados",
        "médico de família: Dr. Lima",
        "hair therapy",
        "anxious to start",
        "teaching assistant",
        "first aid kit",
        "price surge",
        "swimming, favourite stroke: crawl",
        "hive of bees",
        "10am IST",
    ] {
        assert_eq!(check(value), Ok(()), "{value}");
    }
}

#[test]
fn short_terms_match_only_whole_words() {
    assert_eq!(find_health_term("hivemind"), None);
    assert_eq!(find_health_term("avcx"), None);
    assert_eq!(find_health_term("quimica"), None);
    assert_eq!(find_health_term("aids"), Some("aids"));
    assert_eq!(find_health_term("teste-hiv"), Some("hiv"));
}

#[test]
fn the_health_refusal_names_the_term_not_the_value() {
    let refusal = check("Diabético tipo 2").unwrap_err();
    assert_eq!(refusal.code(), "health_data");
    let message = refusal.to_string();
    assert!(message.contains("`diabet`"), "{message}");
    assert!(!message.to_lowercase().contains("diabético"), "{message}");
}

#[test]
fn every_listed_term_is_lowercase_ascii_without_accents() {
    let lists = [HEALTH_TERM_STEMS, HEALTH_TERM_WORDS, HEALTH_TERM_EXCEPTIONS];
    for term in lists.iter().flat_map(|list| list.iter()) {
        assert!(
            !term.is_empty() && term.bytes().all(|b| b.is_ascii_lowercase()),
            "{term}"
        );
    }
    for exception in HEALTH_TERM_EXCEPTIONS {
        assert!(
            HEALTH_TERM_STEMS
                .iter()
                .any(|stem| exception.starts_with(stem)),
            "{exception} excepts no stem"
        );
    }
}

#[test]
fn refusals_have_stable_codes_and_readable_messages() {
    let all = [
        (
            FactRefusal::KeyNotAllowed { key: "x".into() },
            "key_not_allowed",
        ),
        (FactRefusal::EmptyValue, "empty_value"),
        (FactRefusal::TooLong { chars: 3, max: 2 }, "too_long"),
        (FactRefusal::ControlCharacters, "control_characters"),
        (FactRefusal::Cpf, "cpf"),
        (FactRefusal::Cnpj, "cnpj"),
        (FactRefusal::CardNumber, "card_number"),
        (FactRefusal::HealthData { term: "asma" }, "health_data"),
    ];
    for (refusal, code) in all {
        assert_eq!(refusal.code(), code);
        assert!(!refusal.to_string().is_empty());
    }
    assert_eq!(
        FactRefusal::Cpf.to_string(),
        "value holds a CPF (Brazilian taxpayer id); personal documents are not stored as facts"
    );
    assert_eq!(
        FactRefusal::CardNumber.to_string(),
        "value holds a payment card number (passes the Luhn check); \
         card numbers are not stored as facts"
    );
    assert_eq!(
        FactRefusal::TooLong {
            chars: 201,
            max: 200
        }
        .to_string(),
        "fact value has 201 characters, more than the maximum of 200"
    );
}

fn nine_digits() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0..=9u8, 9).prop_filter("not one repeated digit", |d| !all_same(d))
}

fn cpf_text() -> impl Strategy<Value = (Vec<u8>, String)> {
    (nine_digits(), any::<bool>()).prop_map(|(nine, punctuated)| {
        let cpf = with_cpf_check_digits(&nine);
        let text = if punctuated {
            punctuated_cpf(&cpf)
        } else {
            to_text(&cpf)
        };
        (cpf, text)
    })
}

/// How another system may write one digit: its form (ASCII, full-width or
/// mathematical bold, all read back as ASCII by NFKC) and an invisible format
/// character after it, or none (zero-width space, word joiner, byte order
/// mark, soft hyphen).
fn digit_disguise() -> impl Strategy<Value = (u32, &'static str)> {
    (
        prop::sample::select(vec![0x30, 0xFF10, 0x1D7CE]),
        prop::sample::select(vec!["", "", "\u{200B}", "\u{2060}", "\u{FEFF}", "\u{00AD}"]),
    )
}

/// What another system may put between two groups of a number: the ASCII
/// separators, dashes (hyphen, non-breaking hyphen, en and em dash, minus
/// sign, full-width hyphen-minus), spaces (no-break, thin) and a dash between
/// spaces.
fn disguised_separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        ".",
        "-",
        "/",
        " ",
        "\u{2010}",
        "\u{2011}",
        "\u{2013}",
        "\u{2014}",
        "\u{2212}",
        "\u{FF0D}",
        "\u{00A0}",
        "\u{2009}",
        " - ",
        " \u{2013} ",
        "\u{00A0}-\u{00A0}",
    ])
}

/// `digits` written in groups of `sizes`, each digit and separator disguised.
fn disguised(digits: Vec<u8>, sizes: &'static [usize]) -> impl Strategy<Value = String> {
    let count = digits.len();
    (
        prop::collection::vec(digit_disguise(), count),
        prop::collection::vec(disguised_separator(), sizes.len()),
    )
        .prop_map(move |(disguises, separators)| {
            let mut text = String::new();
            let mut at = 0;
            for (size, separator) in sizes.iter().zip(&separators) {
                if at > 0 {
                    text.push_str(separator);
                }
                for (digit, (zero, invisible)) in digits[at..at + size].iter().zip(&disguises[at..])
                {
                    text.extend(char::from_u32(zero + u32::from(*digit)));
                    text.push_str(invisible);
                }
                at += size;
            }
            text
        })
}

fn disguised_cpf() -> impl Strategy<Value = String> {
    nine_digits().prop_flat_map(|nine| {
        let cpf = with_cpf_check_digits(&nine);
        disguised(cpf, &[3, 3, 3, 2])
    })
}

fn disguised_cnpj() -> impl Strategy<Value = String> {
    prop::collection::vec(0..=9u8, 12)
        .prop_filter("not one repeated digit", |d| !all_same(d))
        .prop_flat_map(|twelve| disguised(with_cnpj_check_digits(&twelve), &[2, 3, 3, 4, 2]))
}

fn disguised_card() -> impl Strategy<Value = String> {
    prop::collection::vec(0..=9u8, 15)
        .prop_flat_map(|body| disguised(with_luhn_digit(&body), &[4, 4, 4, 4]))
}

/// The document scan finds `expected` in `value`; the policy refuses it, as
/// that document when nothing invisible is in it (an invisible character is
/// refused first, as a control character).
fn found_and_refused(value: &str, expected: FactRefusal) -> Result<(), TestCaseError> {
    let scanned = crate::text::for_scan(value);
    prop_assert_eq!(
        find_document_number(&scanned),
        Some(expected.clone()),
        "{:?}",
        value
    );
    let refusal = check(value);
    if value.chars().any(crate::text::breaks_structure) {
        prop_assert_eq!(refusal, Err(FactRefusal::ControlCharacters), "{:?}", value);
    } else {
        prop_assert_eq!(refusal, Err(expected), "{:?}", value);
    }
    Ok(())
}

proptest! {
    #[test]
    fn a_cpf_written_with_look_alike_digits_dashes_or_invisible_characters_is_refused(
        text in disguised_cpf(),
        before in "[a-zA-Zçãé :,]{0,12}",
    ) {
        found_and_refused(&format!("{before}{text}"), FactRefusal::Cpf)?;
    }

    #[test]
    fn a_cnpj_written_with_look_alike_digits_dashes_or_invisible_characters_is_refused(
        text in disguised_cnpj(),
        after in "[a-zA-Z :,]{0,12}",
    ) {
        found_and_refused(&format!("cnpj {text}{after}"), FactRefusal::Cnpj)?;
    }

    #[test]
    fn a_card_written_with_look_alike_digits_dashes_or_invisible_characters_is_refused(
        text in disguised_card(),
    ) {
        found_and_refused(&format!("card {text} ok"), FactRefusal::CardNumber)?;
    }

    #[test]
    fn a_value_with_a_line_or_paragraph_separator_or_a_format_character_is_refused(
        before in "[a-zA-Z :]{1,12}",
        breaker in prop::sample::select(vec![
            '\u{2028}', '\u{2029}', '\u{0085}', '\u{000B}', '\u{200B}', '\u{202E}',
            '\u{2066}', '\u{FEFF}', '\u{00AD}', '\u{061C}',
        ]),
        after in "[a-zA-Z :]{1,12}",
    ) {
        let value = format!("{before}{breaker}- vip: {after}");
        prop_assert_eq!(check(&value), Err(FactRefusal::ControlCharacters));
    }
}

#[test]
fn a_name_written_with_joiners_is_one_line_and_passes() {
    assert_eq!(check("Ana 👩\u{200D}💼"), Ok(()));
    assert_eq!(check("می\u{200C}خواهم"), Ok(()));
}

proptest! {
    #[test]
    fn any_valid_cpf_in_surrounding_letters_is_refused(
        (cpf, text) in cpf_text(),
        before in "[a-zA-Zçãé :,]{0,12}",
        after in "[a-zA-Zçãé :,]{0,12}",
    ) {
        prop_assert!(is_valid_cpf(&cpf));
        let value = format!("{before}{text}{after}");
        prop_assert_eq!(check(&value), Err(FactRefusal::Cpf));
    }

    #[test]
    fn any_luhn_valid_sixteen_digit_card_in_surrounding_letters_is_refused(
        body in prop::collection::vec(0..=9u8, 15),
        layout in 0..3u8,
        before in "[a-zA-Z :]{0,12}",
        after in "[a-zA-Z :]{0,12}",
    ) {
        let card = with_luhn_digit(&body);
        prop_assert!(passes_luhn(&card));
        let plain = to_text(&card);
        let text = match layout {
            0 => plain,
            separator => {
                let separator = if separator == 1 { " " } else { "-" };
                [&plain[0..4], &plain[4..8], &plain[8..12], &plain[12..16]].join(separator)
            }
        };
        let value = format!("{before}{text}{after}");
        prop_assert_eq!(check(&value), Err(FactRefusal::CardNumber));
    }

    #[test]
    fn no_refusal_message_quotes_the_value(
        (cpf, text) in cpf_text(),
        before in "[a-zA-Z \n]{0,8}",
        after in "[a-zA-Z ]{0,8}",
        key_name in prop::sample::select(vec!["note", "language", "cpf"]),
        max in 4..40usize,
    ) {
        let value = format!("{before}{text}{after}");
        prop_assume!(value.chars().count() > 3);
        let mut policy = policy();
        policy.max_value_chars = max;
        let refusal = policy.check(&key(key_name), &value);
        prop_assert!(refusal.is_err());
        if let Err(refusal) = refusal {
            let message = refusal.to_string();
            let debug = format!("{refusal:?}");
            prop_assert!(!message.contains(&value), "{}", message);
            prop_assert!(!message.contains(&text), "{}", message);
            prop_assert!(!message.contains(&to_text(&cpf)), "{}", message);
            prop_assert!(!debug.contains(&to_text(&cpf)), "{}", debug);
        }
    }
}
