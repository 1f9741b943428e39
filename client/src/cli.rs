//! The `jqjail` command line: `jqjail FILTER [FILE]`.
//!
//! Prints the JSON answer on stdout. Errors go to stderr once, as `jqjail: CODE: message`,
//! control characters stripped, with an exit status per class ([`Exit`]). A closed stdout
//! (`jqjail … | head`) is not an error.
//!
//! Without `--socket` or `$JQJAIL_SOCKET`, it uses the system daemon if one listens at
//! [`crate::paths::SYSTEM_SOCKET`], else the user's private daemon, which it starts when none is running.

mod hide;
mod print;
mod prometheus;

use crate::{Answer, Client, ClientError, ErrorCode, OnOversize, RunOptions, Source};
use clap::Parser;
use jqjail_protocol::limits::grouped;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub use crate::discover::{DAEMON_EXECUTABLE, Handshake, PRIVATE_IDLE_EXIT, PRIVATE_START_TIMEOUT};

/// The MCP server's executable, which `jqjail mcp` runs: beside `jqjail`, else on `$PATH`.
pub const MCP_EXECUTABLE: &str = "jqjail-mcp";

/// Exit statuses, one per class of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// The filter ran and its answer was printed.
    Success = 0,
    /// `jqjail hide search` found no match.
    NoMatch = 1,
    /// Bad command-line usage.
    Usage = 2,
    /// The input cannot be used: unreadable, not JSON, too large or too deep.
    Input = 3,
    /// The filter does not compile or is too long.
    Filter = 4,
    /// The filter failed while running, or produced something that is not JSON.
    Runtime = 5,
    /// A resource limit stopped the filter: output, time, CPU, memory or stack.
    Limit = 6,
    /// The worker broke its sandbox or crashed.
    Sandbox = 7,
    /// No daemon could serve the request: not reachable, overloaded or shutting down.
    Unavailable = 8,
    /// A protocol or internal failure.
    Internal = 9,
    /// No such hide (or not this user's), or no such page of it.
    NotFound = 10,
}

impl Exit {
    /// The class of a server error code.
    pub fn of(code: ErrorCode) -> Exit {
        use ErrorCode::*;
        match code {
            InputTooLarge | InputTooDeep | InvalidJson => Exit::Input,
            FilterTooLong | CompileError | InvalidQuery => Exit::Filter,
            RuntimeError | NonJsonOutput | MissingProperty | TypeMismatch | IndexOutOfBounds => {
                Exit::Runtime
            }
            OutputTooLarge | Timeout | CpuLimit | MemoryLimit | StackLimit | ProjectionTooLarge
            | QuotaExceeded => Exit::Limit,
            SandboxViolation | WorkerCrashed => Exit::Sandbox,
            Overloaded | ShuttingDown | PermissionDenied | StoreUnavailable => Exit::Unavailable,
            NotFound | PageOutOfRange => Exit::NotFound,
            _ => Exit::Internal,
        }
    }
}

impl From<Exit> for u8 {
    fn from(e: Exit) -> u8 {
        e as u8
    }
}

/// jqjail: run a jq filter over JSON in a confined worker of a jqjail daemon.
#[derive(Debug, PartialEq, Parser)]
#[command(
    name = "jqjail",
    // As in jq, a flag given twice is simply on.
    args_override_self = true,
    version,
    after_help = "Subcommands: jqjail hide put|get|cut|search|list|rm|usage, jqjail shape [FILE | --hide ID], jqjail mcp, jqjail tools [openai|anthropic], jqjail stats.\n\nExit status: 0 ok, 1 search found nothing, 2 usage, 3 input, 4 filter, 5 runtime error, 6 limit, 7 sandbox, 8 daemon unavailable, 9 internal, 10 no such hide or page."
)]
struct Args {
    /// The jq filter (`.` when there is none and stdin or stdout is not a terminal, as in jq
    /// 1.6). With `-f` this word is the first input FILE.
    filter: Option<String>,
    /// The JSON input files, read one after another as one stream of values (as jq does);
    /// standard input if none, or where one is `-`. After `--args` or `--jsonargs` these
    /// words are positional arguments instead.
    // Not `conflicts_with = "hide"`: after `--args` these words are arguments, which a run
    // over a hide may take; `parse_run` refuses files with --hide once it has sorted them.
    #[arg(value_name = "FILE")]
    files: Vec<OsString>,
    /// The words after it (and after the filter) are strings in `$ARGS.positional`, not files.
    // Appended (not counted) so that every occurrence keeps its place on the command line:
    // `args_override_self` would keep only the last one's.
    #[arg(long = "args", num_args = 0, default_missing_value = "true", action = clap::ArgAction::Append)]
    string_args: Vec<bool>,
    /// The words after it (and after the filter) are JSON texts in `$ARGS.positional`.
    #[arg(long = "jsonargs", num_args = 0, default_missing_value = "true", action = clap::ArgAction::Append)]
    json_args: Vec<bool>,
    /// Filter a hide of the store instead of a file (the daemon reads it off its disk).
    #[arg(long, value_name = "ID")]
    hide: Option<String>,
    /// Output over the limit: `error` (OUTPUT_TOO_LARGE), or `hide` to keep it as a hide and
    /// print its first page.
    #[arg(long, default_value = "error", value_parser = ["error", "hide"])]
    on_oversize: String,
    /// The daemon's socket (default: $JQJAIL_SOCKET, the system daemon, or a private one).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The filter language: `jq`, or `path` for the JMESPath-like subset (`items[*].name`).
    #[arg(long, default_value = "jq", value_parser = ["jq", "path"])]
    lang: String,
    /// Wall-clock limit for this request: `500ms`, `2s`, or seconds.
    #[arg(long, value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Output limit for this request, in bytes.
    #[arg(long)]
    max_output: Option<u64>,
    /// `$NAME` is the string VALUE (repeatable). Values are data, never filter code.
    #[arg(long = "arg", num_args = 2, value_names = ["NAME", "VALUE"], action = clap::ArgAction::Append)]
    arg: Vec<String>,
    /// `$NAME` is the JSON value TEXT (repeatable).
    #[arg(long = "argjson", num_args = 2, value_names = ["NAME", "TEXT"], action = clap::ArgAction::Append)]
    argjson: Vec<String>,
    /// `$NAME` is FILE's text, as a string (read here, never by a worker).
    #[arg(long = "rawfile", num_args = 2, value_names = ["NAME", "FILE"], action = clap::ArgAction::Append)]
    rawfile: Vec<String>,
    /// `$NAME` is an array of the JSON values in FILE (read here, never by a worker).
    #[arg(long = "slurpfile", num_args = 2, value_names = ["NAME", "FILE"], action = clap::ArgAction::Append)]
    slurpfile: Vec<String>,
    /// Compact output: each output on one line.
    #[arg(short = 'c', long = "compact-output")]
    compact: bool,
    /// Strings printed raw, without quotes or escapes.
    #[arg(short = 'r', long = "raw-output")]
    raw: bool,
    /// As -r, with no newline after each output.
    #[arg(short = 'j', long = "join-output")]
    join: bool,
    /// Non-ASCII characters printed as \uXXXX escapes.
    #[arg(short = 'a', long = "ascii-output")]
    ascii: bool,
    /// Object keys printed in sorted order.
    #[arg(short = 'S', long = "sort-keys")]
    sort_keys: bool,
    /// A tab per indentation level.
    #[arg(long)]
    tab: bool,
    /// Spaces per indentation level (0 to 7; 0 prints compactly).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=7))]
    indent: u8,
    /// The input is `null`; FILE and stdin are not read.
    #[arg(short = 'n', long = "null-input")]
    null_input: bool,
    /// The input's JSON values, read as one array.
    #[arg(short = 's', long)]
    slurp: bool,
    /// Exit status from the last output: 1 if false or null, 4 if there was none.
    #[arg(short = 'e', long = "exit-status")]
    exit_status: bool,
    /// The filter is FILE's text (read here); every word is then an input FILE.
    #[arg(short = 'f', long = "from-file", value_name = "FILE")]
    from_file: Option<PathBuf>,
    /// Each line of the input is a string input; with `-s`, the whole input is one string.
    #[arg(short = 'R', long = "raw-input")]
    raw_input: bool,
    /// RS (0x1e) before each output; an RS in the input separates values (RFC 7464).
    #[arg(long)]
    seq: bool,
    /// Colour the output as jq does: the default where stdout is a terminal.
    #[arg(short = 'C', long = "color-output")]
    color: bool,
    /// Do not colour the output.
    #[arg(short = 'M', long = "monochrome-output")]
    monochrome: bool,
    /// Each input value as jq's stream of `[path, leaf]` events, each event an input.
    #[arg(long)]
    stream: bool,
    /// Accepted, as jq accepts it: each answer is written as soon as it comes.
    #[arg(long)]
    unbuffered: bool,
    /// jq's module search path: refused, since modules are disabled in jqjail.
    #[arg(short = 'L', value_name = "DIR", action = clap::ArgAction::Append)]
    library_path: Vec<String>,
}

