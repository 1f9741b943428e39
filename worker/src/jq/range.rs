//! `range($from; $upto; $by)` for numbers (`defs.jq` checks the types and drops a zero
//! `$by`), with jaq's meaning: `$from | while(. < $upto; . + $by)` for a positive `$by`,
//! `. > $upto` for a negative one, each comparison and sum exactly as jqjail's values do
//! them.
//!
//! jaq's own native compares and adds generic values for every element, and compares a
//! decimal literal bound (`1e9`) by parsing its text each time. Here the bound is read once,
//! and while the values are integers a double holds exactly they are counted as integers:
//! `[range(1e9)]` reaches the heap limit sooner (issue 38's runaway generator). Past that the
//! generic step takes over, so every value is what jaq's loop would give.

use crate::jq::val::{EXACT, Error, Jv, ValR, ValX};
use jaq_core::Exn;
use jaq_json::{Num, Val};
use std::cmp::Ordering;

/// The values of `range(from; upto; by)`.
pub fn range<'a>(from: Jv, upto: Jv, by: Jv) -> impl Iterator<Item = ValX<'a>> {
    let (upto, by) = (read_once(upto), read_once(by));
    let direction = by.cmp(&Jv(Val::Num(Num::Int(0))));
    let state = match (exact(&from), exact(&by)) {
        (Some(next), Some(step)) if step != 0 => State::Exact { next, step },
        _ => State::Generic(from),
    };
    let range = Range {
        state,
        upto,
        by,
        direction,
    };
    range.map(|x| x.map_err(Exn::from))
}

struct Range {
    state: State,
    upto: Jv,
    by: Jv,
    /// How `by` compares to 0: which side of `upto` the values stay on.
    direction: Ordering,
}

enum State {
    /// The next value is the integer `next`, and `next + step` is computed as integers.
    Exact {
        next: i64,
        step: i64,
    },
    /// The next value, stepped by the values' own addition.
    Generic(Jv),
    /// The step failed: the error is the last item.
    Failed(Error),
    Done,
}

impl Range {
    /// Whether a value that compares to `upto` as `order` is still on its near side, as jaq's
    /// loop asks it.
    fn goes_on(&self, order: Ordering) -> bool {
        match self.direction {
            Ordering::Greater => order == Ordering::Less,
            Ordering::Less => order == Ordering::Greater,
            Ordering::Equal => order != Ordering::Equal,
        }
    }
}

impl Iterator for Range {
    type Item = ValR;

    fn next(&mut self) -> Option<ValR> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Exact { next, step } => {
                let x = int(next);
                let order = match self.upto.0 {
                    Val::Num(Num::Int(upto)) => (next as isize).cmp(&upto),
                    // As jaq compares an integer to a double that is not NaN: as doubles,
                    // with the two zeros equal.
                    Val::Num(Num::Float(upto)) if !upto.is_nan() => {
                        (next as f64).partial_cmp(&upto).unwrap_or(Ordering::Equal)
                    }
                    _ => x.cmp(&self.upto),
                };
                if !self.goes_on(order) {
                    return None;
                }
                // The sum jqjail's addition gives: an integer while it stays within ±2^53
                // (integers never sum to a negative zero), else the doubles' sum.
                self.state = match next
                    .checked_add(step)
                    .filter(|s| (-EXACT..=EXACT).contains(s))
                {
                    Some(next) => State::Exact { next, step },
                    None => State::Generic(Jv(Val::from(next as f64 + step as f64))),
                };
                Some(Ok(x))
            }
            State::Generic(x) => {
                if !self.goes_on(x.cmp(&self.upto)) {
                    return None;
                }
                // Numbers always add; were they ever not to, the error would follow `x` and
                // end the range, as in jaq's loop.
                self.state = match x.clone() + self.by.clone() {
                    Ok(next) => State::Generic(next),
                    Err(e) => State::Failed(e),
                };
                Some(Ok(x))
            }
            State::Failed(e) => Some(Err(e)),
            State::Done => None,
        }
    }
}

