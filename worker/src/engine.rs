//! Compiling and running one jq filter with jaq, inside the language sandbox (README, "Differences from jq").
//!
//! The sandbox, in one place:
//! - `env` and `$ENV` are the empty object (the native `env` is removed, and the worker's
//!   environment is empty anyway);
//! - `input` and `inputs` read the request's own values (none past a one-value input), never
//!   a file or the worker's stdin;
//! - `include`/`import` fail (the loader reads no files) and data imports are refused before
//!   compiling (jaq would otherwise panic or bind the wrong value);
//! - `localtime` and `strflocaltime` are UTC (`gmtime`, `strftime`), and `strptime` resolves
//!   no IANA zone names: no time-zone files are ever read (jaq-std's `strptime` would open the
//!   system zoneinfo database);
//! - `debug` and `stderr` write nowhere (no logger is installed); the last `stderr` message is
//!   kept (bounded) so that `halt_error` can report it;
//! - `halt` ends the run with the outputs so far; `halt_error` becomes an error.

use crate::jq::Jv;
use crate::output::{WriteError, write_value};
use jaq_core::load::{self, Arena, File, Loader};
use jaq_core::native::{Fun, v};
use jaq_core::{Compiler, Ctx, Vars};
use jaq_json::Val;
use jqjail_protocol::ErrorCode;
use jqjail_protocol::Outputs;
use jqjail_protocol::limits::grouped;
use std::cell::RefCell;

type Data = crate::jq::Data;

/// The definitions jqjail adds to (and overrides in) jaq's standard library.
const SANDBOX_DEFS: &str = r#"
def env: {};
def input_filename: null;
def localtime:
  if type == "number" then gmtime else error("localtime() requires numeric inputs") end;
def strflocaltime($f):
  if type == "number" or _is_bdt then strftime($f)
  else error("strflocaltime/1 requires parsed datetime inputs") end;
"#;

/// jaq's definitions that jqjail's natives replace (a definition would shadow a native).
const DROPPED_DEFS: [(&str, usize); 5] = [
    ("tonumber", 0),
    ("nan", 0),
    ("infinite", 0),
    ("@sh", 0),
    ("delpaths", 1),
];

/// jq's `builtins`: the name and arity of every definition and native a filter can call,
/// but those whose name starts with `_` (jqjail's and jaq's helpers) and the `@formats`.
/// Set once per process by [`Engine::new`]; the native `builtins` reads it.
static BUILTINS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

fn set_builtins(defs: &[load::parse::Def<&'static str>], natives: &[Fun<Data>]) {
    BUILTINS.get_or_init(|| {
        let mut names: Vec<String> = defs
            .iter()
            .map(|d| (d.name, d.args.len()))
            .chain(natives.iter().map(|(name, args, _)| (*name, args.len())))
            .filter(|(name, _)| !name.starts_with(['_', '@']))
            .map(|(name, arity)| format!("{name}/{arity}"))
            .collect();
        names.sort();
        names.dedup();
        names
    });
}

/// The longest message text kept from a filter (`error(…)`, `halt_error`).
const MAX_MESSAGE_BYTES: usize = 4096;

thread_local! {
    /// The values `input` and `inputs` have yet to read (a worker runs one job, on one
    /// thread; [`Engine::run_with`] fills it and empties it).
    static INPUTS: RefCell<std::collections::VecDeque<Val>> = RefCell::default();
    /// The last value passed to `stderr` (and so to `halt_error`), cut to MAX_MESSAGE_BYTES.
    static LAST_STDERR: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A failed evaluation, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    /// Stable code.
    pub code: ErrorCode,
    /// Message naming the limit and value where there is one.
    pub message: String,
    /// The limit hit.
    pub limit: Option<u64>,
    /// The value that hit it.
    pub actual: Option<u64>,
}

impl EvalError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            limit: None,
            actual: None,
        }
    }
}

/// A compiled filter.
pub struct Compiled(jaq_core::Filter<Data>);