/// The input's JSON values as one array, each value as spelled (`-s`). The values are cut as
/// a stream is ([`jqjail_protocol::values::split_values`]) and checked by the worker, which parses the array strictly.
fn slurp(input: &[u8]) -> Vec<u8> {
    let mut array = vec![b'['];
    for (i, value) in jqjail_protocol::values::split_values(input)
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            array.push(b',');
        }
        array.extend_from_slice(value);
    }
    array.push(b']');
    array
}

/// The named arguments of `--arg`, `--argjson`, `--rawfile` and `--slurpfile`, each value as
/// the JSON text the daemon takes. JSON texts keep their own spelling (big numbers stay exact).
fn named_args(args: &Args, order: &[(usize, Flag)]) -> Result<crate::Args, String> {
    let mut out = crate::Args::default();
    let pair = |list: &[String], i: usize| -> (String, String) {
        let name = list.get(2 * i).cloned().unwrap_or_default();
        (name, list.get(2 * i + 1).cloned().unwrap_or_default())
    };
    let read =
        |file: &str| std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"));
    let mut counts = [0usize; 4];
    // In command-line order, as jq binds them (and lists them in `$ARGS.named`).
    for &(_, flag) in order {
        let i = counts[flag as usize];
        counts[flag as usize] += 1;
        let (name, text) = match flag {
            Flag::Arg => {
                let (name, value) = pair(&args.arg, i);
                (name, serde_json::Value::String(value).to_string())
            }
            Flag::ArgJson => {
                let (name, text) = pair(&args.argjson, i);
                serde_json::from_str::<serde::de::IgnoredAny>(&text)
                    .map_err(|e| format!("--argjson {name}: not one JSON value: {e}"))?;
                (name, text)
            }
            Flag::RawFile => {
                let (name, file) = pair(&args.rawfile, i);
                (name, serde_json::Value::String(read(&file)?).to_string())
            }
            Flag::SlurpFile => {
                let (name, file) = pair(&args.slurpfile, i);
                let values = slurp(read(&file)?.as_bytes());
                (name, String::from_utf8(values).unwrap_or_default())
            }
        };
        if let Some(problem) = jqjail_protocol::message::arg_name_problem(&name) {
            return Err(problem);
        }
        // The first value of a name counts, as in jq.
        out.named.insert_first(name, text);
    }
    Ok(out)
}

/// The flags that bind a named value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flag {
    Arg = 0,
    ArgJson = 1,
    RawFile = 2,
    SlurpFile = 3,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 0.001)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 500ms or 2s"))?;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("`{text}` is not a positive duration"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

/// Reports a failed exchange with the daemon and picks its exit status.
fn failed(e: ClientError) -> Exit {
    match e {
        ClientError::Server(e) => {
            report(e.code.as_str(), &e.message);
            Exit::of(e.code)
        }
        other => {
            report("UNAVAILABLE", &other.to_string());
            Exit::Unavailable
        }
    }
}

/// Prints `jqjail: CODE: message` once, with control characters removed.
pub(crate) fn report(code: &str, message: &str) {
    let clean: String = message
        .chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect();
    let _ = writeln!(std::io::stderr(), "jqjail: {code}: {clean}");
}

