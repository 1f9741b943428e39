//! The natives jqjail defines: jq's behaviour where jaq's natives differ (messages included),
//! and jq builtins jaq lacks that are better written in Rust than in jq (`delpaths`,
//! `@csv`, `@tsv`, `@sh`, `@base32d`).

use crate::jq::Data;
use crate::jq::val::{
    Jv, ValR, char_count, describe, dump, err, indices_of, kind, num_f64, slice_bounds, slice_key,
};
use jaq_core::RunPtr;
use jaq_core::native::{Fun, bome, run, unary, v};
use jaq_json::{Map, Num, Rc, Val};

/// The nesting limit of `fromjson` and `tonumber`: jq's (`MAX_PARSING_DEPTH`), below the
/// input's, so that a text nested deeper is jq's error, not a value.
const FROMJSON_MAX_DEPTH: u32 = 256;

/// jqjail's natives.
pub fn funs() -> impl Iterator<Item = Fun<Data>> {
    let table: [(&'static str, usize, RunPtr<Data>); 25] = [
        ("_jqjail_uri", 0, |cv| bome(uri(&cv.1.0))),
        ("_jqjail_range", 3, |mut cv| {
            let by = cv.0.pop_var();
            let upto = cv.0.pop_var();
            let from = cv.0.pop_var();
            Box::new(crate::jq::range::range(from, upto, by))
        }),
        ("length", 0, |cv| bome(length(&cv.1.0))),
        ("utf8bytelength", 0, |cv| {
            bome(match &cv.1.0 {
                Val::TStr(s) => Ok(Jv::from(s.len())),
                other => Err(err(format_args!(
                    "{} only strings have UTF-8 byte length",
                    describe(other)
                ))),
            })
        }),
        ("keys_unsorted", 0, |cv| bome(keys(&cv.1.0))),
        ("has", 1, |cv| unary(cv, |v, k| has(&v.0, &k.0))),
        ("contains", 1, |cv| {
            unary(cv, |a, b| contains_top(&a.0, &b.0))
        }),
        ("indices", 1, |cv| unary(cv, indices)),
        ("tojson", 0, |cv| bome(Ok(Jv::from(dump(&cv.1.0))))),
        ("fromjson", 0, |cv| bome(fromjson(&cv.1.0))),
        ("tonumber", 0, |cv| bome(tonumber(cv.1))),
        ("ltrimstr", 1, |cv| unary(cv, |v, p| Ok(trim(v, &p, true)))),
        ("rtrimstr", 1, |cv| unary(cv, |v, p| Ok(trim(v, &p, false)))),
        ("startswith", 1, |cv| {
            unary(cv, |v, p| fix(&v, &p, "startswith", <[u8]>::starts_with))
        }),
        ("endswith", 1, |cv| {
            unary(cv, |v, p| fix(&v, &p, "endswith", <[u8]>::ends_with))
        }),
        ("delpaths", 1, |cv| unary(cv, delpaths)),
        ("bsearch", 1, |cv| unary(cv, |a, x| bsearch(&a.0, &x.0))),
        ("infinite", 0, |_| bome(Ok(Jv::from(f64::INFINITY)))),
        ("nan", 0, |_| bome(Ok(Jv::from(f64::NAN)))),
        ("_jqjail_base64d", 0, |cv| bome(base64d(&cv.1.0))),
        ("_jqjail_describe", 0, |cv| {
            bome(Ok(Jv::from(describe(&cv.1.0))))
        }),
        ("@csv", 0, |cv| bome(row(&cv.1.0, Sep::Csv))),
        ("@tsv", 0, |cv| bome(row(&cv.1.0, Sep::Tsv))),
        ("@sh", 0, |cv| bome(sh(&cv.1.0))),
        ("@base32d", 0, |cv| bome(base32d(&cv.1.0))),
    ];
    table
        .into_iter()
        .chain(test_only())
        .chain(math())
        .map(|(name, arity, f)| run::<Data>((name, v(arity), f)))
        .chain(std::iter::once(run::<Data>(("@base32", v(0), |cv| {
            bome(base32(cv.1))
        }))))
}

/// Natives that exist only in debug builds, for tests (compiled out of release builds, which
/// ship): `_jqjail_test_panic` panics, as an engine bug would; `"CODE" | _jqjail_test_claim`
/// makes the worker answer an error of that code, as a worker that runs an attacker's code
/// could (`serve::claimed`); `_jqjail_test_stay` makes it spin after its answer instead of
/// exiting, as such a worker could (`serve::STAY`).
#[cfg(debug_assertions)]
fn test_only() -> impl Iterator<Item = (&'static str, usize, RunPtr<Data>)> {
    let panics: RunPtr<Data> = |_| panic!("_jqjail_test_panic was called");
    let claims: RunPtr<Data> = |cv| panic!("{}{}", crate::serve::CLAIM, cv.1);
    let stays: RunPtr<Data> = |cv| {
        crate::serve::STAY.store(true, std::sync::atomic::Ordering::Relaxed);
        bome(Ok(cv.1))
    };
    [
        ("_jqjail_test_panic", 0, panics),
        ("_jqjail_test_claim", 0, claims),
        ("_jqjail_test_stay", 0, stays),
    ]
    .into_iter()
}

/// Release builds have no test-only natives.
#[cfg(not(debug_assertions))]
fn test_only() -> impl Iterator<Item = (&'static str, usize, RunPtr<Data>)> {
    std::iter::empty()
}

/// jaq's math natives that jqjail's (`math`) replace.
pub const MATH: &[&str] = &[
    "floor",
    "ceil",
    "round",
    "trunc",
    "rint",
    "nearbyint",
    "fabs",
    "sqrt",
    "cbrt",
    "exp",
    "exp2",
    "exp10",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "lgamma",
    "tgamma",
    "j0",
    "j1",
    "y0",
    "y1",
    "frexp",
    "modf",
];

/// jq's one-argument math builtins (the C library's, as jq calls them, on a double), with jq's message for a value that
/// is not a number. Those that round keep an integer exact, as every integer is; the others
/// give a double, so `1e300 | floor` is `1e+300`, not three hundred digits, and `-0.4 | round`
/// is jq's `-0`.
fn math() -> [(&'static str, usize, RunPtr<Data>); 54] {
    macro_rules! f {
        ($name:literal, $f:path) => {
            ($name, 0, |cv| bome(math1(cv.1, $f, OnInt::Double)))
        };
        ($name:literal, $f:path, $on_int:ident) => {
            ($name, 0, |cv| bome(math1(cv.1, $f, OnInt::$on_int)))
        };
    }
    // Two arguments, both bound (`defs.jq` binds them in jq's order: the last one outermost).
    macro_rules! f2 {
        ($name:literal, $f:path) => {
            ($name, 2, |mut cv| {
                let y = cv.0.pop_var();
                let x = cv.0.pop_var();
                bome(number(&x).and_then(|x| Ok(Jv::from($f(x, number(&y)?)))))
            })
        };
    }
    [
        f!("floor", cmath::floor, Same),
        f!("ceil", cmath::ceil, Same),
        f!("round", cmath::round, Same),
        f!("trunc", cmath::trunc, Same),
        f!("rint", cmath::rint, Same),
        f!("nearbyint", cmath::nearbyint, Same),
        f!("fabs", cmath::fabs, Abs),
        f!("sqrt", cmath::sqrt),
        f!("cbrt", cmath::cbrt),
        f!("exp", cmath::exp),
        f!("exp2", cmath::exp2),
        f!("exp10", cmath::exp10),
        f!("expm1", cmath::expm1),
        f!("log", cmath::log),
        f!("log2", cmath::log2),
        f!("log10", cmath::log10),
        f!("log1p", cmath::log1p),
        f!("sin", cmath::sin),
        f!("cos", cmath::cos),
        f!("tan", cmath::tan),
        f!("asin", cmath::asin),
        f!("acos", cmath::acos),
        f!("atan", cmath::atan),
        f!("sinh", cmath::sinh),
        f!("cosh", cmath::cosh),
        f!("tanh", cmath::tanh),
        f!("asinh", cmath::asinh),
        f!("acosh", cmath::acosh),
        f!("atanh", cmath::atanh),
        f!("lgamma", cmath::lgamma),
        f!("tgamma", cmath::tgamma),
        f!("j0", cmath::j0),
        f!("j1", cmath::j1),
        f!("y0", cmath::y0),
        f!("y1", cmath::y1),
        f!("_jqjail_significand", cmath::significand),
        f!("_jqjail_logb", cmath::logb),
        f!("_jqjail_gamma", cmath::gamma),
        ("frexp", 0, |cv| {
            bome(number(&cv.1).map(|x| {
                let (m, e) = cmath::frexp(x);
                pair(Jv::from(m), Jv::from(e as isize))
            }))
        }),
        ("modf", 0, |cv| {
            bome(number(&cv.1).map(|x| {
                let (frac, int) = cmath::modf(x);
                pair(Jv::from(frac), Jv::from(int))
            }))
        }),
        f2!("_jqjail_pow", cmath::pow),
        f2!("_jqjail_atan2", cmath::atan2),
        f2!("_jqjail_fmod", cmath::fmod),
        f2!("_jqjail_hypot", cmath::hypot),
        f2!("_jqjail_copysign", cmath::copysign),
        f2!("_jqjail_fdim", cmath::fdim),
        f2!("_jqjail_fmax", cmath::fmax),
        f2!("_jqjail_fmin", cmath::fmin),
        f2!("_jqjail_nextafter", cmath::nextafter),
        f2!("_jqjail_remainder", cmath::remainder),
        f2!("_jqjail_ldexp", cmath::ldexp),
        f2!("_jqjail_scalbln", cmath::scalbln),
        f2!("_jqjail_scalb", cmath::scalb),
        ("lgamma_r", 0, |cv| {
            bome(number(&cv.1).map(|x| {
                let (v, sign) = cmath::lgamma_r(x);
                pair(Jv::from(v), Jv::from(sign as isize))
            }))
        }),
    ]
}

/// What a math builtin gives for an integer.
enum OnInt {
    /// The integer itself (it is already rounded).
    Same,
    /// Its absolute value, exact where that is an integer too.
    Abs,
    /// The function of the nearest double.
    Double,
}

fn math1(v: Jv, f: fn(f64) -> f64, on_int: OnInt) -> ValR {
    match (&v.0, on_int) {
        (Val::Num(Num::Int(_) | Num::BigInt(_)), OnInt::Same) => Ok(v),
        (Val::Num(Num::Int(i)), OnInt::Abs) if i.checked_abs().is_some() => {
            Ok(Jv(Val::Num(Num::Int(i.abs()))))
        }
        _ => number(&v).map(|x| Jv::from(f(x))),
    }
}

/// A number as a double, or jq's message for a value that is not one.
fn number(v: &Jv) -> Result<f64, crate::jq::val::Error> {
    match &v.0 {
        Val::Num(n) => Ok(num_f64(n)),
        other => Err(err(format_args!("{} number required", describe(other)))),
    }
}

fn pair(a: Jv, b: Jv) -> Jv {
    [a, b].into_iter().collect()
}

fn length(v: &Val) -> ValR {
    Ok(match v {
        Val::Null => Jv::from(0usize),
        Val::Bool(_) => return Err(err(format_args!("{} has no length", describe(v)))),
        Val::Num(n) => match n {
            Num::Int(i) => Jv(Val::Num(Num::Int(i.abs()))),
            other => Jv::from(num_f64(other).abs()),
        },
        Val::TStr(s) | Val::BStr(s) => Jv::from(char_count(s)),
        Val::Arr(a) => Jv::from(a.len()),
        Val::Obj(o) => Jv::from(o.len()),
    })
}

fn keys(v: &Val) -> ValR {
    match v {
        Val::Obj(o) => Ok(Jv(Val::Arr(Rc::new(o.keys().cloned().collect())))),
        Val::Arr(a) => Ok((0..a.len()).map(Jv::from).collect()),
        other => Err(err(format_args!("{} has no keys", describe(other)))),
    }
}

fn has(v: &Val, k: &Val) -> ValR {
    match (v, k) {
        (Val::Obj(o), Val::TStr(_)) => Ok(Jv::from(o.contains_key(k))),
        (Val::Arr(a), Val::Num(n)) => {
            let i = num_f64(n);
            Ok(Jv::from(i >= 0.0 && i < a.len() as f64))
        }
        // jq 1.6 answers `false` for null, whatever the key.
        (Val::Null, _) => Ok(Jv::from(false)),
        _ => Err(err(format_args!(
            "Cannot check whether {} has a {} key",
            kind(v),
            kind(k)
        ))),
    }
}

/// `a | contains(b)` at the top: values of different kinds are jq's error.
fn contains_top(a: &Val, b: &Val) -> ValR {
    if kind(a) != kind(b) {
        return Err(err(format_args!(
            "{} and {} cannot have their containment checked",
            describe(a),
            describe(b)
        )));
    }
    Ok(Jv::from(contains(a, b)))
}

/// jq's containment: a substring, every element of `b` in some element of `a`, every key of
/// `b` in `a` with a containing value, or else equality (so, below the top, values of
/// different kinds are simply not contained).
fn contains(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Obj(x), Val::Obj(y)) => y
            .iter()
            .all(|(k, yv)| x.get(k).is_some_and(|xv| contains(xv, yv))),
        (Val::Arr(x), Val::Arr(y)) => y.iter().all(|yv| x.iter().any(|xv| contains(xv, yv))),
        (Val::TStr(x), Val::TStr(y)) => memchr::memmem::find(x, y).is_some(),
        _ => a == b,
    }
}