/// jaq with the standard library parsed once, so that a worker pays for it before its request.
///
/// A filter is compiled with only the library definitions it can reach: those named anywhere
/// in its text, and, transitively, those their bodies call. jaq compiles every definition it
/// is given, so this takes a small filter's compilation from about 0.5 ms to a fraction of
/// that. The names in the text are an over-approximation (a word inside a string counts too),
/// and definitions keep their library order, so a kept definition resolves its calls exactly
/// as it would with the whole library.
pub struct Engine {
    defs: Vec<load::parse::Def<&'static str>>,
    /// For each definition, the names its body calls.
    calls: Vec<Vec<&'static str>>,
    /// The definitions of each name (every arity).
    by_name: std::collections::HashMap<&'static str, Vec<usize>>,
    /// The natives, built ahead for the next compile (which consumes them): in the zygote,
    /// before the fork, and again by [`Engine::prepare`] after a worker's warm-up, so that
    /// building them (a few microseconds) is never on a request's path.
    natives: std::sync::Mutex<Option<Vec<Fun<Data>>>>,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    /// Parses the standard library and the sandbox definitions.
    pub fn new() -> Self {
        let sandbox = load::parse(SANDBOX_DEFS, |p| p.defs())
            .expect("SANDBOX_DEFS is valid jq (checked by a unit test)");
        let jq = load::parse(crate::jq::DEFS, |p| p.defs())
            .expect("jq/defs.jq is valid jq (checked by a unit test)");
        let defs: Vec<_> = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs())
            .filter(|d| !DROPPED_DEFS.contains(&(d.name, d.args.len())))
            .chain(jq)
            .chain(sandbox)
            .collect();
        let calls = defs
            .iter()
            .map(|d| {
                let mut names = Vec::new();
                called(&d.body, &mut names);
                names
            })
            .collect();
        let mut by_name = std::collections::HashMap::<_, Vec<usize>>::new();
        for (i, d) in defs.iter().enumerate() {
            by_name.entry(d.name).or_default().push(i);
        }
        let ready: Vec<_> = natives().collect();
        set_builtins(&defs, &ready);
        Self {
            defs,
            calls,
            by_name,
            natives: std::sync::Mutex::new(Some(ready)),
        }
    }

    /// The natives built ahead, or built now.
    fn take_natives(&self) -> Vec<Fun<Data>> {
        let ready = self.natives.lock().ok().and_then(|mut n| n.take());
        ready.unwrap_or_else(|| natives().collect())
    }

    /// Builds the natives for the next compile, if the last one took them.
    pub fn prepare(&self) {
        if let Ok(mut ready) = self.natives.lock()
            && ready.is_none()
        {
            *ready = Some(natives().collect());
        }
    }

    /// The library definitions `code` can reach, in library order.
    fn reachable(&self, code: &str) -> Vec<&load::parse::Def<&'static str>> {
        let mut keep = vec![false; self.defs.len()];
        let mut todo = Vec::new();
        let mut mark = |name: &str, todo: &mut Vec<usize>| {
            for &i in self.by_name.get(name).into_iter().flatten() {
                if !keep[i] {
                    keep[i] = true;
                    todo.push(i);
                }
            }
        };
        for word in words(code) {
            mark(word, &mut todo);
        }
        while let Some(i) = todo.pop() {
            for name in &self.calls[i] {
                mark(name, &mut todo);
            }
        }
        self.defs
            .iter()
            .zip(keep)
            .filter_map(|(d, k)| k.then_some(d))
            .collect()
    }

    /// Compiles `code`, refusing module and data imports.
    pub fn compile(&self, code: &str) -> Result<Compiled, EvalError> {
        self.compile_with(code, &[])
    }

    /// Compiles `code` with `$ENV`, `$ARGS` and `$NAME` for each of `names` defined, refusing
    /// module and data imports.
    pub fn compile_with(&self, code: &str, names: &[&str]) -> Result<Compiled, EvalError> {
        let desugared =
            crate::jq::desugar::desugar(code).map_err(|why| compile_error(vec![why]))?;
        let wrapped = crate::jq::desugar::wrap_updates(&desugared);
        let (code, inserted) = match &wrapped {
            Some((text, inserted)) => (text.as_str(), inserted.as_slice()),
            None => (&*desugared, &[][..]),
        };
        // Messages name places in the text before the updates were wrapped.
        let code_src = Source {
            compiled: code,
            shown: &desugared,
            inserted,
        };
        let arena = Arena::default();
        let loader = Loader::new(self.reachable(code).into_iter().cloned());
        let modules = loader
            .load(&arena, File { code, path: () })
            .map_err(|errs| compile_error(load_errors(&code_src, errs)))?;
        load::import(&modules, |import| {
            Err(format!(
                "data import \"{}\" is disabled in jqjail: filters cannot read files",
                import.path
            ))
        })
        .map_err(|errs| compile_error(load_errors(&code_src, errs)))?;
        // The compiler keeps its variable names for the filter's life; a worker compiles
        // once, so the few bytes of a run's argument names are leaked rather than tracked.
        let globals = ["$ENV", "$ARGS"].into_iter().chain(
            names
                .iter()
                .map(|n| &*Box::leak(format!("${n}").into_boxed_str())),
        );
        let filter = Compiler::default()
            .with_global_vars(globals)
            .with_funs(self.take_natives())
            .compile(modules)
            .map_err(|errs| {
                let mut lines = Vec::new();
                for (_file, undefined) in errs {
                    for (name, kind) in undefined {
                        lines.push(format!(
                            "undefined {} `{name}` at {}",
                            kind.as_str(),
                            position(&code_src, name)
                        ));
                    }
                }
                compile_error(lines)
            })?;
        Ok(Compiled(filter))
    }

    /// Runs a compiled filter over `input` and renders the answer: one output → that value,
    /// several → an array of them, none → `null`. Stops as soon as the text would pass
    /// `max_output_bytes`, array framing included.
    pub fn run(
        &self,
        filter: &Compiled,
        input: Val,
        max_output_bytes: u64,
    ) -> Result<String, EvalError> {
        let no_args = Val::obj(
            [
                (
                    Val::from("positional".to_string()),
                    Val::Arr(Vec::new().into()),
                ),
                (Val::from("named".to_string()), Val::obj(Default::default())),
            ]
            .into_iter()
            .collect(),
        );
        self.run_with(
            filter,
            RunInput::One(input),
            no_args,
            Vec::new(),
            Outputs::Collapsed,
            max_output_bytes,
        )
    }

    /// [`Engine::run`] with `$ARGS` and the named values, in the order of the names the
    /// filter was compiled with, over one input or over a stream of them.
    pub fn run_with(
        &self,
        filter: &Compiled,
        input: RunInput,
        args: Val,
        named: Vec<Val>,
        outputs: Outputs,
        max_output_bytes: u64,
    ) -> Result<String, EvalError> {
        let env = Val::obj(Default::default());
        let vars: Vec<Jv> = [env, args].into_iter().chain(named).map(Jv).collect();
        let mut answer = Answer::new(max_output_bytes, outputs);
        let (first, rest, each) = match input {
            RunInput::One(v) => (Some(v), Vec::new(), false),
            RunInput::Values { values, null_input } => {
                (null_input.then_some(Val::Null), values, !null_input)
            }
        };
        INPUTS.with(|i| *i.borrow_mut() = rest.into());
        let result = (|| {
            if let Some(v) = first
                && self.run_one(filter, &vars, v, &mut answer)? == Run::Halted
            {
                return Ok(());
            }
            // As jq runs a stream: each value that `input` and `inputs` left unread.
            while each && let Some(v) = INPUTS.with(|i| i.borrow_mut().pop_front()) {
                if self.run_one(filter, &vars, v, &mut answer)? == Run::Halted {
                    break;
                }
            }
            Ok(())
        })();
        // Values never freed, as the input is not (see `evaluate`).
        INPUTS.with(|i| {
            std::mem::take(&mut *i.borrow_mut())
                .into_iter()
                .for_each(std::mem::forget)
        });
        result?;
        answer.finish()
    }

    /// Runs the filter once over `input`, into `answer`.
    fn run_one(
        &self,
        filter: &Compiled,
        vars: &[Jv],
        input: Val,
        answer: &mut Answer,
    ) -> Result<Run, EvalError> {
        let filter = &filter.0;
        let ctx = Ctx::<Data>::new(&filter.lut, Vars::new(vars.iter().cloned()));
        for item in filter.id.run((ctx, Jv(input))) {
            let value = match item {
                Ok(value) => value,
                Err(exn) => match exn.get_err() {
                    Ok(err) => {
                        return Err(EvalError::new(
                            ErrorCode::RuntimeError,
                            format!("filter error: {}", message_text(err.into_val().0)),
                        ));
                    }
                    Err(exn) => match exn.get_halt() {
                        Ok(0) => return Ok(Run::Halted),
                        Ok(status) => {
                            let said = LAST_STDERR
                                .with(|m| m.borrow_mut().take())
                                .unwrap_or_default();
                            return Err(EvalError::new(
                                ErrorCode::RuntimeError,
                                format!("halt_error with exit status {status}: {said}"),
                            ));
                        }
                        Err(_) => {
                            return Err(EvalError::new(
                                ErrorCode::Internal,
                                "jaq raised an internal control-flow exception",
                            ));
                        }
                    },
                },
            };
            answer.push(value.0)?;
        }
        Ok(Run::Done)
    }
}