/// `jqjail stats`: the daemon's counters.
#[derive(Debug, Parser)]
#[command(name = "jqjail stats")]
struct StatsArgs {
    /// The daemon's socket (default as for running a filter).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// `json`, or `prometheus` (the text exposition format, for node_exporter's textfile
    /// collector).
    #[arg(long, value_enum, default_value = "json")]
    format: StatsFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StatsFormat {
    Json,
    Prometheus,
}

/// `jqjail tools`: the tool definitions for a model API (no daemon is needed).
#[derive(Debug, Parser)]
#[command(name = "jqjail tools")]
struct ToolsArgs {
    /// The form: a neutral list, OpenAI's function tools, or Anthropic's tools.
    #[arg(value_enum, default_value = "neutral")]
    format: ToolsFormat,
    /// Accepted as every subcommand accepts it; no daemon is asked.
    #[arg(long, hide = true)]
    socket: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ToolsFormat {
    Neutral,
    Openai,
    Anthropic,
}

/// Prints the tool definitions.
fn tools(args: ToolsArgs) -> Exit {
    let format = match args.format {
        ToolsFormat::Neutral => crate::tools::Format::Neutral,
        ToolsFormat::Openai => crate::tools::Format::OpenAi,
        ToolsFormat::Anthropic => crate::tools::Format::Anthropic,
    };
    let text = serde_json::to_string_pretty(&crate::tools::definitions(format)).unwrap_or_default();
    let _ = writeln!(std::io::stdout(), "{text}");
    Exit::Success
}

/// `jqjail shape`: the shape summary of a JSON document.
#[derive(Debug, Parser)]
#[command(name = "jqjail shape")]
struct ShapeArgs {
    /// The JSON file; standard input if absent or `-`.
    #[arg(conflicts_with = "hide")]
    file: Option<OsString>,
    /// Summarize a hide of the store instead (the daemon reads it off its disk).
    #[arg(long, value_name = "ID")]
    hide: Option<String>,
    /// The daemon's socket (default as for running a filter).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Compact output.
    #[arg(short = 'c', long = "compact-output")]
    compact: bool,
}

/// Prints the shape summary of a file, stdin or a hide: keys and types, array lengths, how
/// many elements have each optional key, a few examples; at most 4 KiB whatever the input.
fn shape(args: ShapeArgs) -> Exit {
    let mut client = match connected(args.socket.as_deref(), Handshake::Awaited) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let input = match &args.hide {
        Some(_) => Vec::new(),
        None => match read_inputs(args.file.as_slice(), client.limits().max_input_bytes) {
            Ok(bytes) => bytes,
            Err((code, message)) => {
                report(code, &message);
                return Exit::Input;
            }
        },
    };
    let source = match &args.hide {
        Some(id) => Source::Hide(id),
        None => Source::Inline(&input),
    };
    let reply = match client.shape(source) {
        Ok(reply) => reply,
        Err(e) => return failed(e),
    };
    let style = print::Style {
        compact: args.compact,
        indent: 2,
        ..print::Style::default()
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match print::print(&reply.output, &style, &mut out).and_then(|_| Ok(out.flush()?)) {
        Ok(()) => Exit::Success,
        Err(e) => print_failed(e),
    }
}

/// Prints the daemon's counters as JSON.
fn stats(args: StatsArgs) -> Exit {
    let mut client = match connected(args.socket.as_deref(), Handshake::Awaited) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    match client.stats() {
        Ok(reply) if args.format == StatsFormat::Prometheus => {
            let socket = client.socket().display().to_string();
            let _ = write!(
                std::io::stdout(),
                "{}",
                prometheus::exposition(&reply, &socket)
            );
            Exit::Success
        }
        Ok(reply) => {
            // Which daemon answered: so a user can tell the system service from a private one.
            // The listener's uid is whoever created the socket: root under socket activation.
            let mut shown = serde_json::json!({
                "daemon": {
                    "socket": client.socket(),
                    "server": client.server(),
                    "listener_uid": client.daemon_uid().ok(),
                }
            });
            if let (Some(shown), Ok(serde_json::Value::Object(stats))) =
                (shown.as_object_mut(), serde_json::to_value(&reply))
            {
                shown.extend(stats);
            }
            let text = serde_json::to_string_pretty(&shown).unwrap_or_default();
            let _ = writeln!(std::io::stdout(), "{text}");
            Exit::Success
        }
        Err(e) => failed(e),
    }
}

/// The whole command line as one clap command, its subcommands included: what the man page
/// and the shell completions are generated from (`docgen/`). The CLI itself parses each
/// subcommand on its own (see [`main_with_args`]).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let sub =
        |c: clap::Command, name: &'static str| c.name(name).bin_name(format!("jqjail {name}"));
    Args::command()
        .subcommand_negates_reqs(true)
        .args_conflicts_with_subcommands(true)
        .subcommand(sub(hide::HideArgs::command(), "hide"))
        .subcommand(sub(ShapeArgs::command(), "shape"))
        .subcommand(sub(StatsArgs::command(), "stats"))
        .subcommand(sub(ToolsArgs::command(), "tools"))
        .subcommand(
            clap::Command::new("mcp")
                .about("The MCP server over stdio (jqjail-mcp(1)); its options are jqjail-mcp's"),
        )
}

/// Runs the command line with these arguments (argv\[0\] first); returns the exit status.
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> u8 {
    let args: Vec<OsString> = args.into_iter().collect();
    // `jqjail hide …` and `jqjail stats`, also after `--socket S` (the one option every
    // command takes); a filter spelled like a subcommand is still reachable after `--`.
    let (subcommand, args) = subcommand(args);
    match subcommand {
        Some("hide") => parse_and_run(args, hide::main),
        Some("stats") => parse_and_run(args, stats),
        Some("shape") => parse_and_run(args, shape),
        Some("tools") => parse_and_run(args, tools),
        // A program of its own (see `run_mcp`): it replaces this process.
        Some("mcp") => run_mcp(args),
        _ => match quick_run(&args).map_or_else(|| parse_run(args), Ok) {
            Ok((args, words)) => run(args, words).into(),
            Err(Ok(e)) => clap_failed(e),
            Err(Err(why)) => {
                report("USAGE", &why);
                Exit::Usage.into()
            }
        },
    }
}

/// Finds a subcommand (`hide`, `stats`) as the first argument after any `--socket S`, and
/// returns the arguments for its parser: argv\[0\] named `jqjail SUBCOMMAND` (so its usage
/// lines say so), the `--socket` options, then the rest.
fn subcommand(args: Vec<OsString>) -> (Option<&'static str>, Vec<OsString>) {
    let mut at = 1;
    while let Some(arg) = args.get(at).and_then(|a| a.to_str()) {
        match arg {
            "--socket" => at += 2,
            _ if arg.starts_with("--socket=") => at += 1,
            _ => break,
        }
    }
    let found = match args.get(at).and_then(|a| a.to_str()) {
        Some("hide") => "hide",
        Some("stats") => "stats",
        Some("shape") => "shape",
        Some("tools") => "tools",
        Some("mcp") => "mcp",
        _ => return (None, args),
    };
    let mut out = vec![OsString::from(format!("jqjail {found}"))];
    out.extend(args[1..at].iter().cloned());
    out.extend(args[at + 1..].iter().cloned());
    (Some(found), out)
}

/// Parses `args` as `T` and runs `main` with them. A parse failure prints clap's message
/// and exits with the usage status (`--help` and `--version` print and succeed).
fn parse_and_run<T: Parser>(args: Vec<OsString>, main: impl FnOnce(T) -> Exit) -> u8 {
    match T::try_parse_from(args) {
        Ok(parsed) => main(parsed).into(),
        Err(e) => clap_failed(e),
    }
}

/// Prints clap's message: usage status for an error, success for `--help` and `--version`.
pub(crate) fn clap_failed(e: clap::Error) -> u8 {
    let _ = e.print();
    match e.use_stderr() {
        true => Exit::Usage.into(),
        false => Exit::Success.into(),
    }
}

/// The words after the filter: input files, or values of `$ARGS.positional` once `--args`
/// (strings) or `--jsonargs` (JSON texts) came before them, whichever came last, as in jq.
#[derive(Debug, Default, PartialEq)]
struct Words {
    files: Vec<OsString>,
    /// JSON texts.
    positional: Vec<String>,
    /// Each named-value flag by its place on the command line.
    named_order: Vec<(usize, Flag)>,
}

/// Parses the commonest command line of a run (the filter, files or `-`, `--socket`, and the
/// output flags that take no value) without clap: building clap's parser and parsing with it
/// took 0.19 ms of a 2 ms run through the CLI, timed in the CLI. Anything else, an error
/// included, is `None` and left to [`parse_run`]. A strict subset of it: the test
/// `quick_run_agrees_with_clap_wherever_it_answers` checks that clap parses every command
/// line this one takes to the same [`Args`] and [`Words`].
fn quick_run(argv: &[OsString]) -> Option<(Args, Words)> {
    let mut filter = None;
    let mut files = Vec::new();
    let mut socket = None;
    // c r j a S n s e, and --tab.
    let mut on = [false; 9];
    let mut words = argv.iter().skip(1);
    while let Some(word) = words.next() {
        let bytes = word.as_encoded_bytes();
        if bytes == b"-" || !bytes.starts_with(b"-") {
            match filter {
                None => filter = Some(word.to_str()?.to_owned()),
                Some(_) => files.push(word.clone()),
            }
            continue;
        }
        if let Some(long) = bytes.strip_prefix(b"--") {
            let value = match long {
                b"socket" => Some(words.next()?.as_encoded_bytes()),
                _ => long.strip_prefix(b"socket="),
            };
            if let Some(value) = value {
                if value.is_empty() || value.starts_with(b"-") {
                    return None;
                }
                // A path that is not UTF-8 is left to clap.
                socket = Some(PathBuf::from(std::str::from_utf8(value).ok()?));
                continue;
            }
            let flag = match long {
                b"compact-output" => 0,
                b"raw-output" => 1,
                b"join-output" => 2,
                b"ascii-output" => 3,
                b"sort-keys" => 4,
                b"null-input" => 5,
                b"slurp" => 6,
                b"exit-status" => 7,
                b"tab" => 8,
                _ => return None,
            };
            on[flag] = true;
            continue;
        }
        for short in &bytes[1..] {
            let flag = b"crjaSnse".iter().position(|f| f == short)?;
            on[flag] = true;
        }
    }
    let [
        compact,
        raw,
        join,
        ascii,
        sort_keys,
        null_input,
        slurp,
        exit_status,
        tab,
    ] = on;
    let args = Args {
        filter: Some(filter?),
        files: files.clone(),
        string_args: Vec::new(),
        json_args: Vec::new(),
        hide: None,
        on_oversize: "error".into(),
        socket,
        lang: "jq".into(),
        timeout: None,
        max_output: None,
        arg: Vec::new(),
        argjson: Vec::new(),
        rawfile: Vec::new(),
        slurpfile: Vec::new(),
        compact,
        raw,
        join,
        ascii,
        sort_keys,
        tab,
        indent: 2,
        null_input,
        slurp,
        exit_status,
        from_file: None,
        raw_input: false,
        seq: false,
        color: false,
        monochrome: false,
        stream: false,
        unbuffered: false,
        library_path: Vec::new(),
    };
    let words = Words {
        files,
        ..Words::default()
    };
    Some((args, words))
}

/// What [`mark_words`] puts before a word so that clap takes it as a value.
const MARK: u8 = 0x01;

/// jq 1.6 takes a word for an option only if it starts with `--`, or with `-` and a letter:
/// `-1`, `-.5 | floor` and `-(1)` are a filter, a file or an option's value (`--arg x -5`).
/// clap would take them for options, so each is marked for clap with a leading [`MARK`], as
/// is any word that already starts with one; [`Args::unmark`] takes one off again.
fn mark_words(argv: Vec<OsString>) -> Vec<OsString> {
    // jq takes the two words after a named value's flag whatever they look like (`--arg x -y`).
    let mut values = 0u8;
    argv.into_iter()
        .enumerate()
        .map(|(i, word)| {
            let b = std::os::unix::ffi::OsStrExt::as_bytes(word.as_os_str());
            let value = values > 0;
            values = match b {
                b"--arg" | b"--argjson" | b"--rawfile" | b"--slurpfile" if !value => 2,
                _ => values.saturating_sub(1),
            };
            let value_like = (value && b.first() == Some(&b'-'))
                || matches!(b, [b'-', second, ..] if *second != b'-' && !second.is_ascii_alphabetic());
            if i > 0 && (value_like || b.first() == Some(&MARK)) {
                let mut marked = OsString::from("\u{1}");
                marked.push(&word);
                marked
            } else {
                word
            }
        })
        .collect()
}

fn unmark(word: &mut String) {
    if word.as_bytes().first() == Some(&MARK) {
        word.remove(0);
    }
}

fn unmark_os(word: &mut OsString) {
    use std::os::unix::ffi::OsStrExt;
    if let Some(rest) = word.as_bytes().strip_prefix(&[MARK]) {
        *word = std::ffi::OsStr::from_bytes(rest).to_owned();
    }
}

impl Args {
    /// Takes off the marks of [`mark_words`] from every word a user gives as a value.
    fn unmark(&mut self) {
        let strings = self.filter.iter_mut().chain(self.hide.iter_mut());
        let lists = [
            &mut self.arg,
            &mut self.argjson,
            &mut self.rawfile,
            &mut self.slurpfile,
        ];
        strings
            .chain(lists.into_iter().flatten())
            .chain([&mut self.on_oversize, &mut self.lang])
            .for_each(unmark);
        self.files.iter_mut().for_each(unmark_os);
        for path in self.socket.iter_mut().chain(self.from_file.iter_mut()) {
            let mut word = std::mem::take(path).into_os_string();
            unmark_os(&mut word);
            *path = word.into();
        }
    }
}

/// Parses the command line of a filter run, sorting the words after the filter by the
/// `--args` / `--jsonargs` that precede them on the command line.
fn parse_run(argv: Vec<OsString>) -> Result<(Args, Words), Result<clap::Error, String>> {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Args::command()
        .try_get_matches_from(mark_words(argv))
        .map_err(Ok)?;
    let mut args = Args::from_arg_matches(&matches).map_err(Ok)?;
    args.unmark();
    let at = |id: &str| -> Vec<usize> {
        matches
            .indices_of(id)
            .map(|i| i.collect())
            .unwrap_or_default()
    };
    let (strings, jsons) = (at("string_args"), at("json_args"));
    let mut words = Words::default();
    for (id, flag) in [
        ("arg", Flag::Arg),
        ("argjson", Flag::ArgJson),
        ("rawfile", Flag::RawFile),
        ("slurpfile", Flag::SlurpFile),
    ] {
        // Two values per occurrence: the first one's place is the flag's.
        words
            .named_order
            .extend(at(id).chunks(2).map(|pair| (pair[0], flag)));
    }
    words.named_order.sort_unstable_by_key(|&(at, _)| at);
    // With `-f` the word clap took for the filter is the first input file.
    if args.from_file.is_some()
        && let Some(first) = args.filter.take()
    {
        words.files.push(first.into());
    }
    for (word, at) in args.files.iter().zip(at("files")) {
        let last_before = |flags: &[usize]| flags.iter().copied().filter(|&f| f < at).max();
        match (last_before(&strings), last_before(&jsons)) {
            (None, None) => words.files.push(word.clone()),
            (s, j) => {
                let text = word.to_str().ok_or_else(|| {
                    Err(format!("positional argument {word:?} is not UTF-8 text"))
                })?;
                if s > j {
                    words
                        .positional
                        .push(serde_json::Value::String(text.to_owned()).to_string());
                } else {
                    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| {
                        Err(format!("--jsonargs: `{text}` is not one JSON value: {e}"))
                    })?;
                    words.positional.push(text.to_owned());
                }
            }
        }
    }
    if args.hide.is_some() && !words.files.is_empty() {
        return Err(Err(
            "--hide filters a hide: it takes no input FILE (positional arguments go after --args)"
                .to_string(),
        ));
    }
    Ok((args, words))
}

/// Where the answers of a run go, and what `-e` and the exit status need to know of them.
struct Printer<W: Write> {
    out: W,
    style: print::Style,
    /// Whether the last output was truthy (for `-e`); `None` before the first.
    last: Option<bool>,
    /// The error class of the last input, if it failed. As in jq 1.6, the run goes on after a
    /// failed input, and only the last input's failure sets the exit status.
    failed: Option<Exit>,
    /// How many inputs were run.
    inputs: usize,
    /// Whether the inputs are the values of one stream, cut by the CLI.
    stream: bool,
}

impl<W: Write> Printer<W> {
    /// Runs the filter over one input and prints its outputs.
    fn one(
        &mut self,
        client: &mut Client,
        filter: &str,
        source: Source<'_>,
        options: &RunOptions,
        named: &crate::Args,
    ) -> Result<(), Exit> {
        let answer = client.run_with_args(filter, source, options, named);
        if let Err(e) = &answer
            && let Some(other) = crate::discover::other_version_at(client.socket(), e)
        {
            report("UNAVAILABLE", &other.0);
            return Err(Exit::Unavailable);
        }
        self.show(answer)
    }