/// jq 1.6's `indices`: of an element or a run in an array, of a substring in a string, and
/// otherwise `.[$i]` (so `{"a":1} | indices("a")` is 1, and null's is null).
fn indices(v: Jv, i: Jv) -> ValR {
    Ok(Jv(match (&v.0, &i.0) {
        (Val::Arr(a), Val::Arr(b)) => indices_of(a, b),
        (Val::Arr(a), x) => indices_of(a, std::slice::from_ref(x)),
        (Val::TStr(s), Val::TStr(sub)) => {
            if sub.is_empty() {
                Val::Null
            } else {
                // Character offsets, as jq 1.7 gives them.
                let found = memchr::memmem::find_iter(s, sub.as_ref())
                    .map(|at| Val::from(char_count(&s[..at])));
                Val::Arr(Rc::new(found.collect()))
            }
        }
        _ => return jaq_core::ValT::index(v, &i),
    }))
}

fn fromjson(v: &Val) -> ValR {
    let Val::TStr(s) = v else {
        return Err(err(format_args!(
            "{} only strings can be parsed",
            describe(v)
        )));
    };
    read_json(s).map(Jv).map_err(err)
}

/// A JSON text as jq reads it (`jv_parse`): strict JSON by the input's own parser, and where
/// that refuses, jq's reader, for jq's extra literals and jq's messages.
fn read_json(s: &bytes::Bytes) -> Result<Val, String> {
    // Where it refuses (too deep included), jq's reader says why in jq's words.
    crate::value::parse(s, FROMJSON_MAX_DEPTH)
        .or_else(|_| crate::jq::jvparse::parse(s, FROMJSON_MAX_DEPTH as usize))
}