/// A decimal literal compares and adds as the double its text reads as, each time it is
/// used: read it once.
fn read_once(x: Jv) -> Jv {
    match x.0 {
        Val::Num(Num::Dec(text)) => Jv(Val::Num(Num::from_dec_str(&text))),
        other => Jv(other),
    }
}

/// An integer a double holds exactly.
fn exact(x: &Jv) -> Option<i64> {
    match x.0 {
        Val::Num(Num::Int(i)) if (-EXACT..=EXACT).contains(&(i as i64)) => Some(i as i64),
        _ => None,
    }
}

fn int(i: i64) -> Jv {
    Jv(Val::Num(Num::Int(i as isize)))
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;

    /// Every bound and step here, through this native and through jaq's: the same values, of
    /// the same types, in the same order (the first 40 of each, as some never end).
    #[test]
    fn gives_what_jaqs_loop_gives() {
        let engine = Engine::new();
        let run = |filter: &str| {
            let compiled = engine.compile(filter).expect("compiles");
            match engine.run(&compiled, jaq_json::Val::Null, 1 << 20) {
                Ok(out) => out,
                Err(e) => format!("error: {}", e.message),
            }
        };
        let bounds = [
            "0",
            "1",
            "-3",
            "2.5",
            "1e2",
            "1e0",
            "-0",
            "-0.0",
            "0.1",
            "nan",
            "infinite",
            "-infinite",
            "9007199254740990",
            "9007199254740992",
            "-9007199254740991",
            "9223372036854775807",
            "100000000000000000000",
            "-1e300",
        ];
        let steps = [
            "1",
            "2",
            "-1",
            "-2",
            "0.5",
            "3e0",
            "-0.25",
            "nan",
            "4503599627370496",
            "9007199254740992",
            "-9007199254740993",
            "1e300",
        ];
        let mut compared = 0;
        for from in bounds {
            for upto in bounds {
                for by in steps {
                    let args = format!("({from}); ({upto}); ({by})");
                    let ours = run(&format!(
                        "[limit(40; _jqjail_range({args}))] | ., map(type)"
                    ));
                    let jaqs = run(&format!("[limit(40; _jaq_range({args}))] | ., map(type)"));
                    assert_eq!(ours, jaqs, "range({args})");
                    compared += 1;
                }
            }
        }
        assert_eq!(compared, bounds.len() * bounds.len() * steps.len());
    }

    /// The least machine integer is no exact integer (its `abs` overflowed: a panic in a debug
    /// build, an integer kept in release). As the start it is itself, and as the start or the
    /// step the next value is the doubles' sum, as jqjail's addition gives; kept as the integer
    /// -2^63, it also compared below a bound of -2^63 - 1 that the double equals, one value too
    /// many (an attacker's review found the step).
    #[test]
    fn the_least_machine_integer_steps_as_a_double() {
        use crate::jq::val::Jv;
        use jaq_json::{Num, Val};
        let int = |i: isize| Jv(Val::Num(Num::Int(i)));
        for (from, upto, by) in [
            (int(isize::MIN), int(0), int(1)),
            (int(0), Jv(Val::Num(Num::Float(-1e30))), int(isize::MIN)),
        ] {
            let values: Vec<Jv> = super::range(from.clone(), upto, by.clone())
                .take(2)
                .map(|x| x.expect("a number"))
                .collect();
            let sum = (from.clone() + by).expect("numbers add");
            assert_eq!(values[0], from);
            assert!(matches!(values[1].0, Val::Num(Num::Float(_))), "{values:?}");
            assert_eq!(format!("{:?}", values[1]), format!("{sum:?}"));
        }
    }

    /// jq's `range/1` and `range/2` count by 1 to a bound of any number kind.
    #[test]
    fn counts_to_a_decimal_a_double_and_a_big_integer() {
        let engine = Engine::new();
        let compiled = engine
            .compile("[[range(3e0)], [range(1; 2.5)], [range(-2; -1e0; 0.5)]]")
            .expect("compiles");
        let out = engine.run(&compiled, jaq_json::Val::Null, 1 << 20).unwrap();
        assert_eq!(out, "[[0,1,2],[1,2],[-2,-1.5]]");
    }
}
