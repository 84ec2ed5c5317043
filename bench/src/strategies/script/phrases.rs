//! The customer's messages, one maker per kind of turn, in Portuguese and
//! English, and the dates and times they name; each draws from the script's
//! seeded generator.

use fastrand::Rng;

use super::turn::Lang;

/// A date from 2026-12-01 to 2027-01-31.
pub(super) fn date(rng: &mut Rng) -> String {
    let day = rng.u8(1..=62);
    if day <= 31 {
        format!("2026-12-{day:02}")
    } else {
        format!("2027-01-{:02}", day - 31)
    }
}

/// A date after `after` (or another one when `after` is the last).
pub(super) fn later_date(rng: &mut Rng, after: &str) -> String {
    for _ in 0..16 {
        let candidate = date(rng);
        if candidate.as_str() > after {
            return candidate;
        }
    }
    if after == "2026-12-01" {
        "2026-12-02".to_owned()
    } else {
        "2026-12-01".to_owned()
    }
}

/// A half-hour time the demo tool offers: 09:00 to 18:30.
pub(super) fn time(rng: &mut Rng) -> String {
    let slot = u32::from(rng.u8(0..20));
    let minutes = 9 * 60 + slot * 30;
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

fn pick<'a>(rng: &mut Rng, options: &[&'a str]) -> &'a str {
    rng.choice(options.iter().copied()).unwrap_or_default()
}

const NAMES: &[&str] = &[
    "Ana", "Bruno", "Carla", "Diego", "Elisa", "Fábio", "Gabi", "Hugo",
];

pub(super) fn greeting(rng: &mut Rng, lang: Lang) -> String {
    let name = pick(rng, NAMES);
    let text = match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Oi, boa tarde! Aqui é {name}, tudo bem?",
                "Olá! Sou {name}, cliente de vocês faz tempo.",
                "Bom dia! {name} falando, queria cortar o cabelo essa semana.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Hi there! This is {name}, how are you?",
                "Hello! I'm {name}, I've been coming to your shop for a while.",
                "Good morning, {name} here. I need a haircut soon.",
            ],
        ),
    };
    text.replace("{name}", name)
}

pub(super) fn plant(rng: &mut Rng, lang: Lang, identifier: &str) -> String {
    let text = match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Ah, antes que eu esqueça: meu código de pedido é {id}, daquele kit de pomada que comprei com vocês.",
                "Só pra constar, meu código de pedido é {id} (o kit de barba da loja online).",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Before I forget: my order code is {id}, from the pomade kit I bought from you.",
                "Just so you have it, my order code is {id} (the beard kit from the online shop).",
            ],
        ),
    };
    text.replace("{id}", identifier)
}

pub(super) fn availability(rng: &mut Rng, lang: Lang, dates: &[String]) -> String {
    match (lang, dates) {
        (Lang::Pt, [day]) => pick(
            rng,
            &[
                "Quais horários vocês têm livres em {d1}?",
                "Tem vaga em {d1}? De preferência depois do almoço.",
                "Queria ver a agenda de {d1}, por favor.",
                "Tem horário disponível em {d1}?",
            ],
        )
        .replace("{d1}", day),
        (Lang::Pt, [first, second, ..]) => pick(
            rng,
            &[
                "Quais horários livres vocês têm em {d1} ou em {d2}?",
                "Tem vaga em {d1}? Se não tiver, pode ser em {d2}.",
            ],
        )
        .replace("{d1}", first)
        .replace("{d2}", second),
        (Lang::En, [day]) => pick(
            rng,
            &[
                "Do you have any free slots on {d1}?",
                "What's your availability on {d1}? Afternoon would be best.",
                "Is anything available on {d1}?",
                "Could you check the free times on {d1} for me?",
            ],
        )
        .replace("{d1}", day),
        (Lang::En, [first, second, ..]) => pick(
            rng,
            &[
                "Any free slots on {d1} or {d2}?",
                "What's available on {d1}? Otherwise {d2} works too.",
            ],
        )
        .replace("{d1}", first)
        .replace("{d2}", second),
        (_, []) => String::new(),
    }
}

pub(super) fn booking(rng: &mut Rng, lang: Lang, day: &str, time: &str) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Pode marcar às {t} em {d} pra mim?",
                "Fechado, quero agendar {d} às {t}.",
                "Então reserva {d} às {t}, por favor.",
                "Marque pra mim {d}, {t}. Corte e barba.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Please book {d} at {t} for me.",
                "Great, book me in at {t} on {d}.",
                "Let's do {d} at {t}, can you book it?",
                "I'd like to book {t} on {d}, haircut and beard.",
            ],
        ),
    }
    .replace("{d}", day)
    .replace("{t}", time)
}

pub(super) fn change_of_mind(
    rng: &mut Rng,
    lang: Lang,
    day: &str,
    time: &str,
    old_day: &str,
) -> String {
    // The new date comes first: the stand-in books the first date it finds.
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Mudança de planos: pode marcar {d} às {t} no lugar de {old}?",
                "Desculpa, não vou conseguir ir. Reserve {d} às {t} em vez de {old}, por favor.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Change of plans: can you book {d} at {t} instead of {old}?",
                "Sorry, something came up. Please book {d} at {t} instead, not {old}.",
            ],
        ),
    }
    .replace("{d}", day)
    .replace("{t}", time)
    .replace("{old}", old_day)
}