/// jq's `tonumber`: a number, or a text that reads as one; a text that reads as anything else
/// is a type error, one that does not read is the reader's error.
fn tonumber(v: Jv) -> ValR {
    match &v.0 {
        Val::Num(_) => Ok(v),
        // jq reads the string as a C string: up to its first NUL.
        Val::TStr(s) => match read_json(&s.slice(..memchr::memchr(0, s).unwrap_or(s.len()))) {
            Ok(n @ Val::Num(_)) => Ok(Jv(n)),
            Ok(_) => Err(err(format_args!(
                "{} cannot be parsed as a number",
                describe(&v.0)
            ))),
            Err(msg) => Err(err(msg)),
        },
        other => Err(err(format_args!(
            "{} cannot be parsed as a number",
            describe(other)
        ))),
    }
}

/// `ltrimstr`/`rtrimstr`: jq passes anything that is not a string with the affix through.
fn trim(v: Jv, affix: &Jv, prefix: bool) -> Jv {
    let (Val::TStr(s), Val::TStr(a)) = (&v.0, &affix.0) else {
        return v;
    };
    let rest = if prefix {
        s[..].strip_prefix(&a[..])
    } else {
        s[..].strip_suffix(&a[..])
    };
    match rest {
        Some(rest) => Jv(Val::TStr(Box::new(s.slice_ref(rest)))),
        None => v,
    }
}

