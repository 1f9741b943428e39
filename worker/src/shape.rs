//! Shape summaries: a bounded skeleton of a JSON document, for a model to write a
//! correct filter without reading the data.
//!
//! One walk over the parsed document merges every value at the same position (the elements of
//! an array share one position) into an [`Acc`]: how many values of each type were there,
//! array lengths, each object key with how many objects had it, and a few distinct example
//! scalars. The summary is then rendered under a byte bound: with generous detail first, and
//! with less (shallower, fewer keys, no examples) until it fits [`MAX_SHAPE_BYTES`]. Keys and
//! examples keep the order of their first appearance, so the same document always gives the
//! same summary.
//!
//! The walk itself is bounded too: below [`MAX_WALK_DEPTH`] values are counted, not opened, and
//! an object position tracks at most [`MAX_KEYS`] names (the rest are counted as others).

use crate::output::write_value;
use jaq_json::{Num, Val};
use std::borrow::Cow;
use std::collections::HashMap;

/// The largest summary, in bytes of compact JSON.
pub const MAX_SHAPE_BYTES: usize = 4096;
/// Below this depth, values are counted by type but not opened.
pub const MAX_WALK_DEPTH: usize = 12;
/// Names tracked per object position.
pub const MAX_KEYS: usize = 256;
/// Positions (tracked keys) in the whole summary: the walk's memory does not grow with a
/// document of many distinct nested keys (26 keys nested 4 deep are 456,976 positions).
pub const MAX_POSITIONS: usize = 20_000;
/// Distinct example scalars kept per position.
const MAX_EXAMPLES: usize = 3;
/// Characters of an example string (longer ones end in `…`), and bytes of an example number.
const EXAMPLE_CHARS: usize = 32;
/// Characters of a key name shown.
const KEY_CHARS: usize = 64;

/// The summary of `value` as compact JSON text of at most `max_bytes` (at most
/// [`MAX_SHAPE_BYTES`] are ever used), or `None` if not even its type list fits.
pub fn summarize(value: &Val, max_bytes: usize) -> Option<String> {
    let max_bytes = max_bytes.min(MAX_SHAPE_BYTES);
    let mut root = Acc::default();
    let mut budget = MAX_POSITIONS;
    root.add(value, 0, &mut budget);
    let fallback = obj([("type", root.types()), ("truncated", Val::Bool(true))]);
    for shown in DETAILS
        .iter()
        .map(|detail| root.render(detail, 0, None))
        .chain([fallback])
    {
        let mut out = Vec::new();
        if write_value(&mut out, &shown, max_bytes).is_ok() {
            return Some(String::from_utf8(out).expect("the writer writes UTF-8"));
        }
    }
    None
}

/// How much a rendering shows.
struct Detail {
    depth: usize,
    keys: usize,
    examples: usize,
}

/// From the most detailed rendering to the least; the first that fits is the answer.
const DETAILS: [Detail; 6] = [
    Detail {
        depth: 8,
        keys: 40,
        examples: 3,
    },
    Detail {
        depth: 6,
        keys: 25,
        examples: 2,
    },
    Detail {
        depth: 5,
        keys: 15,
        examples: 1,
    },
    Detail {
        depth: 4,
        keys: 10,
        examples: 0,
    },
    Detail {
        depth: 3,
        keys: 6,
        examples: 0,
    },
    Detail {
        depth: 1,
        keys: 5,
        examples: 0,
    },
];

/// Everything seen at one position of the document.
#[derive(Default)]
struct Acc {
    nulls: u64,
    booleans: u64,
    numbers: u64,
    strings: u64,
    arrays: Option<Box<Arrays>>,
    objects: Option<Box<Objects>>,
    /// Distinct example scalars (strings truncated), with their JSON text to tell them apart.
    examples: Vec<(Vec<u8>, Val)>,
}

#[derive(Default)]
struct Arrays {
    count: u64,
    min_len: u64,
    max_len: u64,
    items: Acc,
}

#[derive(Default)]
struct Objects {
    count: u64,
    /// Each tracked key with how many objects had it, in order of first appearance.
    keys: Vec<(String, u64, Acc)>,
    index: HashMap<String, usize>,
    /// Occurrences of keys past the tracked ones.
    other_keys: u64,
}