    /// Prints one input's answer. A server error is reported and remembered; the next input
    /// is still run, as in jq.
    fn show(&mut self, answer: Result<Answer, ClientError>) -> Result<(), Exit> {
        self.inputs += 1;
        match answer {
            Ok(Answer::Output(reply)) => {
                match print::print(&reply.output, &self.style, &mut self.out) {
                    Ok(last) => {
                        self.last = last.or(self.last);
                        self.failed = None;
                        Ok(())
                    }
                    Err(e) => Err(print_failed(e)),
                }
            }
            // The output was kept as a hide: its first page goes to stdout as it is (the
            // start of the output's text), and where the rest is to stderr.
            Ok(Answer::Hidden(hidden)) => {
                let (entry, first) = (&hidden.entry, &hidden.first);
                let read_on = match first.total_pages {
                    1 => String::new(),
                    _ => format!("read on with `jqjail hide cut {} 2`, or ", entry.id),
                };
                let _ = writeln!(
                    std::io::stderr(),
                    "jqjail: the output ({} bytes) is over the output limit and was kept as hide {}; \
                     this is page 1 of {} ({} bytes a page): {read_on}filter it with `jqjail --hide {} FILTER`",
                    entry.size,
                    entry.id,
                    first.total_pages,
                    first.page_size,
                    entry.id
                );
                // Page 1 is a prefix of the output's text, not the output: the run still ends
                // with the output limit's status, so a pipeline does not take it for the answer.
                (self.last, self.failed) = (Some(true), Some(Exit::of(ErrorCode::OutputTooLarge)));
                self.out
                    .write_all(first.content.as_bytes())
                    .and_then(|()| self.out.write_all(b"\n"))
                    .map_err(|e| print_failed(print::PrintError::Io(e)))
            }
            Err(ClientError::Server(e)) => {
                report(e.code.as_str(), &e.message);
                self.failed = Some(Exit::of(e.code));
                // A value of a stream that does not parse ends the stream, as jq's parse
                // error does: what follows it cannot be trusted to be cut right.
                let unparsed = matches!(
                    e.code,
                    ErrorCode::InvalidJson | ErrorCode::InputTooDeep | ErrorCode::InputTooLarge
                );
                match self.stream && unparsed {
                    true => Err(Exit::of(e.code)),
                    false => Ok(()),
                }
            }
            Err(e) => Err(failed(e)),
        }
    }

