//! Where a host path really leads once the kernel has followed its symbolic links.
//!
//! The policy gate judges paths as Compose files write them; Compose, the engine and the
//! kernel follow links. [`resolve_host_path`] walks a path component by component the way
//! the kernel does (a link's target replaces it; `..` after a link goes to the parent of
//! the link's target), without needing the path to exist, and says whether a link was on
//! the way and where it ends. It only reads (`symlink_metadata`, `read_link`); the policy
//! crate stays pure and receives the answers through its sources.

use std::collections::VecDeque;
use std::path::{Component, Path, PathBuf};

/// Most links followed for one path (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// What a host path resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPath {
    /// No symbolic link on the way: the path is what it says (it need not exist).
    Plain,
    /// Through symbolic links the path leads to this project-relative path (`""` is the
    /// project root).
    Project(String),
    /// Through symbolic links the path leads out of the project, to this host path
    /// (`~` or `~/…` when it is in the user's home, else absolute).
    Outside(String),
    /// The links cannot be followed (a loop, too many links, a link that cannot be read).
    Unresolvable(String),
}

/// aibox's folder in one of the user's XDG base folders: `$<xdg_var>/aibox`, else
/// `$HOME/<home_fallback>/aibox` (`.cache`, `.local/state`); `None` when neither variable
/// is set (an empty value counts as unset: it would name a folder relative to wherever
/// aibox runs).
pub fn user_dir(xdg_var: &str, home_fallback: &str) -> Option<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let base = set(xdg_var)
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(home_fallback)))?;
    Some(base.join("aibox"))
}

/// Resolves `path` through symbolic links: a project-relative path (relative to `root`),
/// an absolute path, or `~`/`~/…` (relative to `home`; without a home it is [`HostPath::Plain`]).
pub fn resolve_host_path(root: &Path, home: Option<&Path>, path: &str) -> HostPath {
    let Ok(root) = fs_err::canonicalize(root) else {
        return HostPath::Unresolvable(format!(
            "the project folder {} cannot be read",
            root.display()
        ));
    };
    let home = home.map(|h| fs_err::canonicalize(h).unwrap_or_else(|_| h.to_path_buf()));
    let start = if path == "~" || path.starts_with("~/") {
        let Some(home) = &home else {
            return HostPath::Plain;
        };
        home.join(path.trim_start_matches('~').trim_start_matches('/'))
    } else if path.starts_with('/') {
        PathBuf::from(path)
    } else {
        root.join(path)
    };
    let (target, followed) = match walk(&start) {
        Ok(r) => r,
        Err(reason) => return HostPath::Unresolvable(reason),
    };
    if !followed {
        return HostPath::Plain;
    }
    if let Ok(rel) = target.strip_prefix(&root) {
        return HostPath::Project(slashed(rel));
    }
    if let Some(rel) = home.as_deref().and_then(|h| target.strip_prefix(h).ok()) {
        let rel = slashed(rel);
        return HostPath::Outside(if rel.is_empty() {
            "~".to_owned()
        } else {
            format!("~/{rel}")
        });
    }
    HostPath::Outside(target.to_string_lossy().into_owned())
}

/// The names of the folders (links to folders included) directly inside the
/// project-relative folder `dir` of `root`, sorted; empty when it cannot be read.
pub fn subfolders(root: &Path, dir: &str) -> Vec<String> {
    let Ok(entries) = fs_err::read_dir(root.join(dir)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

fn slashed(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The path the kernel reaches from the absolute `start`, and whether a link was followed.
fn walk(start: &Path) -> Result<(PathBuf, bool), String> {
    let parts = |p: &Path| -> Vec<PathBuf> {
        p.components()
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect()
    };
    let mut pending: VecDeque<PathBuf> = parts(start).into();
    let mut real = PathBuf::from("/");
    let mut followed = false;
    let mut links = 0;
    let mut missing = false;
    while let Some(next) = pending.pop_front() {
        match next.components().next() {
            None | Some(Component::CurDir | Component::Prefix(_)) => {}
            Some(Component::RootDir) => real = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                real.pop();
            }
            Some(Component::Normal(name)) => {
                let candidate = real.join(name);
                if missing {
                    real = candidate;
                    continue;
                }
                match fs_err::symlink_metadata(&candidate) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(format!(
                                "more than {MAX_LINKS} symbolic links (a loop?) at {}",
                                candidate.display()
                            ));
                        }
                        let target = fs_err::read_link(&candidate).map_err(|e| e.to_string())?;
                        followed = true;
                        // The target's parts come first, then what was still to walk.
                        for part in parts(&target).into_iter().rev() {
                            pending.push_front(part);
                        }
                    }
                    Ok(_) => real = candidate,
                    Err(_) => {
                        // Nothing below a missing folder can be a link.
                        missing = true;
                        real = candidate;
                    }
                }
            }
        }
    }
    Ok((real, followed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn links_are_followed_like_the_kernel_does() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("proj");
        let home = tmp.path().join("home");
        fs_err::create_dir_all(root.join(".devcontainer/inner")).unwrap();
        fs_err::create_dir_all(home.join(".aws")).unwrap();
        symlink("/", root.join(".devcontainer/hostroot")).unwrap();
        symlink("inner", root.join(".devcontainer/same")).unwrap();
        symlink(home.join(".aws"), root.join("aws")).unwrap();
        symlink("../..", root.join(".devcontainer/up")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        let r = |p: &str| resolve_host_path(&root, Some(&home), p);
        assert_eq!(r(".devcontainer/x"), HostPath::Plain);
        assert_eq!(r("/nonexistent/x"), HostPath::Plain);
        assert_eq!(r(".devcontainer/hostroot"), HostPath::Outside("/".into()));
        assert_eq!(
            r(".devcontainer/hostroot/etc/cron.d"),
            HostPath::Outside("/etc/cron.d".into())
        );
        assert_eq!(
            r(".devcontainer/same/f"),
            HostPath::Project(".devcontainer/inner/f".into())
        );
        assert_eq!(
            r("aws/credentials"),
            HostPath::Outside("~/.aws/credentials".into())
        );
        // `..` after a link is the parent of the link's target, as in the kernel.
        assert_eq!(
            r(".devcontainer/same/.."),
            HostPath::Project(".devcontainer".into())
        );
        let tmp_real = fs_err::canonicalize(tmp.path()).unwrap();
        assert_eq!(
            r(".devcontainer/up"),
            HostPath::Outside(tmp_real.to_string_lossy().into_owned())
        );
        assert!(matches!(r("loop"), HostPath::Unresolvable(_)));
        assert_eq!(r("~/.aws"), HostPath::Plain);
    }
}