fn fix(v: &Jv, p: &Jv, name: &str, test: fn(&[u8], &[u8]) -> bool) -> ValR {
    match (&v.0, &p.0) {
        (Val::TStr(s), Val::TStr(p)) => Ok(Jv::from(test(s, p))),
        _ => Err(err(format_args!("{name}() requires string inputs"))),
    }
}

/// A path as a list of keys, or jq's error.
fn path_of(p: &Val) -> Result<&[Val], crate::jq::val::Error> {
    match p {
        Val::Arr(a) => Ok(a),
        _ => Err(err("Path must be specified as an array")),
    }
}

/// `delpaths(PATHS)`: every path deleted at once, as jq does (so `del(.[0,2])` deletes the
/// first and the third element, not the first and then the third of what is left).
pub(crate) fn delpaths(v: Jv, paths: Jv) -> ValR {
    let Val::Arr(paths) = &paths.0 else {
        return Err(err("Paths must be specified as an array"));
    };
    let mut paths: Vec<&[Val]> = paths.iter().map(path_of).collect::<Result<_, _>>()?;
    if paths.is_empty() {
        return Ok(v);
    }
    paths.sort();
    if paths[0].is_empty() {
        return Ok(Jv(Val::Null));
    }
    delete_sorted(v.0, &paths, 0).map(Jv)
}

