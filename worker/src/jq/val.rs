//! `Jv`, the value jqjail's filters run on: jaq-json's `Val` behind a type of jqjail's own, so
//! that indexing, path updates, arithmetic and text follow jq where jaq differs on purpose.
//!
//! What changes against jaq (each as jq 1.6 does it, or jq 1.7 where 1.6 had a bug 1.7 fixed):
//! - `.[k]`: `null` indexes to `null`; an object takes only string keys and an array only
//!   numbers (`{} | .[0]` is an error, not `null`); a fractional index reads `null`; a slice
//!   takes fractional and out-of-range bounds.
//! - updates (`=`, `|=`, `setpath`): a missing path is created, an array is padded with
//!   nulls, a negative index before the start is an error; `|= empty` deletes; an update
//!   takes the first output of its right-hand side; object keys keep their order.
//! - object keys must be strings (`{(1): 2}` is jq's error, never a value JSON cannot hold).
//! - numbers: division by zero and `% 0` are errors; `%` works on integers as jq's does;
//!   integers beyond ±2^53 are exact only as literals: arithmetic on them is in doubles.
//! - error messages are jq's, so `try … catch .` sees what it sees in jq.

use jaq_core::box_iter::{BoxIter, box_once};
use jaq_core::path::Opt;
use jaq_core::{Exn, val::Range};
use jaq_json::{Map, Num, Rc, Val};
use std::fmt;

/// A jq value. The wrapped `Val` never holds an object key that is not a string.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Jv(pub Val);

/// An error raised by a filter.
pub type Error = jaq_core::Error<Jv>;
/// A value or an error.
pub type ValR = jaq_core::ValR<Jv>;
/// A value or an exception.
pub type ValX<'a> = jaq_core::ValX<'a, Jv>;

/// The largest integer a double holds exactly; integer arithmetic past it is done in doubles.
pub(crate) const EXACT: i64 = 1 << 53;

/// The largest array index an update may create: jq's limit (`INT_MAX >> 2`).
const MAX_INDEX: f64 = (i32::MAX >> 2) as f64;

/// An error with a message.
pub fn err(msg: impl fmt::Display) -> Error {
    Error::str(msg.to_string())
}

fn unwrap_rc<T: Clone>(rc: Rc<T>) -> T {
    Rc::try_unwrap(rc).unwrap_or_else(|rc| (*rc).clone())
}

pub use crate::output::type_name as kind;

/// A value as jq names it in messages: its kind and its text cut to 11 bytes (`array
/// ([1,2,3])`, `string ("1,2,3,4,5,...)`).
pub fn describe(v: &Val) -> String {
    // jq shows the text whole up to 14 bytes, else its first 11 and "...".
    let mut out = Vec::new();
    dump_prefix(v, &mut out, 15);
    let shown = if out.len() <= 14 {
        String::from_utf8_lossy(&out).into_owned()
    } else {
        out.truncate(11);
        format!("{}...", String::from_utf8_lossy(&out))
    };
    format!("{} ({shown})", kind(v))
}

/// The start of `v`'s compact text, at least `cap` bytes of it where it has that many: the
/// writer stops there, however large `v` is.
fn dump_prefix(v: &Val, out: &mut Vec<u8>, cap: usize) {
    if out.len() >= cap {
        return;
    }
    match v {
        Val::Arr(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if out.len() >= cap {
                    return;
                }
                if i > 0 {
                    out.push(b',');
                }
                dump_prefix(item, out, cap);
            }
            out.push(b']');
        }
        Val::Obj(map) => {
            out.push(b'{');
            for (i, (k, item)) in map.iter().enumerate() {
                if out.len() >= cap {
                    return;
                }
                if i > 0 {
                    out.push(b',');
                }
                dump_prefix(k, out, cap);
                out.push(b':');
                dump_prefix(item, out, cap);
            }
            out.push(b'}');
        }
        Val::TStr(s) | Val::BStr(s) => {
            // Each character writes at least one byte: `cap` characters are enough, and
            // `4 * cap` bytes hold them.
            let head = String::from_utf8_lossy(&s[..s.len().min(4 * cap)]);
            let chars = head.chars().count();
            let text: String = head.chars().take(cap).collect();
            let whole = chars <= cap && s.len() <= 4 * cap;
            let mut one = Vec::new();
            // Written as a whole string for its escapes; the closing quote only where it is
            // the string's own.
            let _ = crate::output::write_value(&mut one, &Val::from(text), usize::MAX);
            if !whole {
                one.pop();
            }
            out.extend_from_slice(&one);
        }
        scalar => {
            let _ = crate::output::write_value(out, scalar, usize::MAX);
        }
    }
}

