//! The health terms a fact may not hold: the documented lists (stems, whole words,
//! exceptions) and the matching over the value's words, lowercased and with
//! Portuguese accents stripped (see [`crate::plan::facts`] for what is left out
//! and why).

/// Word stems that mark health data when a word of the value starts with one of
/// them. Matched against the value lowercased, with Portuguese accents stripped.
/// See the module documentation for what is left out and why.
pub const HEALTH_TERM_STEMS: &[&str] = &[
    // Conditions and diagnoses.
    "diagnos",
    "doenca",
    "disease",
    "diabet",
    "cancer",
    "tumor",
    "hipertens",
    "hypertens",
    "colesterol",
    "cholesterol",
    "asma",
    "asthma",
    "epilep",
    "hepatit",
    "tubercul",
    "sindrome",
    "syndrome",
    "infarto",
    "covid",
    "dengue",
    "enxaqueca",
    "migraine",
    "alzheimer",
    "parkinson",
    "obes",
    // Mental health and neurodivergence.
    "depress",
    "deprimid",
    "antidepress",
    "ansiedade",
    "anxiety",
    "bipolar",
    "esquizofren",
    "schizophren",
    "autis",
    "psiquiatr",
    "psychiatr",
    // Pregnancy.
    "gravid",
    "gestante",
    "gestac",
    "pregnan",
    // Allergies.
    "alerg",
    "allerg",
    // Treatments and medicines.
    "medicament",
    "medication",
    "remedio",
    "insulin",
    "quimioterap",
    "chemotherap",
    "radioterap",
    "radiotherap",
    "cirurgi",
    "surgery",
    "surgical",
    "psicoterap",
    "psychotherap",
    "fisioterap",
    "physiotherap",
];

/// Short or ambiguous health terms that match whole words only (`hiv` but not
/// `hive`). Matched like [`HEALTH_TERM_STEMS`].
pub const HEALTH_TERM_WORDS: &[&str] = &["hiv", "aids", "tdah", "adhd", "avc", "quimio"];

/// Ordinary words that start like a stem of [`HEALTH_TERM_STEMS`] and are not health
/// data: `depressa` (quickly), `gravidade` (gravity, severity), `tubérculo` (a root
/// vegetable). Written lowercased and without accents.
pub const HEALTH_TERM_EXCEPTIONS: &[&str] = &[
    "depressa",
    "gravidade",
    "gravidades",
    "tuberculo",
    "tuberculos",
];

/// The first term of [`HEALTH_TERM_WORDS`] or [`HEALTH_TERM_STEMS`] found in `text`,
/// reading its words in order; see the module documentation for the matching rules.
pub fn find_health_term(text: &str) -> Option<&'static str> {
    let folded = fold(text);
    folded
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty() && !HEALTH_TERM_EXCEPTIONS.contains(word))
        .find_map(|word| {
            HEALTH_TERM_WORDS
                .iter()
                .find(|term| **term == word)
                .or_else(|| {
                    HEALTH_TERM_STEMS
                        .iter()
                        .find(|stem| word.starts_with(**stem))
                })
                .copied()
        })
}

/// Lowercases and strips Portuguese accents, precomposed or combining.
fn fold(text: &str) -> String {
    text.chars()
        .flat_map(char::to_lowercase)
        // Combining marks (decomposed input such as `e` + U+0301) would otherwise
        // split a word in two.
        .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ã' | 'ä' => 'a',
            'é' | 'ê' | 'è' | 'ë' => 'e',
            'í' | 'ì' | 'î' | 'ï' => 'i',
            'ó' | 'ô' | 'õ' | 'ö' | 'ò' => 'o',
            'ú' | 'ü' | 'ù' | 'û' => 'u',
            'ç' => 'c',
            other => other,
        })
        .collect()
}