/// Deletes `paths` (sorted, each longer than `depth`, all sharing their first `depth` keys)
/// from `v`, the value at that shared prefix.
fn delete_sorted(mut v: Val, paths: &[&[Val]], depth: usize) -> Result<Val, crate::jq::val::Error> {
    let mut whole = Vec::new();
    let mut i = 0;
    while i < paths.len() {
        let key = &paths[i][depth];
        // The group of paths under `key`: `key` itself may be NaN, which equals nothing.
        let mut j = i + 1;
        while j < paths.len() && &paths[j][depth] == key {
            j += 1;
        }
        if paths[i..j].iter().any(|p| p.len() == depth + 1) {
            whole.push(key.clone());
        } else {
            let child = Jv(v.clone()).index_path(key)?;
            if !matches!(child, Val::Null) {
                let new = delete_sorted(child, &paths[i..j], depth + 1)?;
                v = set_child(v, key, new)?;
            }
        }
        i = j;
    }
    delete_keys(v, &whole)
}

impl Jv {
    fn index_path(self, key: &Val) -> Result<Val, crate::jq::val::Error> {
        <Jv as jaq_core::ValT>::index(self, &Jv(key.clone())).map(|v| v.0)
    }
}

fn set_child(v: Val, key: &Val, new: Val) -> Result<Val, crate::jq::val::Error> {
    use jaq_core::ValT;
    let new = Jv(new);
    Jv(v)
        .map_index(&Jv(key.clone()), jaq_core::path::Opt::Essential, |_| {
            std::iter::once(Ok(new.clone()))
        })
        .map(|v| v.0)
        .map_err(|e| match e.get_err() {
            Ok(e) => e,
            Err(_) => err("path update raised a control-flow exception"),
        })
}

/// Deletes the children at `keys` from `v` at once.
fn delete_keys(v: Val, keys: &[Val]) -> Result<Val, crate::jq::val::Error> {
    if keys.is_empty() {
        return Ok(v);
    }
    match v {
        Val::Null => Ok(Val::Null),
        Val::Obj(mut o) => {
            let map: &mut Map = Rc::make_mut(&mut o);
            for k in keys {
                match k {
                    Val::TStr(_) => {
                        map.shift_remove(k);
                    }
                    other => {
                        return Err(err(format_args!(
                            "Cannot delete {} field of object",
                            kind(other)
                        )));
                    }
                }
            }
            Ok(Val::Obj(o))
        }
        Val::Arr(a) => {
            let len = a.len();
            let mut gone = vec![false; len];
            for k in keys {
                match k {
                    Val::Num(n) => {
                        let mut i = num_f64(n).trunc();
                        if i < 0.0 {
                            i += len as f64;
                        }
                        if i >= 0.0 && i < len as f64 {
                            gone[i as usize] = true;
                        }
                    }
                    Val::Obj(o) => {
                        let (start, end) = slice_key(o);
                        let (s, e) = slice_bounds(len, start.as_ref(), end.as_ref())?;
                        gone[s..e].iter_mut().for_each(|g| *g = true);
                    }
                    other => {
                        return Err(err(format_args!(
                            "Cannot delete {} element of array",
                            kind(other)
                        )));
                    }
                }
            }
            let kept = a
                .iter()
                .zip(gone)
                .filter(|(_, g)| !g)
                .map(|(x, _)| x.clone());
            Ok(Val::Arr(Rc::new(kept.collect())))
        }
        other => Err(err(format_args!(
            "Cannot delete fields from {}",
            kind(&other)
        ))),
    }
}