/// jq's compact text of a value (`tojson`): numbers as jq writes them, NaN as `null`.
pub fn dump(v: &Val) -> String {
    let mut out = Vec::new();
    // Keys are always strings (`Jv::from_map` refuses others) and byte strings never
    // arise (jqjail leaves out jaq's `tobytes`), so the writer cannot refuse anything here.
    match crate::output::write_value(&mut out, v, usize::MAX) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => String::from("<not JSON>"),
    }
}

/// A number as a double.
pub fn num_f64(n: &Num) -> f64 {
    match n {
        Num::Int(i) => *i as f64,
        Num::Float(f) => *f,
        other => {
            let v = Val::Num(other.clone());
            <Val as jaq_std::ValT>::as_f64(&v).unwrap_or(f64::NAN)
        }
    }
}

fn f64_of(v: &Val) -> Option<f64> {
    match v {
        Val::Num(n) => Some(num_f64(n)),
        _ => None,
    }
}

/// An integer small enough that a double holds it exactly.
fn exact_int(n: &Num) -> Option<i64> {
    match n {
        Num::Int(i) if (-EXACT..=EXACT).contains(&(*i as i64)) => Some(*i as i64),
        _ => None,
    }
}

/// The result of an integer operation, exact where both operands and the result are within
/// ±2^53 (where a double would give the same), else the double operation's.
fn arith(l: &Num, r: &Num, int: fn(i64, i64) -> Option<i64>, float: fn(f64, f64) -> f64) -> Val {
    if let (Some(a), Some(b)) = (exact_int(l), exact_int(r))
        && let Some(c) = int(a, b).filter(|c| (-EXACT..=EXACT).contains(c))
    {
        // jq's numbers are doubles: a zero may be negative (`0 * -1`, `-0 + -0`).
        if c == 0 {
            let x = float(num_f64(l), num_f64(r));
            if x.is_sign_negative() {
                return Val::from(x);
            }
        }
        return Val::Num(Num::Int(c as isize));
    }
    Val::from(float(num_f64(l), num_f64(r)))
}

/// Where an index lands in an array of `len`, reading: jq's integer index, negative from the
/// end; a fractional or out-of-range one lands nowhere.
fn read_index(len: usize, n: &Num) -> Option<usize> {
    let i = match n {
        Num::Int(i) => *i as i128,
        other => {
            let f = num_f64(other);
            if f.fract() != 0.0 || !f.is_finite() {
                return None;
            }
            f as i128
        }
    };
    let i = if i < 0 { i + len as i128 } else { i };
    (0..len as i128).contains(&i).then_some(i as usize)
}

/// Where an index lands in an array of `len`, writing: truncated toward zero as jq's `int`,
/// negative from the end; one before the start is jq's error.
fn write_index(len: usize, n: &Num) -> Result<usize, Error> {
    let f = match n {
        Num::Int(i) => *i as f64,
        other => num_f64(other).trunc(),
    };
    let f = if f < 0.0 { f + len as f64 } else { f };
    if f < 0.0 || f.is_nan() {
        return Err(err("Out of bounds negative array index"));
    }
    if f > MAX_INDEX {
        return Err(err("Array index too large"));
    }
    Ok(f as usize)
}