/// What a run reads.
pub enum RunInput {
    /// One value: the filter's input; `input` and `inputs` find nothing more.
    One(Val),
    /// A stream of values that `input` and `inputs` read; with `null_input` the filter runs
    /// once on `null` (jq's `-n`), else once per value they left unread.
    Values {
        /// The values, in order.
        values: Vec<Val>,
        /// jq's `-n`.
        null_input: bool,
    },
}

/// How one run of the filter ended.
#[derive(PartialEq, Eq)]
enum Run {
    Done,
    /// `halt`: the whole request ends, with the outputs so far.
    Halted,
}

/// `$ARGS` of a run without arguments: `{"positional": [], "named": {}}`, as in jq.
pub fn no_args() -> Val {
    Val::obj(
        [
            (
                Val::from("positional".to_string()),
                Val::Arr(Vec::new().into()),
            ),
            (Val::from("named".to_string()), Val::obj(Default::default())),
        ]
        .into_iter()
        .collect(),
    )
}

/// Renders a single value as the answer text, within the output cap (the path language's
/// answer is always exactly one value).
pub fn render(value: Val, outputs: Outputs, max_output_bytes: u64) -> Result<String, EvalError> {
    let mut answer = Answer::new(max_output_bytes, outputs);
    answer.push(value)?;
    answer.finish()
}