fn bsearch(a: &Val, x: &Val) -> ValR {
    match a {
        Val::Arr(a) => Ok(Jv::from(match a.binary_search_by(|y| y.cmp(x)) {
            Ok(i) => i as isize,
            Err(i) => -1 - i as isize,
        })),
        other => Err(err(format_args!(
            "{} cannot be searched from",
            describe(other)
        ))),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Sep {
    Csv,
    Tsv,
}

/// `@csv` and `@tsv`: one row from an array of scalars.
fn row(v: &Val, sep: Sep) -> ValR {
    let name = if sep == Sep::Csv { "csv" } else { "tsv" };
    let Val::Arr(items) = v else {
        return Err(err(format_args!(
            "{} cannot be {name}-formatted, only array",
            describe(v)
        )));
    };
    let mut out = String::new();
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push(if sep == Sep::Csv { ',' } else { '\t' });
        }
        match x {
            Val::Null => {}
            Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Val::Num(n) => crate::jq::number::write_num(&mut out, n),
            Val::TStr(s) | Val::BStr(s) => {
                let s = String::from_utf8_lossy(s);
                if sep == Sep::Csv {
                    out.push('"');
                    out.push_str(&s.replace('"', "\"\""));
                    out.push('"');
                } else {
                    for c in s.chars() {
                        match c {
                            '\\' => out.push_str("\\\\"),
                            '\t' => out.push_str("\\t"),
                            '\n' => out.push_str("\\n"),
                            '\r' => out.push_str("\\r"),
                            c => out.push(c),
                        }
                    }
                }
            }
            other => {
                return Err(err(format_args!(
                    "{} is not valid in a csv row",
                    describe(other)
                )));
            }
        }
    }
    Ok(Jv::from(out))
}

/// `@sh`: a string quoted for a POSIX shell, or an array of scalars each quoted and joined
/// by spaces.
fn sh(v: &Val) -> ValR {
    let items: &[Val] = match v {
        Val::Arr(a) => a,
        other => std::slice::from_ref(other),
    };
    let mut words = Vec::with_capacity(items.len());
    for x in items {
        words.push(match x {
            Val::TStr(s) | Val::BStr(s) => {
                format!("'{}'", String::from_utf8_lossy(s).replace('\'', "'\\''"))
            }
            Val::Arr(_) | Val::Obj(_) => {
                return Err(err(format_args!(
                    "{} can not be escaped for shell",
                    describe(x)
                )));
            }
            scalar => dump(scalar),
        });
    }
    Ok(Jv::from(words.join(" ")))
}

const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

