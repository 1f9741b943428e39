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

/// A Kubernetes pod list (`kubectl get pods -o json`, indented by two) of about `target`
/// bytes: `items`, then `kind` and `metadata`.
pub(crate) fn pods(target: usize) -> Vec<u8> {
    use serde_json::json;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut items = Vec::new();
    let mut size = 0;
    while size < target {
        let n = items.len();
        let app = rng.pick(&["api", "web", "worker", "cache", "queue"]);
        let hash = format!("{:x}", rng.next() % 0xff_ffff);
        let containers: Vec<_> = (0..1 + rng.below(3))
            .map(|c| {
                json!({
                    "name": format!("{app}-{c}"),
                    "image": format!("registry.example.com/{app}:1.{}.{}", rng.below(20), rng.below(10)),
                    "ports": [{"containerPort": 8000 + rng.below(100), "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
                })
            })
            .collect();
        let statuses: Vec<_> = containers
            .iter()
            .map(|c| json!({"name": c["name"], "ready": rng.below(5) != 0, "restartCount": rng.below(4)}))
            .collect();
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": format!("{app}-{hash}-{n:05}"),
                "namespace": rng.pick(&["default", "prod", "staging"]),
                "uid": format!("{:016x}-{:04x}", rng.next(), n),
                "labels": {"app": app, "pod-template-hash": hash},
                "creationTimestamp": format!("2026-11-{:02}T{:02}:00:00Z", 1 + rng.below(28), rng.below(24))
            },
            "spec": {"containers": containers, "nodeName": format!("node-{}", rng.below(40))},
            "status": {"phase": rng.pick(&["Running", "Running", "Pending", "Failed"]), "podIP": format!("10.{}.{}.{}", rng.below(255), rng.below(255), rng.below(255)), "containerStatuses": statuses}
        });
        size += pod.to_string().len() * 2;
        items.push(pod);
    }
    let list = json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}});
    serde_json::to_vec_pretty(&list).unwrap_or_default()
}

/// A search engine's answer (Elasticsearch's shape) of about `target` bytes: hits nested under
/// `hits.hits`, each with its `_source`, then aggregations.
pub(crate) fn search(target: usize) -> Vec<u8> {
    use serde_json::json;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c16);
    let mut hits = Vec::new();
    let mut size = 0;
    while size < target {
        let n = hits.len();
        let hit = json!({
            "_index": "logs-2026.12",
            "_id": format!("{:x}", rng.next()),
            "_score": (1000 - n.min(999)) as f64 / 100.0,
            "_source": {
                "message": sentence(&mut rng, 12),
                "level": rng.pick(&["info", "warn", "error"]),
                "user": {"name": rng.pick(USERS), "geo": {"country": rng.pick(&["FR", "DE", "JP", "BR"]), "city": rng.pick(WORDS)}},
                "tags": (0..rng.below(4)).map(|_| rng.pick(WORDS)).collect::<Vec<_>>(),
                "took_ms": rng.below(5000)
            }
        });
        size += hit.to_string().len();
        hits.push(hit);
    }
    let total = hits.len();
    let answer = json!({
        "took": 12,
        "timed_out": false,
        "hits": {"total": {"value": total, "relation": "eq"}, "max_score": 10.0, "hits": hits},
        "aggregations": {"by_level": {"buckets": [{"key": "info", "doc_count": total / 2}, {"key": "warn", "doc_count": total / 3}]}}
    });
    serde_json::to_vec(&answer).unwrap_or_default()
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
        for (doc, main) in [
            (super::pods(1 << 20), "/items"),
            (super::search(1 << 20), "/hits/hits"),
        ] {
            let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
            assert!(v.pointer(main).unwrap().as_array().unwrap().len() > 100);
            assert!(
                doc.len() > (1 << 20) * 9 / 10 && doc.len() < (1 << 20) * 12 / 10,
                "{}",
                doc.len()
            );
        }
    }
}
