//! Deterministic GitHub-issues-like inputs (the shape of the corpus jq, gojq and jaq were first timed on):
//! url fields, ids, a title, a user object, labels, state, reactions with a float, and a body
//! with a code fence and non-ASCII text.

/// xorshift64*: a small, fixed PRNG so every run and machine gets the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "parser", "crash", "timeout", "memory", "worker", "socket", "filter", "output", "input",
    "daemon", "limit", "stack", "unicode", "naïve", "café", "résumé", "deadline", "queue",
];
const LABELS: &[(&str, &str)] = &[
    ("bug", "d73a4a"),
    ("enhancement", "a2eeef"),
    ("documentation", "0075ca"),
    ("question", "d876e3"),
    ("good first issue", "7057ff"),
    ("performance", "fbca04"),
];
const USERS: &[&str] = &[
    "octocat", "hubot", "monalisa", "defunkt", "mojombo", "pjhyett",
];

fn sentence(rng: &mut Rng, words: u64) -> String {
    (0..words)
        .map(|_| rng.pick(WORDS))
        .collect::<Vec<_>>()
        .join(" ")
}

fn issue(rng: &mut Rng, n: u64) -> String {
    let number = 1000 + n;
    let user = USERS[rng.below(USERS.len() as u64) as usize];
    let labels: Vec<String> = (0..rng.below(3))
        .map(|_| {
            let (name, color) = LABELS[rng.below(LABELS.len() as u64) as usize];
            format!(
                r#"{{"id":{},"name":"{name}","color":"{color}","default":false,"description":"{}"}}"#,
                200 + rng.below(50),
                sentence(rng, 4)
            )
        })
        .collect();
    let body = format!(
        "{}\\n\\n```\\njqjail '.items[{}]' input.json\\n```\\n\\n{}",
        sentence(rng, 40),
        rng.below(100),
        sentence(rng, 60)
    );
    format!(
        concat!(
            r#"{{"url":"https://api.example.com/repos/acme/widgets/issues/{number}","#,
            r#""repository_url":"https://api.example.com/repos/acme/widgets","#,
            r#""html_url":"https://example.com/acme/widgets/issues/{number}","#,
            r#""id":{id},"number":{number},"title":"{title}","#,
            r#""user":{{"login":"{user}","id":{uid},"type":"User","site_admin":false}},"#,
            r#""labels":[{labels}],"state":"{state}","locked":false,"comments":{comments},"#,
            r#""created_at":"2026-0{month}-1{day}T12:00:00Z","#,
            r#""reactions":{{"total_count":{react},"+1":{plus},"heart":0,"score":{score}}},"#,
            r#""body":"{body}"}}"#
        ),
        number = number,
        id = 2_000_000_000 + number * 13,
        title = sentence(rng, 6),
        user = user,
        uid = 100 + rng.below(900),
        labels = labels.join(","),
        state = if rng.below(3) == 0 { "closed" } else { "open" },
        comments = rng.below(50),
        month = 1 + rng.below(9),
        day = rng.below(10),
        react = rng.below(20),
        plus = rng.below(10),
        score = rng.below(1000) as f64 / 10.0 + 0.5,
        body = body,
    )
}

/// An array of issues whose text is as close to `target` bytes as possible without passing it.
pub(crate) fn issues(target: usize) -> Vec<u8> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = String::from("[");
    let mut n = 0;
    loop {
        let next = issue(&mut rng, n);
        let sep = usize::from(n > 0);
        if out.len() + sep + next.len() + 1 > target && n > 0 {
            break;
        }
        if n > 0 {
            out.push(',');
        }
        out.push_str(&next);
        n += 1;
    }
    out.push(']');
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    #[test]
    fn inputs_are_valid_deterministic_and_fit() {
        let a = super::issues(1 << 20);
        assert_eq!(a, super::issues(1 << 20));
        assert!(a.len() <= 1 << 20 && a.len() > (1 << 20) - 4096);
        let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
        assert!(v.as_array().unwrap().len() > 100);
    }
}