/// jq's slice bounds `[from, upto)` of a sequence of `len`: null is the start or the end,
/// negative counts from the end, out-of-range clips, a fractional end rounds up.
pub fn slice_bounds(
    len: usize,
    start: Option<&Jv>,
    end: Option<&Jv>,
) -> Result<(usize, usize), Error> {
    let bound = |b: Option<&Jv>, default: f64| match b.map(|b| &b.0) {
        None | Some(Val::Null) => Ok(default),
        Some(Val::Num(n)) => Ok(num_f64(n)),
        Some(_) => Err(err(
            "Start and end indices of an array slice must be numbers",
        )),
    };
    let n = len as f64;
    let mut from = bound(start, 0.0)?;
    let mut upto = bound(end, n)?;
    if from < 0.0 {
        from += n;
    }
    if upto < 0.0 {
        upto += n;
    }
    let from = from.clamp(0.0, n);
    let upto = upto.clamp(0.0, n);
    // `as usize` takes NaN to 0, where jq's behaviour is undefined.
    let start = from as usize;
    let end = if upto > (upto as usize) as f64 {
        upto as usize + 1
    } else {
        upto as usize
    };
    Ok((start.min(len), end.clamp(start.min(len), len)))
}

/// The bounds of a slice key (`{"start": …, "end": …}`, the path of `.[s:e]`).
pub fn slice_key(o: &Map) -> (Option<Jv>, Option<Jv>) {
    let get = |k: &str| o.get(&Val::from(k.to_string())).cloned().map(Jv);
    (get("start"), get("end"))
}

/// The byte range of the characters `[from, upto)` of a UTF-8 string.
fn char_range(s: &[u8], from: usize, upto: usize) -> (usize, usize) {
    let mut starts = s
        .iter()
        .enumerate()
        .filter(|(_, b)| (**b as i8) >= -0x40)
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()));
    let start = starts.nth(from).unwrap_or(s.len());
    let end = if upto > from {
        starts.nth(upto - from - 1).unwrap_or(s.len())
    } else {
        start
    };
    (start, end)
}

/// The characters of a UTF-8 string (bytes that do not continue a character).
pub fn char_count(s: &[u8]) -> usize {
    s.iter().filter(|b| (**b as i8) >= -0x40).count()
}

fn index_error(t: &Val, k: &Val) -> Error {
    match k {
        Val::TStr(s) => err(format_args!(
            "Cannot index {} with string \"{}\"",
            kind(t),
            String::from_utf8_lossy(s)
        )),
        _ => err(format_args!("Cannot index {} with {}", kind(t), kind(k))),
    }
}

/// jq's message for `.[]` on a value that has no children.
pub fn iterate_error(v: &Val) -> Error {
    err(format_args!("Cannot iterate over {}", describe(v)))
}

impl Jv {
    /// The length a slice of this value is taken from (an array's; `null` is empty).
    fn len_for_slice(&self) -> usize {
        match &self.0 {
            Val::Arr(a) => a.len(),
            _ => 0,
        }
    }

    /// A string value.
    pub fn str(s: impl Into<bytes::Bytes>) -> Self {
        Jv(Val::utf8_str(s))
    }

    /// The child at `k` under jq's rules, `None` where jq gives `null` for a missing one.
    fn get(&self, k: &Val) -> Result<Option<Val>, Error> {
        Ok(match (&self.0, k) {
            (Val::Obj(o), Val::TStr(_)) => o.get(k).cloned(),
            (Val::Arr(a), Val::Num(n)) => read_index(a.len(), n).map(|i| a[i].clone()),
            (Val::Null, Val::TStr(_) | Val::Num(_) | Val::Obj(_)) => None,
            (Val::Arr(_) | Val::TStr(_), Val::Obj(o)) => {
                let (start, end) = slice_key(o);
                return self
                    .clone()
                    .range(start.as_ref()..end.as_ref())
                    .map(|v| Some(v.0));
            }
            (Val::Arr(a), Val::Arr(b)) => Some(indices_of(a, b)),
            (t, k) => return Err(index_error(t, k)),
        })
    }