/// The answer text being built: collapsed, one output → that value, several → `[v1,v2,…]`,
/// none → `null`; or as lines, each output and a newline. Never longer than the cap, array
/// framing and newlines included.
struct Answer {
    out: Vec<u8>,
    count: usize,
    max: u64,
    limit: usize,
    lines: bool,
}

impl Answer {
    fn new(max_output_bytes: u64, outputs: Outputs) -> Answer {
        Answer {
            out: Vec::new(),
            count: 0,
            max: max_output_bytes,
            limit: usize::try_from(max_output_bytes).unwrap_or(usize::MAX),
            lines: outputs == Outputs::Lines,
        }
    }

    fn too_large(&self) -> EvalError {
        let mut e = EvalError::new(
            ErrorCode::OutputTooLarge,
            format!(
                "output is over the {}-byte limit (evaluation stopped at output value {}); narrow the filter, e.g. `.[:20]`, `keys` or `length`, or ask for paging",
                grouped(self.max),
                grouped(self.count as u64 + 1)
            ),
        );
        e.limit = Some(self.max);
        e.actual = Some(self.max.saturating_add(1));
        e
    }

    /// Appends one output value, failing as soon as the text would pass the cap.
    fn push(&mut self, value: Val) -> Result<(), EvalError> {
        // With a second value the text becomes `[v1,v2,…]`: keep room for the brackets. A
        // line keeps room for its newline.
        let result = if self.lines {
            write_value(&mut self.out, &value, self.limit.saturating_sub(1))
                .map(|()| self.out.push(b'\n'))
        } else if self.count == 0 {
            write_value(&mut self.out, &value, self.limit)
        } else {
            let framed = self.limit.saturating_sub(2);
            if self.out.len() + 1 > framed {
                Err(WriteError::OverBudget)
            } else {
                self.out.push(b',');
                write_value(&mut self.out, &value, framed)
            }
        };
        // Values are never dropped here: jaq's Drop recurses once per nesting level, and the
        // worker exits right after replying anyway.
        std::mem::forget(value);
        match result {
            Ok(()) => {
                self.count += 1;
                Ok(())
            }
            Err(WriteError::OverBudget) => Err(self.too_large()),
            Err(WriteError::NonJson(why)) => Err(EvalError::new(
                ErrorCode::NonJsonOutput,
                format!("output value {} is not JSON: {why}", self.count + 1),
            )),
        }
    }

