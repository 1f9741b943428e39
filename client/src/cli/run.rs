//! A filter run: the filter and inputs the command line names, sent to the daemon, and each
//! answer printed as jq prints it.

use super::args::{Args, Flag, Words};
use super::inputs::{read_inputs, small_files};
use super::{Exit, Handshake, connected, failed, print, report};
use crate::{Answer, Client, ClientError, ErrorCode, OnOversize, RunOptions, Source};
use jqjail_protocol::limits::grouped;
use std::io::{Read, Write};

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
    /// Whether the daemon is the user's private one (for the advice when it is another
    /// version).
    private_daemon: bool,
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
            && let Some(other) =
                crate::discover::other_version_at(client.socket(), e, self.private_daemon)
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
pub(super) fn print_failed(e: print::PrintError) -> Exit {
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

pub(super) fn run(args: Args, words: Words) -> Exit {
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
        private_daemon: crate::discover::picks_private(args.socket.as_deref(), client.socket()),
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
pub(super) fn write_out(bytes: &[u8]) -> Exit {
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