    fn range(self, range: Range<&Jv>) -> ValR {
        match self.0 {
            Val::Null => Ok(Jv(Val::Null)),
            Val::Arr(a) => {
                let (s, e) = slice_bounds(a.len(), range.start, range.end)?;
                Ok(Jv(Val::Arr(Rc::new(a[s..e].to_vec()))))
            }
            Val::TStr(b) => {
                let (s, e) = slice_bounds(char_count(&b), range.start, range.end)?;
                let (s, e) = char_range(&b, s, e);
                Ok(Jv(Val::TStr(Box::new(b.slice(s..e)))))
            }
            other => Err(err(format_args!(
                "Cannot index {} with object",
                kind(&other)
            ))),
        }
    }
}

/// The positions where `b` occurs in `a` as a contiguous run (`.[[1,2]]`, `indices`).
pub fn indices_of(a: &[Val], b: &[Val]) -> Val {
    // jq 1.6 (and gojq): an empty sub-array is found nowhere (`[0,1] | .[[]]` is `[]`).
    if b.is_empty() {
        return Val::Arr(Rc::default());
    }
    let found = a
        .windows(b.len())
        .enumerate()
        .filter(|(_, w)| *w == b)
        .map(|(i, _)| Val::Num(Num::Int(i as isize)));
    Val::Arr(Rc::new(found.collect()))
}

impl fmt::Display for Jv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&dump(&self.0))
    }
}

impl From<bool> for Jv {
    fn from(b: bool) -> Self {
        Jv(Val::Bool(b))
    }
}

impl From<isize> for Jv {
    fn from(i: isize) -> Self {
        Jv(Val::Num(Num::Int(i)))
    }
}

impl From<usize> for Jv {
    fn from(i: usize) -> Self {
        Jv(Val::from(i))
    }
}

impl From<f64> for Jv {
    fn from(f: f64) -> Self {
        Jv(Val::from(f))
    }
}

impl From<String> for Jv {
    fn from(s: String) -> Self {
        Jv(Val::from(s))
    }
}

impl From<Range<Jv>> for Jv {
    fn from(r: Range<Jv>) -> Self {
        let kvs = [("start", r.start), ("end", r.end)];
        // jq's slice path always names both ends (`{"start":1,"end":null}`).
        let map: Map = kvs
            .into_iter()
            .map(|(k, v)| (Val::from(k.to_string()), v.map_or(Val::Null, |v| v.0)))
            .collect();
        Jv(Val::obj(map))
    }
}

impl FromIterator<Jv> for Jv {
    fn from_iter<T: IntoIterator<Item = Jv>>(iter: T) -> Self {
        Jv(Val::Arr(Rc::new(iter.into_iter().map(|v| v.0).collect())))
    }
}

fn math_error(l: &Val, r: &Val, what: &str) -> Error {
    err(format_args!("{} and {} {what}", describe(l), describe(r)))
}

/// `l * r` for a string and a number: jq repeats the string, at least once for a positive
/// count, and gives `null` for a count of zero or less; past `i32::MAX` bytes it is jq 1.7's
/// error (jq 1.6 tried and ran out of memory).
fn repeat(s: &bytes::Bytes, n: f64) -> ValR {
    if n.is_nan() || n <= 0.0 {
        return Ok(Jv(Val::Null));
    }
    let copies = if n < 1.0 { 1.0 } else { n.trunc() };
    if s.len() as f64 * copies > f64::from(i32::MAX) {
        return Err(err("Repeat string result too long"));
    }
    Ok(Jv::str(s.repeat(copies as usize)))
}

