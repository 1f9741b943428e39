//! jq's updates (`f |= g`, `f = $v`, `f += $v`, `f //= $v`, …) where jaq's differ.
//!
//! jq defines an update by the paths of its left-hand side, all taken from the input as it
//! was: `reduce path(f) as $p (.; setpath($p; getpath($p) | g))`, where `g`'s first output
//! replaces the value and an empty `g` marks the path, and the marked paths are deleted
//! together at the end (jq 1.7's `_modify`). jaq instead walks the left-hand side over the
//! value as it is being changed, applies `g` to `..`'s children before their parent, and
//! passes every output of `g` on where the path is `.` itself. The answers differ where the
//! left-hand side holds `.` (`. |= empty` is `null` in jq), `..` with a `g` that changes
//! containers (`.. |= (objects | del(.k))` puts `"k": null` back in jq), or several paths into
//! one array with an empty `g` (`(.[0], .[1]) |= empty`).
//!
//! [`crate::jq::desugar::wrap_updates`] wraps the left-hand side of every `|=` in
//! `_jqjail_modify(…)`, whose update is jq's, and of every other update operator unless it
//! is a plain chain of steps (`.a.b`, `.[]`, `.[0]?`): with exactly one value to write, jaq's
//! update gives jq's answer there, and changes the value in place.

use crate::jq::Data;
use crate::jq::val::Jv;
use jaq_core::native::Fun;
use jaq_core::path::Opt;
use jaq_core::{Bind, Native, PathsPtr, RunPtr, UpdatePtr, ValT, ValX, ValXs};
use jaq_json::{Rc, Val};

/// `_jqjail_modify(f)`: runs as `f` and has `f`'s paths; updates as jq does.
pub fn fun() -> Fun<Data> {
    let run: RunPtr<Data> = |mut cv| {
        let (f, fc) = cv.0.pop_fun();
        f.run((fc, cv.1))
    };
    let paths: PathsPtr<Data> = |mut cv| {
        let (f, fc) = cv.0.pop_fun();
        f.paths((fc, cv.1))
    };
    let update: UpdatePtr<Data> = |mut cv, g| {
        let (f, fc) = cv.0.pop_fun();
        let paths = f.paths((fc, (cv.1.clone(), Default::default())));
        // Each path as its keys from the top (jaq's list holds them from the bottom).
        let paths = paths.map(|r| {
            r.map(|(_, list)| {
                let mut path: Vec<Jv> = list.iter().cloned().collect();
                path.reverse();
                path
            })
        });
        Box::new(std::iter::once(modify(cv.1, paths, &*g)))
    };
    (
        "_jqjail_modify",
        Box::new([Bind::Fun(())]),
        Native::<Data>::new(run)
            .with_paths(paths)
            .with_update(update),
    )
}

/// jq's `_modify`: each of `paths` (taken from `input` as it was) set to the first output of
/// `g` on the value there; where `g` is empty, the path is only marked (nothing on the way to
/// it is created), and the marked paths are deleted together at the end.
fn modify<'a, P>(input: Jv, paths: P, g: &dyn Fn(Jv) -> ValXs<'a, Jv>) -> ValX<'a, Jv>
where
    P: Iterator<Item = ValX<'a, Vec<Jv>, Jv>>,
{
    let mut state = input;
    let mut marked = Vec::new();
    for path in paths {
        let path = path?;
        // `g`'s outputs past the first are never computed, and it is let go before writing.
        let first = g(get_path(&state, &path)?).next().transpose()?;
        match first {
            Some(new) => state = set_path(state, &path, &new)?,
            None => marked.push(Val::Arr(Rc::new(path.into_iter().map(|p| p.0).collect()))),
        }
    }
    Ok(crate::jq::funs::delpaths(
        state,
        Jv(Val::Arr(Rc::new(marked))),
    )?)
}

/// jq's `getpath`: `null` past a missing key or `null`, an error where a step cannot index.
fn get_path(v: &Jv, path: &[Jv]) -> Result<Jv, crate::jq::val::Error> {
    let mut v = v.clone();
    for key in path {
        if matches!(v.0, Val::Null) {
            return Ok(v);
        }
        v = v.index(key)?;
    }
    Ok(v)
}

/// `v` with `new` at `path`: jq's `setpath`, which creates what is missing and pads arrays
/// with nulls.
fn set_path<'a>(v: Jv, path: &[Jv], new: &Jv) -> ValX<'a, Jv> {
    match path.split_first() {
        None => Ok(new.clone()),
        Some((key, rest)) => v.map_index(key, Opt::Essential, |child| {
            std::iter::once(set_path(child, rest, new))
        }),
    }
}
