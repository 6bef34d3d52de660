//! `aibox exec -- CMD`: runs a command in the container. Its output is the command's own
//! (there is nothing for `--output json` to shape); its exit code is passed through.
//! Errors before the command runs honour `--output json` like every command's.

use super::{Outcome, project_root};
use crate::args::{ExecArgs, Global};
use crate::exit::Exit;

pub fn run(g: &Global, args: &ExecArgs) -> Outcome {
    let root = project_root(g)?;
    let opts = aibox_engine::lifecycle::LifecycleOptions::default();
    let code = aibox_engine::lifecycle::exec(&root, &opts, &args.cmd, &args.env)?;
    // The command's own exit code is the result; clamp it into a process exit code.
    Ok(Exit::Passthrough(
        u8::try_from(code.clamp(0, 255)).unwrap_or(u8::MAX),
    ))
}