fn deep_merge(l: &mut Rc<Map>, r: Rc<Map>) {
    let l = Rc::make_mut(l);
    for (k, v) in unwrap_rc(r) {
        match (l.get_mut(&k), v) {
            (Some(Val::Obj(l)), Val::Obj(r)) => deep_merge(l, r),
            (Some(l), r) => *l = r,
            (None, r) => {
                l.insert(k, r);
            }
        }
    }
}

impl std::ops::Add for Jv {
    type Output = ValR;
    fn add(self, rhs: Self) -> ValR {
        Ok(Jv(match (self.0, rhs.0) {
            (Val::Null, x) | (x, Val::Null) => x,
            (Val::Num(a), Val::Num(b)) => arith(&a, &b, i64::checked_add, |a, b| a + b),
            (Val::TStr(a), Val::TStr(b)) => {
                let mut s = bytes::BytesMut::from(*a);
                s.extend_from_slice(&b);
                Val::utf8_str(s.freeze())
            }
            (Val::Arr(mut a), Val::Arr(b)) => {
                Rc::make_mut(&mut a).extend(b.iter().cloned());
                Val::Arr(a)
            }
            (Val::Obj(mut a), Val::Obj(b)) => {
                Rc::make_mut(&mut a).extend(unwrap_rc(b));
                Val::Obj(a)
            }
            (a, b) => return Err(math_error(&a, &b, "cannot be added")),
        }))
    }
}

impl std::ops::Sub for Jv {
    type Output = ValR;
    fn sub(self, rhs: Self) -> ValR {
        Ok(Jv(match (self.0, rhs.0) {
            (Val::Num(a), Val::Num(b)) => arith(&a, &b, i64::checked_sub, |a, b| a - b),
            (Val::Arr(mut a), Val::Arr(b)) => {
                let b: std::collections::BTreeSet<&Val> = b.iter().collect();
                Rc::make_mut(&mut a).retain(|x| !b.contains(x));
                Val::Arr(a)
            }
            (a, b) => return Err(math_error(&a, &b, "cannot be subtracted")),
        }))
    }
}

impl std::ops::Mul for Jv {
    type Output = ValR;
    fn mul(self, rhs: Self) -> ValR {
        Ok(Jv(match (self.0, rhs.0) {
            (Val::Num(a), Val::Num(b)) => arith(&a, &b, i64::checked_mul, |a, b| a * b),
            (Val::TStr(s), Val::Num(n)) | (Val::Num(n), Val::TStr(s)) => {
                return repeat(&s, num_f64(&n));
            }
            (Val::Obj(mut a), Val::Obj(b)) => {
                deep_merge(&mut a, b);
                Val::Obj(a)
            }
            (a, b) => return Err(math_error(&a, &b, "cannot be multiplied")),
        }))
    }
}

impl std::ops::Div for Jv {
    type Output = ValR;
    fn div(self, rhs: Self) -> ValR {
        match (self.0, rhs.0) {
            (Val::Num(a), Val::Num(b)) => {
                let d = num_f64(&b);
                if d == 0.0 {
                    let (a, b) = (Val::Num(a), Val::Num(b));
                    return Err(math_error(
                        &a,
                        &b,
                        "cannot be divided because the divisor is zero",
                    ));
                }
                Ok(Jv(Val::from(num_f64(&a) / d)))
            }
            (Val::TStr(a), Val::TStr(b)) => Ok(split(&a, &b)),
            (a, b) => Err(math_error(&a, &b, "cannot be divided")),
        }
    }
}