    /// The exit status of a run: `result`'s if it stopped early (nothing more could be asked
    /// of the daemon, or written), else [`Printer::finish`]'s.
    fn settle(self, result: Result<(), Exit>, exit_status: bool) -> Exit {
        match result {
            Ok(()) => self.finish(exit_status),
            Err(exit) => exit,
        }
    }

    /// The exit status once every input ran: a failure's class, else `-e`'s verdict.
    fn finish(mut self, exit_status: bool) -> Exit {
        if let Err(e) = self.out.flush() {
            return print_failed(print::PrintError::Io(e));
        }
        match (self.failed, exit_status, self.last) {
            (Some(failed), _, _) => failed,
            (None, false, _) => Exit::Success,
            // `-e`: the last output of all, whichever input gave it.
            // No input at all: jq's status is 0 then, with or without -e.
            (None, true, None) if self.inputs == 0 => Exit::Success,
            (None, true, None) => Exit::Filter,
            (None, true, Some(false)) => Exit::NoMatch,
            (None, true, Some(true)) => Exit::Success,
        }
    }
}

/// The exit status for a failure to print; a closed stdout (`| head`) is not one.
fn print_failed(e: print::PrintError) -> Exit {
    match e {
        print::PrintError::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Success,
        print::PrintError::Io(e) => {
            report("IO_ERROR", &format!("writing the answer: {e}"));
            Exit::Internal
        }
        print::PrintError::Bad(why) => {
            report("INTERNAL", &why);
            Exit::Internal
        }
    }
}

/// The filter text a run's command line names: `-f`'s file, the word, or `.` where there is
/// none and stdin or stdout is not a terminal (as jq 1.6). `--stream` wraps it so that each
/// input becomes its `[path, leaf]` events. An error is a usage error's message.
fn filter_text(args: &Args) -> Result<String, String> {
    use std::io::IsTerminal;
    if !args.library_path.is_empty() {
        return Err("-L names a module directory, but modules are disabled in jqjail".into());
    }
    let text = match (&args.from_file, &args.filter) {
        (Some(path), _) => {
            // No frame could carry more (`-f /dev/zero` ends here, not in memory).
            let max = jqjail_protocol::frame::MAX_RESPONSE_FRAME_BYTES;
            let mut text = String::new();
            std::fs::File::open(path)
                .and_then(|f| f.take(max + 1).read_to_string(&mut text))
                .map_err(|e| format!("cannot read the filter file {}: {e}", path.display()))?;
            if text.len() as u64 > max {
                return Err(format!(
                    "the filter file {} is over {} bytes, more than any request carries",
                    path.display(),
                    grouped(max)
                ));
            }
            text
        }
        (None, Some(filter)) => filter.clone(),
        (None, None) if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() => {
            return Err("no filter given (jqjail FILTER [FILE…]; see --help)".into());
        }
        (None, None) => ".".into(),
    };
    if !args.stream {
        return Ok(text);
    }
    if args.null_input || args.slurp || calls_input(&text) {
        return Err(
            "--stream is supported by jqjail for a filter run on each input, not with -n, -s or input/inputs"
                .into(),
        );
    }
    // Each event is a run's input, as jq gives them: the filter runs once per event. A
    // newline closes a trailing comment of the filter's own.
    Ok(format!("tostream | ({text}\n)"))
}

/// The input as `-R` and `--seq` read it: lines as JSON strings (the whole text as one with
/// `-s`), or RS separators as whitespace.
fn reshape_input(input: Vec<u8>, args: &Args) -> Vec<u8> {
    if args.raw_input {
        let text = String::from_utf8_lossy(&input);
        let string = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
        if args.slurp {
            return string(&text).into_bytes();
        }
        let mut out = String::new();
        // As jq: each line without its newline; a last line without one still counts.
        for line in text.split_inclusive('\n') {
            out.push_str(&string(line.strip_suffix('\n').unwrap_or(line)));
            out.push('\n');
        }
        return out.into_bytes();
    }
    match args.seq {
        true => input
            .into_iter()
            .map(|b| if b == 0x1e { b'\n' } else { b })
            .collect(),
        false => input,
    }
}

fn run(args: Args, words: Words) -> Exit {
    let filter = match filter_text(&args) {
        Ok(text) => text,
        Err(why) => {
            report("USAGE", &why);
            return Exit::Usage;
        }
    };
    let mut named = match named_args(&args, &words.named_order) {
        Ok(named) => named,
        Err(why) => {
            report("USAGE", &why);
            return Exit::Usage;
        }
    };
    named.positional = words.positional;
    // The request follows the handshake without waiting for its answer (see `Handshake`).
    let mut client = match connected(args.socket.as_deref(), Handshake::Pipelined) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let mut options = RunOptions::default();
    options.limits.timeout_ms = args.timeout.map(|t| (t.as_millis() as u64).max(1));
    options.limits.max_output_bytes = args.max_output;
    if args.lang == "path" {
        options.lang = crate::Lang::Path;
    }
    if args.on_oversize == "hide" {
        options.on_oversize = OnOversize::Hide;
    }
    // Each output on a line of its own, so that they print as jq prints them.
    options.outputs = crate::Outputs::Lines;
    let mut printer = Printer {
        out: std::io::BufWriter::new(std::io::stdout().lock()),
        style: print::Style {
            compact: args.compact,
            indent: usize::from(args.indent),
            tab: args.tab,
            raw: args.raw,
            join: args.join,
            ascii: args.ascii,
            sort_keys: args.sort_keys,
            seq: args.seq,
            color: !args.monochrome
                && (args.color || std::io::IsTerminal::is_terminal(&std::io::stdout())),
        },
        last: None,
        failed: None,
        inputs: 0,
        stream: false,
    };
    let filter = filter.as_str();
    let one = |printer: &mut Printer<_>, client: &mut Client, source| {
        printer.one(client, filter, source, &options, &named)
    };
    if let Some(id) = &args.hide {
        let result = one(&mut printer, &mut client, Source::Hide(id));
        return printer.settle(result, args.exit_status);
    }
    // `input` and `inputs` read the inputs' values: so jq's `-n` reads them only for a filter
    // that calls either, as jq reads them only then.
    let reads_inputs = calls_input(filter);
    if args.null_input && !reads_inputs {
        let result = one(&mut printer, &mut client, Source::Inline(b"null"));
        return printer.settle(result, args.exit_status);
    }
    // Small files are read before the daemon's limit is known (the daemon checks it); for
    // anything else the handshake's answer bounds what is read.
    let input = match small_files(&words.files).map(|max| read_inputs(&words.files, max)) {
        Some(Ok(bytes)) => Ok(bytes),
        // Too large for the guess (a file grew), or no guess: by the daemon's limit.
        _ => match client.handshake() {
            Ok(limits) => read_inputs(&words.files, limits.max_input_bytes),
            Err(e) => return failed(e),
        },
    };
    let input = match input {
        Ok(bytes) => bytes,
        Err((code, message)) => {
            report(code, &message);
            return Exit::Input;
        }
    };
    let input = reshape_input(input, &args);
    // `-R -s` made the input one string already.
    let slurped = args.slurp && !args.raw_input;
    let input = match slurped {
        true => slurp(&input),
        false => input,
    };
    if args.null_input {
        let source = Source::Values {
            values: &input,
            null_input: true,
        };
        let result = one(&mut printer, &mut client, source);
        return printer.settle(result, args.exit_status);
    }
    if slurped {
        let result = one(&mut printer, &mut client, Source::Inline(&input));
        return printer.settle(result, args.exit_status);
    }
    // Most inputs are one value, sent as read. Only if the daemon finds it is not one JSON
    // value is it cut into values, each run on its own as jq runs them.
    let whole = client.run_with_args(filter, Source::Inline(&input), &options, &named);
    let values = match whole {
        Err(ClientError::Server(e)) if e.code == ErrorCode::InvalidJson => {
            let values = jqjail_protocol::values::split_values(&input);
            if values.len() == 1 {
                report(e.code.as_str(), &e.message);
                return Exit::of(e.code);
            }
            // A filter that reads values with `input` runs over the stream in one worker,
            // once per value left unread, as jq runs it.
            if reads_inputs {
                let source = Source::Values {
                    values: &input,
                    null_input: false,
                };
                let result = one(&mut printer, &mut client, source);
                return printer.settle(result, args.exit_status);
            }
            values
        }
        // One value: its answer is in hand.
        answered => {
            let result = printer.show(answered);
            return printer.settle(result, args.exit_status);
        }
    };
    printer.stream = true;
    let result = values
        .into_iter()
        .try_for_each(|value| one(&mut printer, &mut client, Source::Inline(value)));
    printer.settle(result, args.exit_status)
}

/// Whether `filter` may call `input` or `inputs`: either word, not part of a longer name.
/// Where the word is only text (a string, a field), the stream still runs as jq runs it,
/// in one worker.
fn calls_input(filter: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let b = filter.as_bytes();
    filter.match_indices("input").any(|(at, _)| {
        let mut end = at + 5;
        if b.get(end) == Some(&b's') {
            end += 1;
        }
        let before = at.checked_sub(1).map(|i| b[i]);
        !before.is_some_and(|c| word(c) || c == b'$') && !b.get(end).is_some_and(|c| word(*c))
    })
}

/// Writes to stdout; a closed stdout (`| head`) is not an error.
fn write_out(bytes: &[u8]) -> Exit {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Exit::Success,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Success,
        Err(e) => {
            report("IO_ERROR", &format!("writing the answer: {e}"));
            Exit::Internal
        }
    }
}

