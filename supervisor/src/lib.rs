//! The supervisor (`jqjaild`): a tokio server that owns the Unix socket and a pool of
//! pre-started worker processes, and answers every request exactly once.
//!
//! It never evaluates a filter and never parses an input document; it treats everything a
//! worker sends as hostile (sizes checked before allocation, deadlines kept).

pub mod admit;
pub mod arriving;
pub mod bulk;
pub mod cgroup;
pub mod config;
pub mod daemon;
pub mod explain;
pub mod fair;
pub mod kmsg;
pub mod pace;
pub mod pool;
pub mod server;
pub mod spawn;
pub mod stats;
pub mod systemd;
pub mod tenant;
pub mod unixsock;
pub mod zygote;

pub use config::Config;
pub use daemon::main_with_args;
pub use server::serve;