/// `"a,b" / ","`: the pieces between the separators; an empty string has none.
pub fn split(s: &bytes::Bytes, sep: &[u8]) -> Jv {
    let piece = |from: usize, to: usize| Val::TStr(Box::new(s.slice(from..to)));
    let mut out = Vec::new();
    if s.is_empty() {
    } else if sep.is_empty() {
        // jq 1.6 splits into characters.
        let mut start = 0;
        for (i, b) in s.iter().enumerate().skip(1) {
            if (*b as i8) >= -0x40 {
                out.push(piece(start, i));
                start = i;
            }
        }
        out.push(piece(start, s.len()));
    } else {
        let mut start = 0;
        for at in memchr::memmem::find_iter(s, sep) {
            if at < start {
                continue;
            }
            out.push(piece(start, at));
            start = at + sep.len();
        }
        out.push(piece(start, s.len()));
    }
    Jv(Val::Arr(Rc::new(out)))
}

impl std::ops::Rem for Jv {
    type Output = ValR;
    fn rem(self, rhs: Self) -> ValR {
        match (self.0, rhs.0) {
            (Val::Num(a), Val::Num(b)) => {
                // NaN on either side is NaN, as in jq 1.7 (jq 1.6's casts of NaN and of
                // numbers past ±2^63 were undefined in C: `infinite % 3` was -2 on x86).
                if [&a, &b].iter().any(|n| num_f64(n).is_nan()) {
                    return Ok(Jv(Val::from(f64::NAN)));
                }
                // jq takes both to integers first (truncating, saturating past ±2^63).
                let int = |n: &Num| match n {
                    Num::Int(i) => *i as i64,
                    other => num_f64(other) as i64,
                };
                let (x, y) = (int(&a), int(&b));
                if y == 0 {
                    let (a, b) = (Val::Num(a), Val::Num(b));
                    return Err(math_error(
                        &a,
                        &b,
                        "cannot be divided (remainder) because the divisor is zero",
                    ));
                }
                let r = x.wrapping_rem(y);
                Ok(Jv(if (-EXACT..=EXACT).contains(&r) {
                    Val::Num(Num::Int(r as isize))
                } else {
                    Val::from(r as f64)
                }))
            }
            (a, b) => Err(math_error(&a, &b, "cannot be divided")),
        }
    }
}

impl std::ops::Neg for Jv {
    type Output = ValR;
    fn neg(self) -> ValR {
        match self.0 {
            // jq's `-0` is the double negative zero.
            Val::Num(Num::Int(0)) => Ok(Jv(Val::from(-0.0))),
            // An integer literal stays exact (`-12345678901234567890`); jaq negates it exactly.
            Val::Num(n @ (Num::Int(_) | Num::BigInt(_))) => Ok(Jv(Val::Num(-n))),
            Val::Num(other) => Ok(Jv(Val::from(-num_f64(&other)))),
            other => Err(err(format_args!("{} cannot be negated", describe(&other)))),
        }
    }
}

/// Applies the first output of `f` to `x`, `None` where `f` has none (`|= empty`).
fn first<'a, I: Iterator<Item = ValX<'a>>>(mut ys: I) -> Result<Option<Val>, Exn<'a, Jv>> {
    Ok(ys.next().transpose()?.map(|y| y.0))
}

impl jaq_core::ValT for Jv {
    fn from_num(n: &str) -> ValR {
        <Val as jaq_core::ValT>::from_num(n).map(Jv).map_err(err)
    }

    fn from_map<I: IntoIterator<Item = (Self, Self)>>(iter: I) -> ValR {
        let mut map = Map::default();
        for (k, v) in iter {
            match k.0 {
                Val::TStr(_) => {
                    map.insert(k.0, v.0);
                }
                other => {
                    return Err(err(format_args!(
                        "Cannot use {} as object key",
                        describe(&other)
                    )));
                }
            }
        }
        Ok(Jv(Val::obj(map)))
    }