    fn finish(self) -> Result<String, EvalError> {
        if self.lines {
            return String::from_utf8(self.out).map_err(|_| {
                EvalError::new(ErrorCode::Internal, "output writer produced non-UTF-8")
            });
        }
        let len = match self.count {
            0 => 4,
            1 => self.out.len(),
            _ => self.out.len() + 2,
        };
        if len > self.limit {
            return Err(self.too_large());
        }
        let text = match self.count {
            0 => b"null".to_vec(),
            1 => self.out,
            _ => {
                let mut framed = Vec::with_capacity(len);
                framed.push(b'[');
                framed.extend_from_slice(&self.out);
                framed.push(b']');
                framed
            }
        };
        String::from_utf8(text)
            .map_err(|_| EvalError::new(ErrorCode::Internal, "output writer produced non-UTF-8"))
    }
}

/// The natives of jaq-core, jaq-std and jaq-json, less the ones that reach outside the
/// process, plus jqjail's replacements.
/// The words of a filter's text that could name a definition: identifiers, and `@format`
/// names.
fn words(code: &str) -> impl Iterator<Item = &str> {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = code.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() && !(is_word(bytes[i]) || bytes[i] == b'@') {
            i += 1;
        }
        if i == bytes.len() {
            return None;
        }
        let start = i;
        i += 1;
        while i < bytes.len() && is_word(bytes[i]) {
            i += 1;
        }
        Some(&code[start..i])
    })
}

/// Every name a term calls (filters, and `@format` strings), into `out`.
fn called<'a>(t: &load::parse::Term<&'a str>, out: &mut Vec<&'a str>) {
    use load::lex::StrPart;
    use load::parse::{BinaryOp, Pattern, Term};
    fn pattern<'a>(p: &Pattern<&'a str>, out: &mut Vec<&'a str>) {
        match p {
            Pattern::Var(_) => {}
            Pattern::Arr(ps) => ps.iter().for_each(|p| pattern(p, out)),
            Pattern::Obj(kvs) => {
                for (k, v) in kvs {
                    called(k, out);
                    pattern(v, out);
                }
            }
        }
    }
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Var(_) | Term::Break(_) => {}
        Term::Str(fmt, parts) => {
            out.extend(fmt.iter().copied());
            for part in parts {
                match part {
                    StrPart::Term(t) => called(t, out),
                    StrPart::Str(_) | StrPart::Char(_) => {}
                }
            }
        }
        Term::Arr(t) => t.iter().for_each(|t| called(t, out)),
        Term::Obj(kvs) => {
            for (k, v) in kvs {
                called(k, out);
                v.iter().for_each(|v| called(v, out));
            }
        }
        Term::Neg(t) | Term::Label(_, t) => called(t, out),
        Term::BinOp(l, op, r) => {
            called(l, out);
            called(r, out);
            if let BinaryOp::Pipe(Some(p)) = op {
                pattern(p, out);
            }
        }
        Term::Fold(_, x, p, args) => {
            called(x, out);
            pattern(p, out);
            args.iter().for_each(|a| called(a, out));
        }
        Term::TryCatch(t, catch) => {
            called(t, out);
            catch.iter().for_each(|c| called(c, out));
        }
        Term::IfThenElse(branches, otherwise) => {
            for (cond, then) in branches {
                called(cond, out);
                called(then, out);
            }
            otherwise.iter().for_each(|e| called(e, out));
        }
        Term::Def(defs, t) => {
            defs.iter().for_each(|d| called(&d.body, out));
            called(t, out);
        }
        Term::Call(name, args) => {
            out.push(name);
            args.iter().for_each(|a| called(a, out));
        }
        Term::Path(t, path) => {
            called(t, out);
            for (part, _) in &path.0 {
                match part {
                    jaq_core::path::Part::Index(i) => called(i, out),
                    jaq_core::path::Part::Range(from, to) => {
                        from.iter().chain(to.iter()).for_each(|x| called(x, out));
                    }
                }
            }
        }
    }
}

fn natives() -> impl Iterator<Item = Fun<Data>> {
    crate::jq::natives().chain(sandbox_natives())
}

