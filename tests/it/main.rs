//! End-to-end tests: every test starts the real `jqjaild` on a socket in a temp dir and talks
//! to it through the real client (or a raw JSON socket, or the `jqjail` binary).

// Test modules share helpers through `pub` items; nothing here is a library.
#![allow(unreachable_pub)]

mod admission;
mod args;
mod attacks;
mod cli;
mod confinement;
mod conformance;
mod container;
mod contract;
mod docs;
mod faults;
mod hide;
mod hostile;
mod install;
mod jq_builtins;
mod jq_cli;
mod jq_idioms;
mod jq_reader;
mod json_client;
mod lifecycle;
mod limits;
mod mcp;
mod metrics;
mod path;
mod sandbox;
mod service;
mod shape;
// Shared with build.rs, which links the CLI static and checks a trial link with it.
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    target_pointer_width = "64",
    target_endian = "little"
))]
#[path = "../../src/static_elf.rs"]
mod static_elf;
mod systemd;
mod tenants;
mod util;