    fn key_values(self) -> BoxIter<'static, jaq_core::ValR<(Self, Self), Self>> {
        match self.0 {
            Val::Arr(a) => Box::new(
                unwrap_rc(a)
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| Ok((Jv::from(i), Jv(v)))),
            ),
            Val::Obj(o) => Box::new(unwrap_rc(o).into_iter().map(|(k, v)| Ok((Jv(k), Jv(v))))),
            other => box_once(Err(iterate_error(&other))),
        }
    }

    fn values(self) -> Box<dyn Iterator<Item = ValR>> {
        match self.0 {
            Val::Arr(a) => Box::new(unwrap_rc(a).into_iter().map(|v| Ok(Jv(v)))),
            Val::Obj(o) => Box::new(unwrap_rc(o).into_iter().map(|(_, v)| Ok(Jv(v)))),
            other => box_once(Err(iterate_error(&other))),
        }
    }

    fn index(self, index: &Self) -> ValR {
        self.get(&index.0).map(|v| Jv(v.unwrap_or(Val::Null)))
    }

    fn range(self, range: Range<&Self>) -> ValR {
        Jv::range(self, range)
    }

    fn map_values<'a, I: Iterator<Item = ValX<'a>>>(
        self,
        opt: Opt,
        f: impl Fn(Self) -> I,
    ) -> ValX<'a> {
        match self.0 {
            Val::Arr(a) => {
                let mut out = Vec::with_capacity(a.len());
                for x in unwrap_rc(a) {
                    out.extend(first(f(Jv(x)))?);
                }
                Ok(Jv(Val::Arr(Rc::new(out))))
            }
            Val::Obj(o) => {
                let mut out = Map::default();
                for (k, v) in unwrap_rc(o) {
                    if let Some(y) = first(f(Jv(v)))? {
                        out.insert(k, y);
                    }
                }
                Ok(Jv(Val::obj(out)))
            }
            other => opt.fail(Jv(other), |v| Exn::from(iterate_error(&v.0))),
        }
    }

    fn map_index<'a, I: Iterator<Item = ValX<'a>>>(
        self,
        index: &Self,
        opt: Opt,
        f: impl Fn(Self) -> I,
    ) -> ValX<'a> {
        if let Val::Obj(o) = &index.0
            && matches!(self.0, Val::Arr(_) | Val::Null | Val::TStr(_))
        {
            let (start, end) = slice_key(o);
            return self.map_range(start.as_ref()..end.as_ref(), opt, f);
        }
        let fail = |v: Jv, e: Error| opt.fail(v, |_| Exn::from(e));
        match (self.0, &index.0) {
            (Val::Obj(mut o), Val::TStr(_)) => {
                let map = Rc::make_mut(&mut o);
                // Taken, not cloned: the child stays uniquely owned, so an update below it
                // changes it in place instead of copying it.
                let old = map.get_mut(&index.0).map(std::mem::take);
                match first(f(Jv(old.unwrap_or_default())))? {
                    Some(y) => {
                        map.insert(index.0.clone(), y);
                    }
                    None => {
                        map.shift_remove(&index.0);
                    }
                }
                Ok(Jv(Val::Obj(o)))
            }
            (Val::Null, Val::TStr(_)) => Ok(Jv(match first(f(Jv(Val::Null)))? {
                Some(y) => Val::obj([(index.0.clone(), y)].into_iter().collect()),
                None => Val::Null,
            })),
            (t @ (Val::Arr(_) | Val::Null), Val::Num(n)) => {
                let len = match &t {
                    Val::Arr(a) => a.len(),
                    _ => 0,
                };
                // Not `opt`'s to excuse: in jq `?` covers the path, and this is the
                // update's own error (jq's `setpath`).
                let i = write_index(len, n)?;
                let mut a = match t {
                    Val::Arr(a) => a,
                    _ => Rc::new(Vec::new()),
                };
                let items = Rc::make_mut(&mut a);
                let old = items.get_mut(i).map(std::mem::take);
                match first(f(Jv(old.unwrap_or_default())))? {
                    Some(y) => {
                        if i >= items.len() {
                            items.resize(i + 1, Val::Null);
                        }
                        items[i] = y;
                    }
                    None if i < items.len() => {
                        items.remove(i);
                    }
                    None => {}
                }
                Ok(Jv(Val::Arr(a)))
            }
            (t, k) => {
                let e = match (&t, k) {
                    (Val::Arr(_), Val::Arr(_)) => {
                        err("Cannot update field at array index of array")
                    }
                    _ => index_error(&t, k),
                };
                fail(Jv(t), e)
            }
        }
    }

    fn map_range<'a, I: Iterator<Item = ValX<'a>>>(
        self,
        range: Range<&Self>,
        opt: Opt,
        f: impl Fn(Self) -> I,
    ) -> ValX<'a> {
        let (s, e) = match slice_bounds(self.len_for_slice(), range.start, range.end) {
            Ok(b) => b,
            // `?` gives back the value as it was.
            Err(e) => return opt.fail(self, |_| Exn::from(e)),
        };
        let mut a = match self.0 {
            Val::Arr(a) => a,
            Val::Null => Rc::new(Vec::new()),
            other => {
                // jq reads the slice first, which only a string has to give.
                let e = match other {
                    Val::TStr(_) => err("Cannot update field at object index of string"),
                    _ => err(format_args!("Cannot index {} with object", kind(&other))),
                };
                return opt.fail(Jv(other), |_| Exn::from(e));
            }
        };
        let slice = Jv(Val::Arr(Rc::new(a[s..e].to_vec())));
        let new = match first(f(slice))? {
            Some(Val::Arr(y)) => unwrap_rc(y),
            Some(_) => {
                return Err(Exn::from(err(
                    "A slice of an array can only be assigned another array",
                )));
            }
            None => Vec::new(),
        };
        Rc::make_mut(&mut a).splice(s..e, new);
        Ok(Jv(Val::Arr(a)))
    }

    fn as_bool(&self) -> bool {
        !matches!(self.0, Val::Null | Val::Bool(false))
    }

    fn into_string(self) -> Self {
        match self.0 {
            Val::TStr(_) => self,
            Val::BStr(b) => Jv(Val::TStr(b)),
            other => Jv::from(dump(&other)),
        }
    }
}

