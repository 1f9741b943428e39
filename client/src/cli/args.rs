//! The command line of a filter run: clap's definition, and a quick parser for the commonest
//! lines that clap agrees with wherever it answers.

use clap::Parser;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// jqjail: run a jq filter over JSON in a confined worker of a jqjail daemon.
#[derive(Debug, PartialEq, Parser)]
#[command(
    name = "jqjail",
    // As in jq, a flag given twice is simply on.
    args_override_self = true,
    version,
    after_help = "Subcommands: jqjail hide put|get|cut|search|list|rm|usage, jqjail shape [FILE | --hide ID], jqjail mcp, jqjail tools [openai|anthropic], jqjail stats.\n\nExit status: 0 ok, 1 search found nothing, 2 usage, 3 input, 4 filter, 5 runtime error, 6 limit, 7 sandbox, 8 daemon unavailable, 9 internal, 10 no such hide or page."
)]
pub(super) struct Args {
    /// The jq filter (`.` when there is none and stdin or stdout is not a terminal, as in jq
    /// 1.6). With `-f` this word is the first input FILE.
    pub(super) filter: Option<String>,
    /// The JSON input files, read one after another as one stream of values (as jq does);
    /// standard input if none, or where one is `-`. After `--args` or `--jsonargs` these
    /// words are positional arguments instead.
    // Not `conflicts_with = "hide"`: after `--args` these words are arguments, which a run
    // over a hide may take; `parse_run` refuses files with --hide once it has sorted them.
    #[arg(value_name = "FILE")]
    pub(super) files: Vec<OsString>,
    /// The words after it (and after the filter) are strings in `$ARGS.positional`, not files.
    // Appended (not counted) so that every occurrence keeps its place on the command line:
    // `args_override_self` would keep only the last one's.
    #[arg(long = "args", num_args = 0, default_missing_value = "true", action = clap::ArgAction::Append)]
    pub(super) string_args: Vec<bool>,
    /// The words after it (and after the filter) are JSON texts in `$ARGS.positional`.
    #[arg(long = "jsonargs", num_args = 0, default_missing_value = "true", action = clap::ArgAction::Append)]
    pub(super) json_args: Vec<bool>,
    /// Filter a hide of the store instead of a file (the daemon reads it off its disk).
    #[arg(long, value_name = "ID")]
    pub(super) hide: Option<String>,
    /// Output over the limit: `error` (OUTPUT_TOO_LARGE), or `hide` to keep it as a hide and
    /// print its first page.
    #[arg(long, default_value = "error", value_parser = ["error", "hide"])]
    pub(super) on_oversize: String,
    /// The daemon's socket (default: $JQJAIL_SOCKET, the system daemon, or a private one).
    #[arg(long)]
    pub(super) socket: Option<PathBuf>,
    /// The filter language: `jq`, or `path` for the JMESPath-like subset (`items[*].name`).
    #[arg(long, default_value = "jq", value_parser = ["jq", "path"])]
    pub(super) lang: String,
    /// Wall-clock limit for this request: `500ms`, `2s`, or seconds.
    #[arg(long, value_parser = parse_duration)]
    pub(super) timeout: Option<Duration>,
    /// Output limit for this request, in bytes.
    #[arg(long)]
    pub(super) max_output: Option<u64>,
    /// `$NAME` is the string VALUE (repeatable). Values are data, never filter code.
    #[arg(long = "arg", num_args = 2, value_names = ["NAME", "VALUE"], action = clap::ArgAction::Append)]
    pub(super) arg: Vec<String>,
    /// `$NAME` is the JSON value TEXT (repeatable).
    #[arg(long = "argjson", num_args = 2, value_names = ["NAME", "TEXT"], action = clap::ArgAction::Append)]
    pub(super) argjson: Vec<String>,
    /// `$NAME` is FILE's text, as a string (read here, never by a worker).
    #[arg(long = "rawfile", num_args = 2, value_names = ["NAME", "FILE"], action = clap::ArgAction::Append)]
    pub(super) rawfile: Vec<String>,
    /// `$NAME` is an array of the JSON values in FILE (read here, never by a worker).
    #[arg(long = "slurpfile", num_args = 2, value_names = ["NAME", "FILE"], action = clap::ArgAction::Append)]
    pub(super) slurpfile: Vec<String>,
    /// Compact output: each output on one line.
    #[arg(short = 'c', long = "compact-output")]
    pub(super) compact: bool,
    /// Strings printed raw, without quotes or escapes.
    #[arg(short = 'r', long = "raw-output")]
    pub(super) raw: bool,
    /// As -r, with no newline after each output.
    #[arg(short = 'j', long = "join-output")]
    pub(super) join: bool,
    /// Non-ASCII characters printed as \uXXXX escapes.
    #[arg(short = 'a', long = "ascii-output")]
    pub(super) ascii: bool,
    /// Object keys printed in sorted order.
    #[arg(short = 'S', long = "sort-keys")]
    pub(super) sort_keys: bool,
    /// A tab per indentation level.
    #[arg(long)]
    pub(super) tab: bool,
    /// Spaces per indentation level (0 to 7; 0 prints compactly).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub(super) indent: u8,
    /// The input is `null`; FILE and stdin are not read.
    #[arg(short = 'n', long = "null-input")]
    pub(super) null_input: bool,
    /// The input's JSON values, read as one array.
    #[arg(short = 's', long)]
    pub(super) slurp: bool,
    /// Exit status from the last output: 1 if false or null, 4 if there was none.
    #[arg(short = 'e', long = "exit-status")]
    pub(super) exit_status: bool,
    /// The filter is FILE's text (read here); every word is then an input FILE.
    #[arg(short = 'f', long = "from-file", value_name = "FILE")]
    pub(super) from_file: Option<PathBuf>,
    /// Each line of the input is a string input; with `-s`, the whole input is one string.
    #[arg(short = 'R', long = "raw-input")]
    pub(super) raw_input: bool,
    /// RS (0x1e) before each output; an RS in the input separates values (RFC 7464).
    #[arg(long)]
    pub(super) seq: bool,
    /// Colour the output as jq does: the default where stdout is a terminal.
    #[arg(short = 'C', long = "color-output")]
    pub(super) color: bool,
    /// Do not colour the output.
    #[arg(short = 'M', long = "monochrome-output")]
    pub(super) monochrome: bool,
    /// Each input value as jq's stream of `[path, leaf]` events, each event an input.
    #[arg(long)]
    pub(super) stream: bool,
    /// Accepted, as jq accepts it: each answer is written as soon as it comes.
    #[arg(long)]
    pub(super) unbuffered: bool,
    /// jq's module search path: refused, since modules are disabled in jqjail.
    #[arg(short = 'L', value_name = "DIR", action = clap::ArgAction::Append)]
    pub(super) library_path: Vec<String>,
}