impl Acc {
    /// Merges `value` in; `budget` is how many more positions (keys) may be tracked.
    fn add(&mut self, value: &Val, depth: usize, budget: &mut usize) {
        match value {
            Val::Null => self.nulls += 1,
            Val::Bool(_) => self.booleans += 1,
            Val::Num(_) => {
                self.numbers += 1;
                self.example(value);
            }
            Val::TStr(_) | Val::BStr(_) => {
                self.strings += 1;
                self.example(value);
            }
            Val::Arr(items) => {
                let len = items.len() as u64;
                let arrays = self.arrays.get_or_insert_with(|| {
                    Box::new(Arrays {
                        min_len: len,
                        max_len: len,
                        ..Arrays::default()
                    })
                });
                arrays.count += 1;
                arrays.min_len = arrays.min_len.min(len);
                arrays.max_len = arrays.max_len.max(len);
                if depth < MAX_WALK_DEPTH {
                    for item in items.iter() {
                        arrays.items.add(item, depth + 1, budget);
                    }
                }
            }
            Val::Obj(map) => {
                let objects = self.objects.get_or_insert_with(Box::default);
                objects.count += 1;
                if depth >= MAX_WALK_DEPTH {
                    return;
                }
                for (k, v) in map.iter() {
                    // Borrowed for the lookup; a name is copied once, when first tracked.
                    let name = key_text(k);
                    let at = match objects.index.get(name.as_ref()) {
                        Some(&at) => at,
                        None if objects.keys.len() < MAX_KEYS && *budget > 0 => {
                            *budget -= 1;
                            let name = name.into_owned();
                            objects.keys.push((name.clone(), 0, Acc::default()));
                            objects.index.insert(name, objects.keys.len() - 1);
                            objects.keys.len() - 1
                        }
                        None => {
                            objects.other_keys += 1;
                            continue;
                        }
                    };
                    let (_, present, acc) = &mut objects.keys[at];
                    *present += 1;
                    acc.add(v, depth + 1, budget);
                }
            }
        }
    }

    /// Keeps `value` as an example if it is new and there is room.
    fn example(&mut self, value: &Val) {
        if self.examples.len() >= MAX_EXAMPLES {
            return;
        }
        let shown = match value {
            Val::TStr(s) | Val::BStr(s) => {
                Val::from(truncate(&String::from_utf8_lossy(s), EXAMPLE_CHARS).into_owned())
            }
            other => other.clone(),
        };
        let mut text = Vec::new();
        // A number spelled with more digits than an example shows is not kept.
        if write_value(&mut text, &shown, EXAMPLE_CHARS * 4 + 8).is_ok()
            && !self.examples.iter().any(|(seen, _)| *seen == text)
        {
            self.examples.push((text, shown));
        }
    }

    /// The type names seen here, in a fixed order: one as a string, several as an array.
    fn types(&self) -> Val {
        let names: Vec<Val> = self
            .counts()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, _)| Val::from(name.to_string()))
            .collect();
        match <[Val; 1]>::try_from(names) {
            Ok([one]) => one,
            Err(many) => Val::Arr(many.into()),
        }
    }

    fn counts(&self) -> [(&'static str, u64); 6] {
        [
            ("object", self.objects.as_ref().map_or(0, |o| o.count)),
            ("array", self.arrays.as_ref().map_or(0, |a| a.count)),
            ("string", self.strings),
            ("number", self.numbers),
            ("boolean", self.booleans),
            ("null", self.nulls),
        ]
    }

    /// This position under `detail`; `present` is how many of its parent's objects had it,
    /// for an optional key.
    fn render(&self, detail: &Detail, depth: usize, present: Option<u64>) -> Val {
        let mut fields: Vec<(&str, Val)> = vec![("type", self.types())];
        let counts = self.counts();
        if counts.iter().filter(|(_, n)| *n > 0).count() > 1 {
            let counts = counts
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(name, n)| (name, int(n)));
            fields.push(("counts", obj(counts)));
        }
        if let Some(arrays) = &self.arrays {
            let length = match arrays.min_len == arrays.max_len {
                true => int(arrays.min_len),
                false => obj([("min", int(arrays.min_len)), ("max", int(arrays.max_len))]),
            };
            fields.push(("length", length));
            if arrays.items.seen() > 0 {
                let items = match depth + 1 < detail.depth {
                    true => arrays.items.render(detail, depth + 1, None),
                    false => obj([("type", arrays.items.types())]),
                };
                fields.push(("items", items));
            }
        }
        if let Some(objects) = &self.objects
            && !objects.keys.is_empty()
        {
            if depth + 1 < detail.depth {
                let shown = objects
                    .keys
                    .iter()
                    .take(detail.keys)
                    .map(|(name, present, acc)| {
                        // An optional key says in how many of the objects it is.
                        let optional = (*present < objects.count).then_some(*present);
                        (
                            Val::from(name.clone()),
                            acc.render(detail, depth + 1, optional),
                        )
                    });
                fields.push(("keys", Val::obj(shown.collect())));
            }
            // Tracked keys left out of this rendering (all of them below its depth).
            let more = match depth + 1 < detail.depth {
                true => objects.keys.len().saturating_sub(detail.keys),
                false => objects.keys.len(),
            };
            if more > 0 {
                fields.push(("more_keys", int(more as u64)));
            }
            // Names past the tracked ones were counted, not kept.
            if objects.other_keys > 0 {
                fields.push(("untracked_key_uses", int(objects.other_keys)));
            }
        }
        if detail.examples > 0 && !self.examples.is_empty() {
            let examples = self
                .examples
                .iter()
                .take(detail.examples)
                .map(|(_, value)| value.clone())
                .collect::<Vec<_>>();
            fields.push(("examples", Val::Arr(examples.into())));
        }
        if let Some(present) = present {
            fields.push(("present", int(present)));
        }
        obj(fields)
    }

    fn seen(&self) -> u64 {
        self.counts().iter().map(|(_, n)| n).sum()
    }
}

