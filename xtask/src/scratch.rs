//! The tests' temporary folder for `cargo xtask ci`: a tmpfs when the machine allows one.
//!
//! The tests make and delete tens of thousands of small files in temporary folders (a
//! processkit-like release per project, kill matrices, the Podman tests' projects). On
//! ext4 that is mostly kernel time: the engine's `tests/it` took 158 s of wall time and
//! 190 s of system time there, 49 s and 24 s on a tmpfs; the whole `tests/it` group 587 s
//! in CI against 113 s (same tests, same build). So, where it may mount (as root, which
//! CI is), `ci` mounts a tmpfs at `/tmp/aibox-ci-<checkout>` (a short name from the
//! checkout's path, so two checkouts never share one) and gives every cargo it starts
//! `TMPDIR` there; the mount goes when `ci` ends (a killed run's mount is found and used
//! again by the next). Not below `target/`: inside the repository, the tests' projects
//! would sit in a git work tree, where aibox stops its search for `aibox.toml`. Where it
//! may not mount, the tests use the usual temporary folder and `ci` says so.
//! `AIBOX_CI_TMPDIR=DIR` names a folder to use instead, mounted by no one.
//!
//! The bench never runs here: it measures the product against `cp -r` on the disk.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::say;

/// The folder every cargo started by `ci` gets as `TMPDIR`, once [`prepare`] chose it.
static TMPDIR: OnceLock<PathBuf> = OnceLock::new();

/// Where `ci` mounts its tmpfs for the checkout at `root`: `/tmp/aibox-ci-` and eight hex
/// digits of a hash of the path (FNV-1a: stable across runs and Rust versions).
fn mount_point(root: &Path) -> PathBuf {
    let hash = root
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
        });
    PathBuf::from(format!("/tmp/aibox-ci-{hash:08x}"))
}

/// The tests' temporary folder while `ci` runs; unmounts the tmpfs it mounted when dropped.
pub(crate) struct Scratch {
    mounted: Option<PathBuf>,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = &self.mounted {
            // Lazy: a test process the fail-fast path stopped may still hold a file open.
            let unmounted = Command::new("umount")
                .arg("--lazy")
                .arg(dir)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if unmounted {
                let _ = fs_err::remove_dir(dir);
            }
        }
    }
}

/// Chooses the tests' temporary folder (see the module docs) and says which.
pub(crate) fn prepare() -> Result<Scratch, String> {
    if let Some(dir) = std::env::var_os("AIBOX_CI_TMPDIR") {
        let dir = PathBuf::from(dir);
        fs_err::create_dir_all(&dir).map_err(|e| e.to_string())?;
        say(&format!(
            "==> tests' temporary files: {} (AIBOX_CI_TMPDIR)",
            dir.display()
        ));
        let _ = TMPDIR.set(dir);
        return Ok(Scratch { mounted: None });
    }
    let dir = mount_point(&std::env::current_dir().map_err(|e| e.to_string())?);
    fs_err::create_dir_all(&dir).map_err(|e| e.to_string())?;
    if !is_tmpfs(&dir) {
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "mode=1777,size=50%", "aibox-ci-tmp"])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            say(
                "==> tests' temporary files: the system's temporary folder (mounting a tmpfs \
                 needs root; on ext4 the tests spend several times longer in the kernel)",
            );
            return Ok(Scratch { mounted: None });
        }
    }
    say(&format!(
        "==> tests' temporary files: a tmpfs at {}, unmounted when ci ends",
        dir.display()
    ));
    let _ = TMPDIR.set(dir.clone());
    Ok(Scratch { mounted: Some(dir) })
}

/// Gives `cmd` the tests' temporary folder, once [`prepare`] chose one.
pub(crate) fn apply(cmd: &mut Command) -> &mut Command {
    if let Some(dir) = TMPDIR.get() {
        cmd.env("TMPDIR", dir);
    }
    cmd
}

/// Whether `dir` is the mount point of a tmpfs (`/proc/self/mountinfo`: the fifth field
/// is the mount point, the first after ` - ` the file system type).
fn is_tmpfs(dir: &Path) -> bool {
    let Ok(info) = fs_err::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    mounts_tmpfs_at(&info, dir)
}

fn mounts_tmpfs_at(info: &str, dir: &Path) -> bool {
    info.lines().any(|line| {
        let (fields, rest) = line.split_once(" - ").unwrap_or((line, ""));
        fields.split(' ').nth(4).map(Path::new) == Some(dir)
            && rest.split(' ').next() == Some("tmpfs")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tmpfs_mount_point_is_found_and_nothing_else() {
        let info = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    90 22 0:51 / /tmp/aibox-ci-0a1b2c3d rw,relatime shared:40 - tmpfs aibox-ci-tmp rw,size=12g\n\
                    91 22 0:52 / /w/other rw shared:41 - ext4 /dev/vdb rw\n";
        assert!(mounts_tmpfs_at(info, Path::new("/tmp/aibox-ci-0a1b2c3d")));
        assert!(!mounts_tmpfs_at(info, Path::new("/w/other")));
        assert!(!mounts_tmpfs_at(info, Path::new("/tmp")));
    }

    #[test]
    fn each_checkout_has_its_own_short_mount_point() {
        let a = mount_point(Path::new("/work/main"));
        assert_eq!(a, mount_point(Path::new("/work/main")), "stable");
        assert_ne!(a, mount_point(Path::new("/tmp/ciclone")));
        assert_eq!(a.to_str().map(str::len), Some("/tmp/aibox-ci-".len() + 8));
    }
}