/// The flags that bind a named value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flag {
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

/// The words after the filter: input files, or values of `$ARGS.positional` once `--args`
/// (strings) or `--jsonargs` (JSON texts) came before them, whichever came last, as in jq.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Words {
    pub(super) files: Vec<OsString>,
    /// JSON texts.
    pub(super) positional: Vec<String>,
    /// Each named-value flag by its place on the command line.
    pub(super) named_order: Vec<(usize, Flag)>,
}

/// Parses the commonest command line of a run (the filter, files or `-`, `--socket`, and the
/// output flags that take no value) without clap: building clap's parser and parsing with it
/// took 0.19 ms of a 2 ms run through the CLI, timed in the CLI. Anything else, an error
/// included, is `None` and left to [`parse_run`]. A strict subset of it: the test
/// `quick_run_agrees_with_clap_wherever_it_answers` checks that clap parses every command
/// line this one takes to the same [`Args`] and [`Words`].
/// The switches [`quick_run`] takes (long name, short letter), in the order it reads them
/// into [`Args`]. `quick_switches_are_clap_flags` checks each against clap's definition.
const QUICK_SWITCHES: [(&str, Option<u8>); 9] = [
    ("compact-output", Some(b'c')),
    ("raw-output", Some(b'r')),
    ("join-output", Some(b'j')),
    ("ascii-output", Some(b'a')),
    ("sort-keys", Some(b'S')),
    ("null-input", Some(b'n')),
    ("slurp", Some(b's')),
    ("exit-status", Some(b'e')),
    ("tab", None),
];

pub(super) fn quick_run(argv: &[OsString]) -> Option<(Args, Words)> {
    let mut filter = None;
    let mut files = Vec::new();
    let mut socket = None;
    let mut on = [false; QUICK_SWITCHES.len()];
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
            let flag = QUICK_SWITCHES
                .iter()
                .position(|(name, _)| name.as_bytes() == long)?;
            on[flag] = true;
            continue;
        }
        for short in &bytes[1..] {
            let flag = QUICK_SWITCHES
                .iter()
                .position(|(_, letter)| *letter == Some(*short))?;
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
pub(super) fn parse_run(argv: Vec<OsString>) -> Result<(Args, Words), Result<clap::Error, String>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick parser's table names clap's own switches: each long name with its letter, a
    /// flag that takes no value.
    #[test]
    fn quick_switches_are_clap_flags() {
        use clap::CommandFactory;
        let command = Args::command();
        for (long, short) in QUICK_SWITCHES {
            let arg = command
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .unwrap_or_else(|| panic!("--{long} is not a clap argument"));
            assert_eq!(arg.get_short(), short.map(char::from), "--{long}");
            assert!(
                matches!(arg.get_action(), clap::ArgAction::SetTrue),
                "--{long} takes a value"
            );
        }
    }

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
}
