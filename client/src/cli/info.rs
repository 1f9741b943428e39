//! `jqjail tools`, `jqjail shape` and `jqjail stats`.

use super::inputs::read_inputs;
use super::run::print_failed;
use super::{Exit, Handshake, connected, failed, print, prometheus, report};
use crate::Source;
use clap::Parser;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

/// `jqjail stats`: the daemon's counters.
#[derive(Debug, Parser)]
#[command(name = "jqjail stats")]
pub(super) struct StatsArgs {
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
pub(super) struct ToolsArgs {
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
pub(super) fn tools(args: ToolsArgs) -> Exit {
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
pub(super) struct ShapeArgs {
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
pub(super) fn shape(args: ShapeArgs) -> Exit {
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
pub(super) fn stats(args: StatsArgs) -> Exit {
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
