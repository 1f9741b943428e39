//! The `jqjail` command line: `jqjail FILTER [FILE]`.
//!
//! Prints the JSON answer on stdout. Errors go to stderr once, as `jqjail: CODE: message`,
//! control characters stripped, with an exit status per class ([`Exit`]). A closed stdout
//! (`jqjail … | head`) is not an error.
//!
//! Without `--socket` or `$JQJAIL_SOCKET`, it uses the system daemon if one listens at
//! [`crate::paths::SYSTEM_SOCKET`], else the user's private daemon, which it starts when none is running.
//!
//! Its rooms: `args` (the run's command line: one quick parser for the commonest lines and
//! clap for the rest, which a test keeps in agreement), `run` (a filter run and its
//! printing), `inputs` (reading input files), `info` (`jqjail shape`, `stats`, `tools`),
//! `hide` (`jqjail hide …`), `print` (jq's output layout); this file dispatches, connects
//! and reports.

mod args;
mod hide;
mod info;
mod inputs;
mod print;
mod prometheus;
mod run;

use crate::{Client, ClientError, ErrorCode};
use args::{Args, parse_run, quick_run};
use clap::Parser;
use info::{ShapeArgs, StatsArgs, ToolsArgs, shape, stats, tools};
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

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
            Ok((args, words)) => run::run(args, words).into(),
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
