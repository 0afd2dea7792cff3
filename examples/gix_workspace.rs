//! A git implementation made of many crates (shaped like gitoxide): each crate's spans
//! come from the workspace's own span macros, `coarse!` at INFO and `detail!` at DEBUG,
//! with the crate's module path as their target; two crates have a module of the same
//! name (`gix_status::index_as_worktree::function`, `gix_dir::walk::function`), with spans
//! of the same name. The program installs its subscriber late (once the arguments are
//! parsed) and only for the commands that trace. The `real_git_tools` tests compile this
//! file into their own binary.
//!
//! ```sh
//! GIT_TRACE2_EVENT=/tmp/gix.event cargo run -q --example gix_workspace -- status
//! cargo run -q -p trace2-cli -- summary /tmp/gix.event
//! ```
//!
//! `status` traces (exit code 0); `version` installs no subscriber and writes nothing.

use std::process::ExitCode;

use tracing_subscriber::prelude::*;
use tracing_trace2::{Trace2, api};

/// The workspace's span macros (as a `trace` crate of the workspace defines them): a
/// span at INFO for coarse steps, at DEBUG for details, in the calling crate's target.
macro_rules! coarse {
    ($target:expr, $name:expr) => {
        tracing::span!(target: $target, tracing::Level::INFO, $name)
    };
}

macro_rules! detail {
    ($target:expr, $name:expr, $($field:tt)*) => {
        tracing::span!(target: $target, tracing::Level::DEBUG, $name, $($field)*)
    };
}

/// Stands for the crate `gix_status`.
mod gix_status {
    pub mod index_as_worktree {
        pub mod function {
            /// The crate's module path, as `module_path!()` reads in the crate.
            const TARGET: &str = "gix_status::index_as_worktree::function";

            pub fn index_as_worktree(entries: u32) -> u32 {
                let _walk = detail!(TARGET, "walk", entries).entered();
                (0..entries).filter(|e| e % 3 == 0).count() as u32
            }
        }
    }
}

/// Stands for the crate `gix_dir`.
mod gix_dir {
    pub mod walk {
        pub mod function {
            const TARGET: &str = "gix_dir::walk::function";

            pub fn walk(dirs: u32) -> u32 {
                let _walk = detail!(TARGET, "walk", dirs).entered();
                dirs * 2
            }
        }
    }
}

/// Stands for the crate `gix`, which calls the two.
mod gix {
    pub mod status {
        const TARGET: &str = "gix::status";

        pub fn status() -> u32 {
            let _status = coarse!(TARGET, "status").entered();
            let modified =
                super::super::gix_status::index_as_worktree::function::index_as_worktree(30);
            let untracked = super::super::gix_dir::walk::function::walk(4);
            tracing::info!(target: TARGET, key = "modified", value = modified);
            modified + untracked
        }
    }
}

pub(crate) fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().map_or("status", String::as_str);
    if command == "version" {
        // No subscriber: nothing traced, nothing written.
        println!("gix {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let lifecycle = Trace2::from_env()
        .with_exe_version(env!("CARGO_PKG_VERSION"))
        .lifecycle();
    tracing_subscriber::registry()
        .with(lifecycle.layer())
        .init();
    let trace2 = lifecycle.start();
    api::cmd_name(command);
    let changes = gix::status::status();
    println!("{changes} changes");
    trace2.finish(ExitCode::SUCCESS)
}