/// Inputs read without the daemon's limit in hand: regular files of at most this many bytes
/// in all (a tail this small is read whole by the daemon).
const SMALL_FILES: u64 = 256 * 1024;

/// `Some(SMALL_FILES)` when every input is a regular file and they hold at most that many
/// bytes: then a read that finds more (a file grew) can be done again. Never with stdin (`-`,
/// whatever a file of that name holds), which cannot be read twice.
fn small_files(files: &[OsString]) -> Option<u64> {
    let mut total = 0u64;
    for file in files {
        if file == "-" {
            return None;
        }
        let meta = std::fs::metadata(file).ok().filter(|m| m.is_file())?;
        total = total.saturating_add(meta.len());
    }
    (!files.is_empty() && total <= SMALL_FILES).then_some(SMALL_FILES)
}

/// Reads the input files one after another (stdin if there are none, and for `-`) as one
/// stream, as jq does, refusing more than `max` bytes in all without reading past it.
fn read_inputs(files: &[OsString], max: u64) -> Result<Vec<u8>, (&'static str, String)> {
    let stdin = [OsString::from("-")];
    let files = if files.is_empty() { &stdin[..] } else { files };
    let too_large = |len: u64| {
        let what = match files.len() {
            1 => "input is".to_string(),
            n => format!("the {n} inputs are"),
        };
        (
            ErrorCode::InputTooLarge.as_str(),
            format!(
                "{what} {} bytes, over the daemon's {}-byte limit",
                grouped(len),
                grouped(max)
            ),
        )
    };
    let mut bytes = Vec::new();
    for file in files {
        let room = (max + 1).saturating_sub(bytes.len() as u64);
        let read = if file == "-" {
            std::io::stdin().lock().take(room).read_to_end(&mut bytes)
        } else {
            let path = Path::new(file);
            let f = std::fs::File::open(path).map_err(|e| {
                (
                    "INPUT_UNREADABLE",
                    format!("cannot open {}: {e}", path.display()),
                )
            })?;
            if let Ok(meta) = f.metadata() {
                if meta.len() > max {
                    return Err(too_large(meta.len()));
                }
                // Room for the whole file and the byte that shows it grew: one read, not a
                // series of doubling ones (`Take` hides the size from `read_to_end`).
                bytes.reserve(meta.len().saturating_add(1).min(room) as usize);
            }
            f.take(room).read_to_end(&mut bytes)
        };
        read.map_err(|e| ("INPUT_UNREADABLE", format!("reading the input: {e}")))?;
        if bytes.len() as u64 > max {
            return Err(too_large(bytes.len() as u64));
        }
    }
    Ok(bytes)
}