fn base32(v: Jv) -> ValR {
    let s = <Jv as jaq_core::ValT>::into_string(v);
    let Val::TStr(bytes) = &s.0 else {
        unreachable!("into_string gives a string")
    };
    let mut out = String::new();
    for chunk in bytes.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = u64::from_be_bytes([0, 0, 0, buf[0], buf[1], buf[2], buf[3], buf[4]]);
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(BASE32[((bits >> (35 - 5 * i)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    Ok(Jv::from(out))
}

fn base32d(v: &Val) -> ValR {
    let text = match v {
        Val::TStr(s) => s.clone(),
        other => Box::new(bytes::Bytes::from(dump(other))),
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u64, 0u32);
    for &c in text.iter().take_while(|c| **c != b'=') {
        let Some(d) = BASE32.iter().position(|b| *b == c.to_ascii_uppercase()) else {
            return Err(err(format_args!(
                "{} is not valid base32 data",
                describe(v)
            )));
        };
        acc = (acc << 5) | d as u64;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(Jv(Val::utf8_str(out)))
}

/// `@base64d` as jq 1.6 decodes: the text of a non-string, up to its first `=`, with or
/// without padding; a lone trailing character or one outside the alphabet is jq's error.
fn base64d(v: &Val) -> ValR {
    let text = match v {
        Val::TStr(s) => s.clone(),
        other => Box::new(bytes::Bytes::from(dump(other))),
    };
    let fail = |what: &str| {
        let shown = describe(&Val::TStr(text.clone()));
        Err(err(format_args!("{shown} {what}")))
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    let (mut acc, mut n) = (0u32, 0);
    for &c in text.iter().take_while(|c| **c != b'=') {
        let d = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return fail("is not valid base64 data"),
        };
        acc = acc << 6 | u32::from(d);
        n += 1;
        if n == 4 {
            out.extend_from_slice(&acc.to_be_bytes()[1..]);
            (acc, n) = (0, 0);
        }
    }
    match n {
        3 => out.extend_from_slice(&(acc >> 2).to_be_bytes()[2..]),
        2 => out.push((acc >> 4) as u8),
        1 => return fail("trailing base64 byte found"),
        _ => {}
    }
    Ok(Jv::from(jq_lossy(&out)))
}

/// Bytes as a string the way jq makes one of bytes that may not be UTF-8: each bad sequence
/// (a stray byte, a sequence cut short by the end, an overlong one, a surrogate) is one U+FFFD.
fn jq_lossy(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let first = bytes[i];
        let length = match first {
            0x00..=0x7F => 1,
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => 0,
        };
        if length == 1 || length == 0 {
            out.push(if length == 1 {
                char::from(first)
            } else {
                char::REPLACEMENT_CHARACTER
            });
            i += 1;
            continue;
        }
        if i + length > bytes.len() {
            out.push(char::REPLACEMENT_CHARACTER);
            break;
        }
        let mut code = u32::from(first) & (0x7F >> length);
        let mut taken = length;
        for (k, &b) in bytes[i + 1..i + length].iter().enumerate() {
            if b & 0xC0 != 0x80 {
                taken = k + 1;
                code = u32::MAX;
                break;
            }
            code = code << 6 | u32::from(b & 0x3F);
        }
        let least = [0, 0, 0x80, 0x800, 0x10000][length];
        out.push(match code {
            c if c < least => char::REPLACEMENT_CHARACTER,
            c => char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER),
        });
        i += taken;
    }
    out
}

/// `@uri`: every byte percent-encoded but jq 1.6's unreserved ones (`A-Za-z0-9-_.!~*'()`).
fn uri(v: &Val) -> ValR {
    let Val::TStr(s) = v else {
        return Err(err(format_args!("{} cannot be URI-encoded", describe(v))));
    };
    let mut out = String::with_capacity(s.len());
    for &b in s.iter() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(Jv::from(out))
}

/// The C library's math functions jq 1.6 calls, so that results agree with jq's to the last
/// digit (Rust's own and the `libm` crate's differ in the last place on some inputs).
mod cmath {
    mod c {
        // glibc's libm, which the worker links already.
        unsafe extern "C" {
            pub(super) fn floor(x: f64) -> f64;
            pub(super) fn ceil(x: f64) -> f64;
            pub(super) fn round(x: f64) -> f64;
            pub(super) fn trunc(x: f64) -> f64;
            pub(super) fn rint(x: f64) -> f64;
            pub(super) fn nearbyint(x: f64) -> f64;
            pub(super) fn fabs(x: f64) -> f64;
            pub(super) fn sqrt(x: f64) -> f64;
            pub(super) fn cbrt(x: f64) -> f64;
            pub(super) fn exp(x: f64) -> f64;
            pub(super) fn exp2(x: f64) -> f64;
            pub(super) fn exp10(x: f64) -> f64;
            pub(super) fn expm1(x: f64) -> f64;
            pub(super) fn log(x: f64) -> f64;
            pub(super) fn log2(x: f64) -> f64;
            pub(super) fn log10(x: f64) -> f64;
            pub(super) fn log1p(x: f64) -> f64;
            pub(super) fn sin(x: f64) -> f64;
            pub(super) fn cos(x: f64) -> f64;
            pub(super) fn tan(x: f64) -> f64;
            pub(super) fn asin(x: f64) -> f64;
            pub(super) fn acos(x: f64) -> f64;
            pub(super) fn atan(x: f64) -> f64;
            pub(super) fn sinh(x: f64) -> f64;
            pub(super) fn cosh(x: f64) -> f64;
            pub(super) fn tanh(x: f64) -> f64;
            pub(super) fn asinh(x: f64) -> f64;
            pub(super) fn acosh(x: f64) -> f64;
            pub(super) fn atanh(x: f64) -> f64;
            pub(super) fn lgamma(x: f64) -> f64;
            pub(super) fn tgamma(x: f64) -> f64;
            pub(super) fn j0(x: f64) -> f64;
            pub(super) fn j1(x: f64) -> f64;
            pub(super) fn y0(x: f64) -> f64;
            pub(super) fn y1(x: f64) -> f64;
            pub(super) fn significand(x: f64) -> f64;
            pub(super) fn logb(x: f64) -> f64;
            pub(super) fn gamma(x: f64) -> f64;
            pub(super) fn pow(x: f64, y: f64) -> f64;
            pub(super) fn atan2(x: f64, y: f64) -> f64;
            pub(super) fn fmod(x: f64, y: f64) -> f64;
            pub(super) fn hypot(x: f64, y: f64) -> f64;
            pub(super) fn copysign(x: f64, y: f64) -> f64;
            pub(super) fn fdim(x: f64, y: f64) -> f64;
            pub(super) fn fmax(x: f64, y: f64) -> f64;
            pub(super) fn fmin(x: f64, y: f64) -> f64;
            pub(super) fn nextafter(x: f64, y: f64) -> f64;
            pub(super) fn remainder(x: f64, y: f64) -> f64;
            pub(super) fn scalb(x: f64, y: f64) -> f64;
            pub(super) fn ldexp(x: f64, e: i32) -> f64;
            pub(super) fn scalbln(x: f64, e: std::ffi::c_long) -> f64;
            pub(super) fn frexp(x: f64, e: *mut i32) -> f64;
            pub(super) fn modf(x: f64, int: *mut f64) -> f64;
            pub(super) fn lgamma_r(x: f64, sign: *mut i32) -> f64;
        }
    }

    macro_rules! safe {
        ($($f:ident)*) => {$(
            pub(super) fn $f(x: f64) -> f64 {
                // SAFETY: a pure function of a double; it reads and writes no memory of ours
                // (lgamma sets the C library's `signgam`, which nothing here reads).
                unsafe { c::$f(x) }
            }
        )*};
    }

    macro_rules! safe2 {
        ($($f:ident)*) => {$(
            pub(super) fn $f(x: f64, y: f64) -> f64 {
                // SAFETY: a pure function of two doubles.
                unsafe { c::$f(x, y) }
            }
        )*};
    }

    safe2!(pow atan2 fmod hypot copysign fdim fmax fmin nextafter remainder scalb);

    /// A double cast to a C integer as x86-64 casts it: out of range (or NaN) is the type's
    /// smallest value.
    fn cast<T: TryFrom<i64> + Copy>(x: f64, min: T) -> T {
        // -2^63 ≤ x < 2^63 is exactly what an i64 holds.
        const TWO_63: f64 = 9_223_372_036_854_775_808.0;
        match (-TWO_63..TWO_63).contains(&x) {
            true => T::try_from(x as i64).unwrap_or(min),
            false => min,
        }
    }

    /// C's `ldexp`, whose exponent is an `int`: jq passes the double cast to one.
    pub(super) fn ldexp(x: f64, e: f64) -> f64 {
        // SAFETY: a pure function of a double and an int.
        unsafe { c::ldexp(x, cast(e, i32::MIN)) }
    }

    /// C's `scalbln`, whose exponent is a `long`: jq passes the double cast to one.
    pub(super) fn scalbln(x: f64, e: f64) -> f64 {
        // SAFETY: a pure function of a double and a long.
        unsafe { c::scalbln(x, cast(e, std::ffi::c_long::MIN)) }
    }

    pub(super) fn frexp(x: f64) -> (f64, i32) {
        let mut e = 0;
        // SAFETY: frexp writes the exponent through the pointer, to a local of ours.
        let m = unsafe { c::frexp(x, &mut e) };
        (m, e)
    }

    pub(super) fn modf(x: f64) -> (f64, f64) {
        let mut int = 0.0;
        // SAFETY: modf writes the integral part through the pointer, to a local of ours.
        let frac = unsafe { c::modf(x, &mut int) };
        (frac, int)
    }

    pub(super) fn lgamma_r(x: f64) -> (f64, i32) {
        let mut sign = 0;
        // SAFETY: lgamma_r writes the sign through the pointer, to a local of ours.
        let v = unsafe { c::lgamma_r(x, &mut sign) };
        (v, sign)
    }

    safe!(floor ceil round trunc rint nearbyint fabs sqrt cbrt exp exp2 exp10 expm1 log log2
        log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh lgamma tgamma
        j0 j1 y0 y1 significand logb gamma);
}