fn sandbox_natives() -> impl Iterator<Item = Fun<Data>> {
    let stderr_empty: jaq_core::RunPtr<Data> = |cv| {
        let text = message_text(cv.1.0);
        LAST_STDERR.with(|m| *m.borrow_mut() = Some(text));
        Box::new(core::iter::empty())
    };
    let strptime: jaq_core::RunPtr<Data> =
        |cv| jaq_core::native::unary(cv, |v, fmt| strptime_utc(&v.0, &fmt.0).map(Jv));
    // `input` and `inputs` read the request's own values, never the worker's stdin. Past the
    // last one `input` raises "break", as jq 1.6 and gojq do (jq 1.7 says "No more inputs").
    let input: jaq_core::RunPtr<Data> = |_| {
        let next = INPUTS.with(|i| i.borrow_mut().pop_front());
        jaq_core::native::bome(next.map(Jv).ok_or_else(|| crate::jq::val::err("break")))
    };
    let inputs: jaq_core::RunPtr<Data> = |_| {
        Box::new(std::iter::from_fn(|| {
            INPUTS
                .with(|i| i.borrow_mut().pop_front())
                .map(|v| Ok(Jv(v)))
        }))
    };
    let builtins: jaq_core::RunPtr<Data> = |_| {
        let names = BUILTINS.get().map(Vec::as_slice).unwrap_or_default();
        let list = names.iter().map(|n| Jv::from(n.clone())).collect();
        jaq_core::native::bome(Ok(list))
    };
    [
        jaq_core::native::run::<Data>(("builtins", v(0), builtins)),
        jaq_core::native::run::<Data>(("stderr_empty", v(0), stderr_empty)),
        jaq_core::native::run::<Data>(("strptime", v(1), strptime)),
        jaq_core::native::run::<Data>(("input", v(0), input)),
        jaq_core::native::run::<Data>(("inputs", v(0), inputs)),
    ]
    .into_iter()
}

/// jq's `strptime`: parses `text` with `fmt` into a broken-down time, in UTC unless the text
/// carries an offset. Unlike jaq-std's, it resolves time zones against an empty database, so
/// it never opens the system's zoneinfo files (which the worker's allowlist forbids).
fn strptime_utc(text: &Val, fmt: &Val) -> Result<Val, crate::jq::val::Error> {
    use jiff::fmt::strtime::BrokenDownTime;
    use jiff::tz::{Offset, TimeZoneDatabase};
    let as_str = |v: &Val| match v {
        Val::TStr(s) => std::str::from_utf8(s)
            .map(str::to_owned)
            .map_err(|_| crate::jq::val::err("strptime/1: string is not valid UTF-8")),
        _ => Err(crate::jq::val::err(
            "strptime/1 requires string inputs and arguments",
        )),
    };
    let (text, fmt) = (as_str(text)?, as_str(fmt)?);
    // jq's message for a date that does not match; jiff's reason would name its internals.
    let mut parsed = BrokenDownTime::parse(&fmt, &text).map_err(|_| {
        crate::jq::val::err(format!(
            "date {} does not match format {}",
            crate::jq::val::dump(&Val::from(text.clone())),
            crate::jq::val::dump(&Val::from(fmt.clone()))
        ))
    })?;
    if parsed.offset().is_none() && parsed.iana_time_zone().is_none() {
        parsed.set_offset(Some(Offset::UTC));
    }
    let dt = parsed
        .to_zoned_with(&TimeZoneDatabase::none())
        .map_err(crate::jq::val::err)?
        .datetime();
    let int = |n: i64| Val::Num(jaq_json::Num::Int(n as isize));
    let second = if dt.subsec_nanosecond() > 0 {
        Val::Num(jaq_json::Num::Float(
            f64::from(dt.second()) + f64::from(dt.subsec_nanosecond()) / 1e9,
        ))
    } else {
        int(dt.second().into())
    };
    let parts = vec![
        int(dt.year().into()),
        int(i64::from(dt.month()) - 1),
        int(dt.day().into()),
        int(dt.hour().into()),
        int(dt.minute().into()),
        second,
        int(dt.weekday().to_sunday_zero_offset().into()),
        int(i64::from(dt.day_of_year()) - 1),
    ];
    Ok(Val::Arr(jaq_json::Rc::new(parts)))
}

