//! jq as jq does it: the layer jqjail puts between jaq's engine and the user, so that a
//! filter written for jq gets jq's answer or an error that names what is not supported.
//!
//! - [`val`]: the value type ([`Jv`]) with jq's indexing, path updates, arithmetic and text;
//! - [`number`]: numbers written as jq writes them;
//! - [`funs`] and `defs.jq`: jq's builtins where jaq's differ or are missing;
//! - [`desugar`]: jq syntax jaq's parser lacks (`?//`, `$__loc__`, `$name: pattern`),
//!   rewritten into syntax it has before compiling.

pub mod desugar;
pub mod funs;
pub mod number;
pub mod val;

pub use val::Jv;

/// What jqjail's filters run on.
pub type Data = jaq_core::data::JustLut<Jv>;

/// jq's definitions that jqjail adds after jaq's standard library.
pub const DEFS: &str = include_str!("defs.jq");

/// jaq's natives that jqjail replaces (by a native of its own or a definition in `DEFS`).
const REPLACED: [&str; 12] = [
    "keys_unsorted",
    "utf8bytelength",
    "ltrimstr",
    "rtrimstr",
    "startswith",
    "endswith",
    "tobytes",
    "localtime",
    "strflocaltime",
    "env",
    "stderr_empty",
    "strptime",
];

/// jaq's natives that jqjail's definitions wrap, under a second name: jaq's own definitions
/// keep calling them by the first, and jqjail's definitions of the first name shadow them
/// for filters.
fn alias(name: &str) -> Option<&'static str> {
    Some(match name {
        "limit" => "_jaq_limit",
        "range" => "_jaq_range",
        "reverse" => "_jaq_reverse",
        "mktime" => "_jaq_mktime",
        "gmtime" => "_jaq_gmtime",
        "strftime" => "_jaq_strftime",
        _ => return None,
    })
}

/// jaq's generic natives (less the replaced ones, some under a second name too) and
/// jqjail's own.
pub fn natives() -> impl Iterator<Item = jaq_core::native::Fun<Data>> {
    let jaq = || jaq_core::funs::<Data>().chain(jaq_std::funs::<Data>());
    let aliases = jaq().filter_map(|(name, arity, f)| Some((alias(name)?, arity, f)));
    jaq()
        .filter(|(name, _, _)| !REPLACED.contains(name))
        .chain(aliases)
        .chain(funs::funs())
}