/// A key's name as shown, cut to [`KEY_CHARS`]: keys that share those characters are one
/// position (their shapes merge), so no two shown keys collide.
fn key_text(k: &Val) -> Cow<'_, str> {
    match k {
        Val::TStr(s) | Val::BStr(s) => match String::from_utf8_lossy(s) {
            Cow::Borrowed(text) => truncate(text, KEY_CHARS),
            Cow::Owned(text) => Cow::Owned(truncate(&text, KEY_CHARS).into_owned()),
        },
        other => Cow::Owned(truncate(&other.to_string(), KEY_CHARS).into_owned()),
    }
}

/// `text` cut to `max` characters, ending in `…` when cut.
fn truncate(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((at, _)) => Cow::Owned(format!("{}…", &text[..at])),
        None => Cow::Borrowed(text),
    }
}

fn int(n: u64) -> Val {
    Val::Num(Num::Int(n.min(isize::MAX as u64) as isize))
}

fn obj<'a>(fields: impl IntoIterator<Item = (&'a str, Val)>) -> Val {
    Val::obj(
        fields
            .into_iter()
            .map(|(k, v)| (Val::from(k.to_string()), v))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(json: &str) -> String {
        summarize(
            &jaq_json::read::parse_single(json.as_bytes()).unwrap(),
            MAX_SHAPE_BYTES,
        )
        .unwrap()
    }

    #[test]
    fn keys_types_lengths_and_optional_keys() {
        let doc = r#"[{"id":1,"title":"a","user":{"login":"x"}},
                      {"id":2,"title":"b","user":null,"labels":["bug"]},
                      {"id":3,"title":"c","user":{"login":"y"}}]"#;
        assert_eq!(
            shape(doc),
            concat!(
                r#"{"type":"array","length":3,"items":{"type":"object","keys":{"#,
                r#""id":{"type":"number","examples":[1,2,3]},"#,
                r#""title":{"type":"string","examples":["a","b","c"]},"#,
                r#""user":{"type":["object","null"],"counts":{"object":2,"null":1},"keys":{"login":{"type":"string","examples":["x","y"]}}},"#,
                r#""labels":{"type":"array","length":1,"items":{"type":"string","examples":["bug"]},"present":1}}}}"#
            )
        );
    }

    #[test]
    fn scalars_lengths_and_long_examples() {
        assert_eq!(shape("null"), r#"{"type":"null"}"#);
        assert_eq!(shape("[]"), r#"{"type":"array","length":0}"#);
        assert_eq!(
            shape("[[1],[1,2,3]]"),
            r#"{"type":"array","length":2,"items":{"type":"array","length":{"min":1,"max":3},"items":{"type":"number","examples":[1,2,3]}}}"#
        );
        let long = format!(r#"["{}"]"#, "é".repeat(100));
        assert!(
            shape(&long).contains(&format!("\"{}…\"", "é".repeat(32))),
            "{}",
            shape(&long)
        );
    }

    #[test]
    fn the_summary_is_bounded_whatever_the_input() {
        // 2,000 distinct keys, each an object of 50 distinct keys with long names and values.
        let mut doc = String::from("{");
        for i in 0..2000 {
            if i > 0 {
                doc.push(',');
            }
            doc.push_str(&format!("\"key number {i} {}\":{{", "k".repeat(100)));
            for j in 0..50 {
                if j > 0 {
                    doc.push(',');
                }
                doc.push_str(&format!(
                    "\"inner {j} {}\":\"{}\"",
                    "n".repeat(80),
                    "v".repeat(200)
                ));
            }
            doc.push('}');
        }
        doc.push('}');
        let summary = shape(&doc);
        assert!(summary.len() <= MAX_SHAPE_BYTES, "{} bytes", summary.len());
        assert!(summary.contains("more_keys"), "{summary}");
        // Deterministic: the same document, the same summary.
        assert_eq!(shape(&doc), summary);
        // Deep nesting is walked only so far, and the rendering stays bounded.
        let deep = format!("{}1{}", "[".repeat(500), "]".repeat(500));
        assert!(shape(&deep).len() <= MAX_SHAPE_BYTES);
        // Keys that share their first 64 characters are one position, shown once.
        let long = format!(r#"{{"{0}x":1,"{0}y":"s"}}"#, "k".repeat(70));
        let merged = shape(&long);
        assert_eq!(merged.matches("kkkk…").count(), 1, "{merged}");
        assert!(merged.contains(r#""type":["string","number"]"#), "{merged}");
        // Under a tiny bound, only the type is left; under none, nothing.
        let v = jaq_json::read::parse_single(doc.as_bytes()).unwrap();
        assert_eq!(
            summarize(&v, 40).as_deref(),
            Some(r#"{"type":"object","truncated":true}"#)
        );
        assert_eq!(summarize(&v, 10), None);
    }
}