/// [`connect`], reporting a failure as `UNAVAILABLE` with its exit status.
pub(crate) fn connected(explicit: Option<&Path>, handshake: Handshake) -> Result<Client, Exit> {
    connect(explicit, handshake).map_err(|e| {
        report("UNAVAILABLE", &e);
        Exit::Unavailable
    })
}

/// Connects as every client does (`crate::discover`), saying on stderr why a candidate
/// directory for the private daemon was passed over.
pub(crate) fn connect(explicit: Option<&Path>, handshake: Handshake) -> Result<Client, String> {
    let mut notes = |note: &str| {
        let _ = writeln!(std::io::stderr(), "jqjail: {note}");
    };
    crate::discover::connect(explicit, handshake, &mut notes).map_err(|e| e.0)
}

/// `jqjail mcp ARGS…`: runs `jqjail-mcp ARGS…` in this process's place.
fn run_mcp(args: Vec<OsString>) -> u8 {
    let exe = match crate::discover::companion_executable(MCP_EXECUTABLE, None) {
        Ok(exe) => exe,
        Err(why) => {
            report("UNAVAILABLE", &why);
            return Exit::Unavailable.into();
        }
    };
    let err = Command::new(&exe).args(&args[1..]).exec();
    report(
        "UNAVAILABLE",
        &format!("cannot run {}: {err}", exe.display()),
    );
    Exit::Unavailable.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").is_err());
    }

    /// Command-line words for `quick_run_agrees_with_clap_wherever_it_answers`: every word
    /// `quick_run` knows, forms that are close to them, and words it must leave to clap.
    const WORDS: &[&str] = &[
        ".[0]",
        "f.json",
        "-",
        "--",
        "-c",
        "-r",
        "-rcS",
        "-cx",
        "-n",
        "-s",
        "-e",
        "-j",
        "-a",
        "-S",
        "--tab",
        "--compact-output",
        "--raw-output",
        "--join-output",
        "--ascii-output",
        "--sort-keys",
        "--null-input",
        "--slurp",
        "--exit-status",
        "--socket",
        "--socket=S",
        "--socket=",
        "--socket=-x",
        "S",
        "-1",
        "--indent",
        "--args",
        "--arg",
        "--bogus",
        "--compact",
        "-h",
        "-V",
        "--help",
        "-cV",
        "--tab=1",
        "",
        "-é",
        "--socket=a=b",
        "---c",
    ];

    /// `jqjail` followed by `words`.
    fn argv_of<W: Into<OsString>>(words: impl IntoIterator<Item = W>) -> Vec<OsString> {
        std::iter::once(OsString::from("jqjail"))
            .chain(words.into_iter().map(Into::into))
            .collect()
    }

    fn check_agreement(words: &[&str]) {
        let argv = argv_of(words.iter().copied());
        if let Some(quick) = quick_run(&argv) {
            match parse_run(argv) {
                Ok(clap) => assert_eq!(quick, clap, "{words:?}"),
                Err(e) => panic!("{words:?}: quick_run took what clap refuses: {e:?}"),
            }
        }
    }

    #[test]
    fn quick_run_agrees_with_clap_wherever_it_answers() {
        let n = WORDS.len();
        // Every command line of up to three words.
        for len in 0..=3u32 {
            for mut i in 0..n.pow(len) {
                let mut words = Vec::new();
                for _ in 0..len {
                    words.push(WORDS[i % n]);
                    i /= n;
                }
                check_agreement(&words);
            }
        }
        // And a fixed sample of longer ones (xorshift, so every run checks the same lines).
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = 4 + next() % 5;
            let words: Vec<&str> = (0..len).map(|_| WORDS[next() as usize % n]).collect();
            check_agreement(&words);
        }
        // It takes the command lines it exists for, rather than always deferring.
        let taken = |words: &[&str]| quick_run(&argv_of(words.iter().copied())).is_some();
        assert!(taken(&["--socket", "S", "-c", ".[0]", "f.json"]));
        assert!(taken(&["-rcS", ".", "-", "f.json", "--tab", "--socket=S"]));
        assert!(!taken(&["--indent", "3", ".", "f.json"]));
        assert!(!taken(&["--", "-1"]));
    }

    #[test]
    fn quick_run_leaves_words_that_are_not_utf8_to_clap() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![b'f', 0xff]);
        // A file may be any bytes; both parsers take it, the same way.
        let files = argv_of([OsString::from("."), odd.clone()]);
        let quick = quick_run(&files).expect("quick_run takes a file that is not UTF-8");
        assert_eq!(quick, parse_run(files).unwrap());
        assert_eq!(quick.1.files, std::slice::from_ref(&odd));
        // A filter must be text, and a socket path that is not is clap's to judge.
        assert_eq!(quick_run(&argv_of([odd.clone()])), None);
        let mut socket = OsString::from("--socket=");
        socket.push(&odd);
        assert_eq!(quick_run(&argv_of([socket, ".".into()])), None);
    }

    #[test]
    fn every_code_has_a_class() {
        for code in ErrorCode::ALL {
            let exit = Exit::of(code);
            assert_ne!(exit, Exit::Success);
            assert_ne!(exit, Exit::Usage);
        }
        assert_eq!(Exit::of(ErrorCode::Timeout), Exit::Limit);
        assert_eq!(Exit::of(ErrorCode::CompileError), Exit::Filter);
    }
}
