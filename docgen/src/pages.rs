//! What `jqjail-docgen` writes, as (path under the output directory, bytes).

use clap::Command;
use clap_complete::Shell;
use std::path::PathBuf;

/// The shipped configuration file, which `jqjaild.toml(5)` presents.
pub(crate) fn config_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../systemd/jqjaild.toml")
}

/// Every man page and completion script, from the clap definitions and `config` (the shipped
/// configuration file's text).
pub(crate) fn all(config: &str) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let programs: [(Command, &str); 3] = [
        (jqjail_client::cli::command(), "1"),
        (jqjail_client::mcp::command(), "1"),
        (
            <jqjail_supervisor::daemon::Args as clap::CommandFactory>::command(),
            "8",
        ),
    ];
    let mut out = Vec::new();
    for (command, section) in programs {
        let name = command.get_name().to_string();
        pages(&command, &name, section, &mut out)?;
        for (shell, file) in [
            (Shell::Bash, format!("{name}.bash")),
            (Shell::Zsh, format!("_{name}")),
            (Shell::Fish, format!("{name}.fish")),
        ] {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command.clone(), &name, &mut script);
            out.push((format!("completions/{file}"), script));
        }
    }
    out.push((
        "man/jqjaild.toml.5".into(),
        config_page(config).into_bytes(),
    ));
    Ok(out)
}

/// The page of `command`, named `name`, and one for each of its subcommands (`jqjail-hide(1)`,
/// `jqjail-hide-put(1)`, …), as the SUBCOMMANDS section names them.
fn pages(
    command: &Command,
    name: &str,
    section: &'static str,
    out: &mut Vec<(String, Vec<u8>)>,
) -> std::io::Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone().name(name.to_string()))
        .section(section)
        .manual("jqjail")
        .render(&mut page)?;
    out.push((format!("man/{name}.{section}"), page));
    // `jqjail mcp` runs the program jqjail-mcp, whose own page is jqjail-mcp(1): the
    // subcommand's would take the same file name.
    let own_page = |s: &&Command| !["help", "mcp"].contains(&s.get_name());
    for sub in command.get_subcommands().filter(own_page) {
        pages(sub, &format!("{name}-{}", sub.get_name()), section, out)?;
    }
    Ok(())
}

/// `jqjaild.toml(5)`: the shipped file, every key with its comment, as the page's body.
fn config_page(config: &str) -> String {
    let mut page = String::from(
        ".TH JQJAILD.TOML 5 \"\" \"jqjail\" \"jqjail\"\n\
         .SH NAME\n\
         jqjaild.toml \\- configuration of the jqjail daemon\n\
         .SH SYNOPSIS\n\
         /etc/jqjail/jqjaild.toml\n\
         .SH DESCRIPTION\n\
         .BR jqjaild (8)\n\
         reads this TOML file when started with \\fB\\-\\-config\\fR (the systemd unit does) and\n\
         again on SIGHUP. Command-line flags override its keys; an unknown key is an error.\n\
         Below is the file as shipped: every section and key, its default and its meaning.\n\
         .SH FILE\n\
         .nf\n",
    );
    for line in config.lines() {
        // roff: a backslash is written doubled; a line starting with a dot or an apostrophe
        // would be a request, so it is escaped.
        let line = line.replace('\\', "\\e");
        if line.starts_with('.') || line.starts_with('\'') {
            page.push_str("\\&");
        }
        page.push_str(&line);
        page.push('\n');
    }
    page.push_str(".fi\n.SH SEE ALSO\n.BR jqjaild (8),\n.BR jqjail (1)\n");
    page
}