pub(super) fn preference(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Prefiro ser atendido pelo Marcos, ele já conhece meu cabelo.",
                "Sempre gosto de ir de manhã cedo, antes do trabalho.",
                "Meu corte é sempre degradê baixo com tesoura em cima.",
                "Pode me chamar de Beto, é como todo mundo me chama.",
                "Prefiro que me avisem pelo WhatsApp, não por e-mail.",
                "Sou alérgico a alguns produtos com perfume forte, então prefiro sem.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "I'd rather have Marcos cut my hair, he knows what I like.",
                "Mornings suit me best, before work.",
                "I always get a low fade with scissors on top.",
                "Please call me Rob, everyone does.",
                "I prefer reminders by text message rather than e-mail.",
                "I'd rather skip strongly scented products if you don't mind.",
            ],
        ),
    }
    .to_owned()
}

pub(super) fn question(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Vocês aceitam Pix ou só cartão?",
                "Quanto custa corte e barba juntos?",
                "Quanto tempo leva a barba completa?",
                "Tem estacionamento perto da barbearia?",
                "Vocês vendem aquela pomada modeladora que usaram em mim?",
                "Se eu atrasar uns dez minutos, ainda dá pra ser atendido?",
                "Vocês fazem pezinho sem precisar cortar tudo?",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Do you take cards or only cash?",
                "How much is a haircut plus beard trim?",
                "How long does a full beard service take?",
                "Is there parking near the shop?",
                "Do you sell the styling pomade you used on me last time?",
                "If I'm ten minutes late, will you still see me?",
                "Do you do neck line-ups without a full cut?",
            ],
        ),
    }
    .to_owned()
}

pub(super) fn small_talk(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Valeu!",
                "Perfeito, obrigado!",
                "Show, combinado.",
                "Beleza 👍",
                "Obrigado pela ajuda, de verdade.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Thanks!",
                "Perfect, thank you.",
                "Great, sounds good.",
                "Cool 👍",
                "Thanks a lot for the help.",
            ],
        ),
    }
    .to_owned()
}

/// Sentences a long message is made of: three to five, in the pool's order.
const LONG_PT: &[&str] = &[
    "Olha, da última vez o corte ficou um pouco mais curto do que eu pedi dos lados.",
    "Não é reclamação grave, mas eu tinha falado que queria disfarçar só até a metade e acabou subindo bastante.",
    "Dessa vez queria que o barbeiro perguntasse antes de passar a máquina, e mostrasse no espelho como está ficando.",
    "Semana que vem é o casamento do meu irmão e eu vou ser padrinho, então queria caprichar no cabelo e na barba.",
    "O terno é azul-marinho e a cerimônia é de tarde, ao ar livre.",
    "Vocês acham que vale fazer a barba no mesmo dia ou é melhor um dia antes pra pele não ficar irritada?",
    "Da última vez ficou um pouco vermelho no pescoço depois da navalha.",
    "Meu filho de oito anos também quer cortar, ele tem um pouco de medo da máquina.",
    "Estou deixando a barba crescer há dois meses e queria só dar forma, sem tirar o comprimento.",
    "No mais sempre fui muito bem atendido, o café é ótimo e o ambiente é tranquilo.",
    "Um amigo me indicou vocês e falou muito bem do atendimento.",
    "Trabalho perto daí, então o que for mais fácil pra vocês funciona pra mim.",
];

/// English sentences of a long message.
const LONG_EN: &[&str] = &[
    "So last time the sides came out a bit shorter than I asked.",
    "Not a big complaint, but I had said I wanted the fade to stop halfway up and it went quite high.",
    "This time I'd like the barber to check with me before using the clippers, and show me in the mirror as it goes.",
    "My brother's wedding is next week and I'm the best man, so I want to look sharp.",
    "The suit is navy and the ceremony is in the afternoon, outdoors.",
    "Should I get the shave on the day itself or the day before so my skin isn't irritated?",
    "Last time my neck got a bit red after the straight razor.",
    "My eight-year-old son wants a cut too, he's a little scared of the clippers.",
    "I've been growing my beard for two months and only want it shaped, not shortened.",
    "Otherwise I've always been treated really well, the coffee is great and the place is relaxed.",
    "A friend recommended you and spoke very highly of the service.",
    "I work nearby, so whatever is easiest for you works for me.",
];

pub(super) fn long_message(rng: &mut Rng, lang: Lang) -> String {
    let pool = match lang {
        Lang::Pt => LONG_PT,
        Lang::En => LONG_EN,
    };
    let count = rng.usize(3..=5);
    let mut picked: Vec<usize> = Vec::with_capacity(count);
    while picked.len() < count {
        let index = rng.usize(0..pool.len());
        if !picked.contains(&index) {
            picked.push(index);
        }
    }
    picked.sort_unstable();
    picked
        .iter()
        .map(|&i| pool[i])
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn recall(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Desculpa, qual era mesmo o meu código de pedido? Preciso dele pra nota fiscal.",
                "Me lembra o meu código de pedido? Perdi o e-mail da loja.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Sorry, what was my order code again? I need it for the invoice.",
                "Can you remind me of my order code? I lost the shop's e-mail.",
            ],
        ),
    }
    .to_owned()
}

pub(super) fn farewell(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(rng, &["Obrigado, até mais!", "Valeu, tchau!"]),
        Lang::En => pick(rng, &["Thanks, see you!", "Cheers, bye!"]),
    }
    .to_owned()
}