/// A value as a message: strings raw, anything else as JSON text; cut to a bounded length.
fn message_text(v: Val) -> String {
    let mut text = match &v {
        Val::TStr(s) => String::from_utf8_lossy(&s[..s.len().min(MAX_MESSAGE_BYTES)]).into_owned(),
        other => {
            let mut out = Vec::new();
            match write_value(&mut out, other, MAX_MESSAGE_BYTES) {
                Ok(()) => String::from_utf8_lossy(&out).into_owned(),
                Err(_) => format!("(a {} too large to show)", crate::output::type_name(other)),
            }
        }
    };
    std::mem::forget(v);
    if text.len() > MAX_MESSAGE_BYTES {
        let mut cut = MAX_MESSAGE_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

fn compile_error(lines: Vec<String>) -> EvalError {
    EvalError::new(
        ErrorCode::CompileError,
        format!("filter does not compile: {}", lines.join("; ")),
    )
}

fn load_errors(code: &Source<'_>, errs: load::Errors<&str, ()>) -> Vec<String> {
    let mut lines = Vec::new();
    for (_file, err) in errs {
        match err {
            load::Error::Io(items) => {
                for (path, why) in items {
                    // The loader reads no files: every include and module import ends here.
                    lines.push(format!(
                        "cannot load \"{path}\": modules are disabled in jqjail ({why})"
                    ));
                }
            }
            load::Error::Lex(items) => {
                for (expect, found) in items {
                    let what = match expect {
                        load::lex::Expect::Delim(open) => format!("a delimiter closing `{open}`"),
                        other => other.as_str().to_string(),
                    };
                    lines.push(format!("expected {what} at {}", position(code, found)));
                }
            }
            load::Error::Parse(items) => {
                for (expect, found) in items {
                    lines.push(format!(
                        "expected {} at {}",
                        expect.as_str(),
                        position(code, found)
                    ));
                }
            }
        }
    }
    lines
}

/// The text jaq compiles, and the text messages name places in: the same, but for the
/// `_jqjail_modify(…)` wrapped around updates (`inserted`, see `desugar::wrap_updates`).
struct Source<'a> {
    compiled: &'a str,
    shown: &'a str,
    inserted: &'a [(usize, usize)],
}

/// "line L, column C" of a slice of `code` (found by address), or "the end" for an empty slice
/// at the end.
fn position(code: &Source<'_>, part: &str) -> String {
    let (base, at) = (code.compiled.as_ptr() as usize, part.as_ptr() as usize);
    if at < base || at > base + code.compiled.len() {
        // A name in the library's text, not the filter's.
        return format!("jqjail's library (`{part}`)");
    }
    let start = load::span(code.compiled, part)
        .start
        .min(code.compiled.len());
    if start == code.compiled.len() {
        return "the end of the filter".into();
    }
    let start = crate::jq::desugar::unwrapped_offset(start, code.inserted);
    let before = code.shown.get(..start).unwrap_or(code.shown);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let shown: String = part.chars().take(40).collect();
    format!("line {line}, column {col} (`{shown}`)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(filter: &str, input: &str) -> Result<String, EvalError> {
        let engine = Engine::new();
        let compiled = engine.compile(filter)?;
        let input = jaq_json::read::parse_single(input.as_bytes()).unwrap();
        engine.run(&compiled, input, 100_000)
    }

    /// Pruning must never leave out a definition that a kept one calls: every library
    /// definition, called on its own, compiles with only what it reaches.
    #[test]
    fn every_definition_compiles_with_only_what_it_reaches() {
        let engine = Engine::new();
        let mut checked = 0;
        for d in &engine.defs {
            let code = match d.args.len() {
                0 => d.name.to_string(),
                n => format!("{}({})", d.name, vec!["."; n].join("; ")),
            };
            if let Err(e) = engine.compile(&code) {
                panic!("`{code}` does not compile when pruned: {}", e.message);
            }
            checked += 1;
        }
        assert!(checked > 100, "only {checked} definitions");
        // A filter that names nothing of the library keeps nothing of it.
        assert!(engine.reachable(".a[0]").is_empty());
        assert!(engine.reachable("map(.id)").len() < 5);
        assert_eq!(
            words("@base64d | x.y2_z").collect::<Vec<_>>(),
            ["@base64d", "x", "y2_z"]
        );
    }

    #[test]
    fn output_shapes() {
        assert_eq!(eval(".a", r#"{"a":"x"}"#).unwrap(), r#""x""#);
        assert_eq!(eval(".[]", "[1,2,3]").unwrap(), "[1,2,3]");
        assert_eq!(eval("empty", "1").unwrap(), "null");
        assert_eq!(eval(".[]", "[[1]]").unwrap(), "[1]");
    }

    #[test]
    fn sandbox_builtins() {
        assert_eq!(eval("env", "null").unwrap(), "{}");
        assert_eq!(eval("$ENV", "null").unwrap(), "{}");
        assert_eq!(eval("[inputs]", "null").unwrap(), "[]");
        assert_eq!(
            eval("input", "null").unwrap_err().code,
            ErrorCode::RuntimeError
        );
        assert_eq!(eval("0 | localtime | mktime", "null").unwrap(), "0");
        assert_eq!(
            eval(
                r#"strptime("%Y-%m-%dT%H:%M:%SZ") | mktime"#,
                r#""2015-03-05T23:51:47Z""#
            )
            .unwrap(),
            "1425599507"
        );
        for f in [
            r#"include "a"; ."#,
            r#"import "a" as a; ."#,
            r#"import "a" as $a; $a"#,
        ] {
            let err = eval(f, "null").unwrap_err();
            assert_eq!(err.code, ErrorCode::CompileError, "{f}");
            assert!(err.message.contains("disabled"), "{}", err.message);
        }
    }

    #[test]
    fn a_date_that_does_not_match_says_so_as_jq_does() {
        assert_eq!(
            eval(r#"try strptime("%Y") catch ."#, r#""bad""#).unwrap(),
            r#""date \"bad\" does not match format \"%Y\"""#
        );
    }

    #[test]
    fn halt_and_halt_error() {
        assert_eq!(eval("1, halt, 2", "null").unwrap(), "1");
        let err = eval(r#""bye" | halt_error"#, "null").unwrap_err();
        assert_eq!(err.code, ErrorCode::RuntimeError);
        assert_eq!(err.message, "halt_error with exit status 5: bye");
    }

    #[test]
    fn errors_name_what_and_where() {
        let err = eval("error(\"boom\")", "null").unwrap_err();
        assert_eq!(err.message, "filter error: boom");
        let err = eval(".a | nosuch(1)", "null").unwrap_err();
        assert_eq!(err.code, ErrorCode::CompileError);
        assert!(
            err.message.contains("undefined filter `nosuch`"),
            "{}",
            err.message
        );
        assert!(err.message.contains("line 1, column 6"), "{}", err.message);
        let err = eval("[1,", "null").unwrap_err();
        assert_eq!(err.code, ErrorCode::CompileError);
    }

    #[test]
    fn output_cap_counts_framing() {
        let engine = Engine::new();
        let f = engine.compile(".[]").unwrap();
        let input = || jaq_json::read::parse_single(b"[1,2,3]").unwrap();
        // "[1,2,3]" is 7 bytes.
        assert_eq!(engine.run(&f, input(), 7).unwrap(), "[1,2,3]");
        assert_eq!(
            engine.run(&f, input(), 6).unwrap_err().code,
            ErrorCode::OutputTooLarge
        );
        let null = engine.compile("empty").unwrap();
        assert_eq!(
            engine.run(&null, input(), 3).unwrap_err().code,
            ErrorCode::OutputTooLarge
        );
    }

    #[test]
    fn infinite_output_stops_at_the_cap() {
        let err = eval("repeat(1)", "null").unwrap_err();
        assert_eq!(err.code, ErrorCode::OutputTooLarge);
        assert!(
            err.message.contains("100,000-byte limit"),
            "{}",
            err.message
        );
    }

    /// jq writes NaN as `null` and the infinities as the largest doubles, in the output and
    /// in `tojson` alike.
    #[test]
    fn nan_and_infinite_print_as_jq_prints_them() {
        assert_eq!(eval("nan", "null").unwrap(), "null");
        assert_eq!(eval("infinite", "null").unwrap(), "1.7976931348623157e+308");
        assert_eq!(eval("[nan] | tojson", "null").unwrap(), r#""[null]""#);
    }

    #[test]
    fn big_integers_are_exact() {
        assert_eq!(
            eval(".", "12345678901234567890").unwrap(),
            "12345678901234567890"
        );
        assert_eq!(
            eval(".[0]", "[100000000000000000001]").unwrap(),
            "100000000000000000001"
        );
    }
}
