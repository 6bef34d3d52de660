//! What the MCP lockers share ([`crate::mcp_envs`] and [`crate::mcp_uvx`] with `uv`, [`crate::mcp_npm`]
//! with `npm`): which resolver program to run, and the two ways locking can fail.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Called with a one-line notice before a slow step starts (resolving MCP servers'
/// dependencies); the CLI prints it, the engine itself never prints.
pub type Notice = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// Which program resolves what `aibox.lock` does not hold yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Resolver {
    /// The tool's environment variable when set (a path, or `none`), else the program on
    /// `PATH`.
    #[default]
    Auto,
    /// This program.
    Path(PathBuf),
    /// Resolve nothing: only the lock and the resolution cache serve.
    Off,
}

/// Why a server's dependencies were not locked.
pub(crate) enum Failure {
    /// They cannot be installed anywhere (no solution, no such package or version): the
    /// server is not registered, and the answer is recorded.
    NoSolution(String),
    /// No resolver, no network, or a resolver failure: registered unlocked, asked again.
    Unavailable(String),
}

/// Why `resolver` resolves nothing, when it is turned off (`Off`, or the tool's variable
/// `env` set to `none`): asked before anything goes to the network on its behalf.
pub(crate) fn turned_off(resolver: &Resolver, env: &str) -> Option<String> {
    match resolver {
        Resolver::Off => Some("resolving is turned off".to_owned()),
        Resolver::Auto if std::env::var_os(env).is_some_and(|v| v == "none") => {
            Some(format!("resolving is turned off ({env}=none)"))
        }
        _ => None,
    }
}

/// The program `resolver` names and what its `--version` printed (trimmed). `env` is
/// the tool's variable (`AIBOX_UV`), `install` says how to get the program.
pub(crate) fn locate(
    resolver: &Resolver,
    program: &str,
    env: &str,
    install: &str,
) -> Result<(PathBuf, String), String> {
    if let Some(why) = turned_off(resolver, env) {
        return Err(why);
    }
    let path = match resolver {
        Resolver::Off => return Err("resolving is turned off".to_owned()),
        Resolver::Path(path) => path.clone(),
        Resolver::Auto => match std::env::var_os(env) {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => aibox_runtime::find_program(program, std::env::var_os("PATH").as_deref())
                .ok_or_else(|| {
                    format!(
                        "no `{program}` on PATH to resolve them with ({install}, or set {env} \
                         to its path, then run `aibox apply` again)"
                    )
                })?,
        },
    };
    let mut cmd = Command::new(&path);
    // npm would otherwise look for a newer npm first.
    cmd.arg("--version")
        .env("npm_config_update_notifier", "false");
    let out = crate::process::run_with_deadline(cmd, Duration::from_secs(30))
        .filter(|o| o.status.success())
        .ok_or_else(|| format!("`{} --version` did not run", path.display()))?;
    Ok((path, String::from_utf8_lossy(&out.stdout).trim().to_owned()))
}