impl jaq_std::ValT for Jv {
    fn into_seq<S: FromIterator<Self>>(self) -> Result<S, Self> {
        match self.0 {
            Val::Arr(a) => Ok(unwrap_rc(a).into_iter().map(Jv).collect()),
            other => Err(Jv(other)),
        }
    }

    fn is_int(&self) -> bool {
        self.as_isize().is_some() || matches!(&self.0, Val::Num(Num::BigInt(_)))
    }

    fn as_isize(&self) -> Option<isize> {
        match &self.0 {
            Val::Num(Num::Int(i)) => Some(*i),
            Val::Num(n @ (Num::Float(_) | Num::Dec(_))) => {
                let f = num_f64(n);
                (f.fract() == 0.0 && f.abs() <= EXACT as f64).then_some(f as isize)
            }
            Val::Num(n) => <Val as jaq_std::ValT>::as_isize(&Val::Num(n.clone())),
            _ => None,
        }
    }

    fn as_f64(&self) -> Option<f64> {
        f64_of(&self.0)
    }

    fn is_utf8_str(&self) -> bool {
        matches!(self.0, Val::TStr(_))
    }

    fn as_bytes(&self) -> Option<&[u8]> {
        match &self.0 {
            Val::TStr(b) | Val::BStr(b) => Some(b),
            _ => None,
        }
    }

    fn as_sub_str(&self, sub: &[u8]) -> Self {
        Jv(<Val as jaq_std::ValT>::as_sub_str(&self.0, sub))
    }

    fn from_utf8_bytes(b: impl AsRef<[u8]> + Send + 'static) -> Self {
        Jv(<Val as jaq_std::ValT>::from_utf8_bytes(b))
    }
}
