//! Fingerprints of the files that define the image and the container.
//!
//! `up` labels what it builds and starts with these digests, so it can tell afterwards
//! whether what runs still matches what `apply` generated: the image carries
//! [`BUILD_DIGEST_LABEL`] (passed as the build argument [`BUILD_DIGEST_ARG`], which the
//! generated Dockerfile turns into a label in its last step, so a changed digest rebuilds
//! one layer and nothing else), the container [`CONFIG_DIGEST_LABEL`] (interpolated by
//! Compose from [`CONFIG_DIGEST_VAR`]). An image or container made by another tool from
//! the same files (VS Code, `devcontainer up`) carries an empty label and counts as stale.
//!
//! The build digest covers every regular file of the build context (`.devcontainer/`)
//! except the files that only Compose reads; the container digest covers the build digest,
//! those Compose files, the personal environment file and the `[container.lifecycle]`
//! commands `up` runs in a new container ([`Fingerprints::with_lifecycle`]).
//! `devcontainer.json` is in neither: aibox's container does not depend on it.
//!
//! [`BUILD_DIGEST_LABEL`]: aibox_config::container::BUILD_DIGEST_LABEL
//! [`CONFIG_DIGEST_LABEL`]: aibox_config::container::CONFIG_DIGEST_LABEL
//! [`CONFIG_DIGEST_VAR`]: aibox_config::container::CONFIG_DIGEST_VAR

use camino::{Utf8Path, Utf8PathBuf};
use sha2::{Digest as _, Sha256};

use crate::error::RuntimeError;

use aibox_config::container::{BUILD_DIGEST_ARG, GID_ARG, UID_ARG};

/// The two digests of one project's dev container files, as `sha256:<hex>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprints {
    /// What the image is built from.
    pub build: String,
    /// What the container is created from (includes [`Fingerprints::build`]).
    pub config: String,
    /// UID and GID of the host user who owns the project, when that is a regular user
    /// (1000 to 65533): the image's user gets them, so the agent can write `/workspace` on
    /// a rootful engine. `None` for root or a system account (the image keeps aibox.toml's
    /// IDs; a container user cannot share root's).
    pub owner: Option<(u32, u32)>,
}

impl Fingerprints {
    /// Reads the project's dev container files below `root`.
    ///
    /// # Errors
    /// [`RuntimeError::ReadProject`] when a file or folder cannot be read.
    pub fn of(root: &Utf8Path) -> Result<Self, RuntimeError> {
        let mut files = Vec::new();
        list_files(
            root,
            &root.join(aibox_config::layout::DEVCONTAINER_DIR),
            &mut files,
        )?;
        files.sort();
        let mut build = Sha256::new();
        let mut config = Sha256::new();
        for rel in &files {
            let into = if rel.as_str() == aibox_config::layout::DEVCONTAINER_JSON {
                continue;
            } else if aibox_config::layout::read_by_compose_only(rel.as_str()) {
                &mut config
            } else {
                &mut build
            };
            feed(into, root, rel)?;
        }
        let (owner, checkout) = project_owner(root)?;
        if let Some((uid, gid)) = owner {
            build.update(format!("owner {uid}:{gid}").as_bytes());
        }
        // The checkout folder itself: one deleted and cloned again at the same path is
        // another folder, while a container made before still mounts the old one at
        // `/workspace` (every `exec` then fails), under the same name and files.
        config.update(format!("checkout {}:{}", checkout.0, checkout.1).as_bytes());
        let build = format!("sha256:{}", hex::encode(build.finalize()));
        config.update(build.as_bytes());
        Ok(Self {
            config: format!("sha256:{}", hex::encode(config.finalize())),
            build,
            owner,
        })
    }

    /// Adds the `[container.lifecycle]` commands to the container digest (none: the
    /// digest stays the files' alone, so a project without them keeps its container).
    #[must_use]
    pub fn with_lifecycle(mut self, commands: &[String]) -> Self {
        if commands.is_empty() {
            return self;
        }
        let mut config = Sha256::new();
        config.update(self.config.as_bytes());
        for command in commands {
            config.update(b"\0lifecycle ");
            config.update(command.as_bytes());
        }
        self.config = format!("sha256:{}", hex::encode(config.finalize()));
        self
    }

    /// The `--build-arg` values of a build: the build digest, and the project owner's IDs
    /// for the image's user when the owner is a regular user.
    pub fn build_args(&self) -> Vec<String> {
        let mut args = vec![format!("{BUILD_DIGEST_ARG}={}", self.build)];
        if let Some((uid, gid)) = self.owner {
            args.extend([format!("{UID_ARG}={uid}"), format!("{GID_ARG}={gid}")]);
        }
        args
    }
}

/// A folder's device and inode numbers: which folder it is, whatever its path.
type FolderId = (u64, u64);

/// The owner of the project folder, when it is a regular user (see
/// [`Fingerprints::owner`]), and the folder's [`FolderId`].
fn project_owner(root: &Utf8Path) -> Result<(Option<(u32, u32)>, FolderId), RuntimeError> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = fs_err::metadata(root).map_err(|source| RuntimeError::ReadProject {
        path: root.to_owned(),
        source,
    })?;
    let regular = (1000..65534).contains(&meta.uid());
    Ok((
        regular.then(|| (meta.uid(), meta.gid())),
        (meta.dev(), meta.ino()),
    ))
}

/// Adds one file, framed by its path and length so that no two file sets hash alike.
fn feed(hasher: &mut Sha256, root: &Utf8Path, rel: &Utf8Path) -> Result<(), RuntimeError> {
    let path = root.join(rel);
    let bytes = fs_err::read(&path).map_err(|source| RuntimeError::ReadProject {
        path: path.clone(),
        source,
    })?;
    hasher.update(rel.as_str().as_bytes());
    hasher.update([0]);
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(&bytes);
    Ok(())
}

/// Every regular file below `dir`, relative to `root`; links are not followed (the build
/// engines do not follow them out of the context either).
fn list_files(
    root: &Utf8Path,
    dir: &Utf8Path,
    out: &mut Vec<Utf8PathBuf>,
) -> Result<(), RuntimeError> {
    let read_err = |source| RuntimeError::ReadProject {
        path: dir.to_owned(),
        source,
    };
    let entries = match fs_err::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(read_err(e)),
    };
    for entry in entries {
        let entry = entry.map_err(read_err)?;
        let kind = entry.file_type().map_err(read_err)?;
        let Ok(path) = Utf8PathBuf::from_path_buf(entry.path()) else {
            continue;
        };
        if kind.is_dir() {
            list_files(root, &path, out)?;
        } else if kind.is_file()
            && let Ok(rel) = path.strip_prefix(root)
        {
            out.push(rel.to_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> (tempfile::TempDir, Utf8PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
        fs_err::create_dir_all(root.join(".devcontainer/aibox-ca")).unwrap();
        for (path, text) in [
            (aibox_config::layout::DOCKERFILE, "FROM x\n"),
            (aibox_config::layout::COMPOSE, "services: {}\n"),
            (aibox_config::layout::DEVCONTAINER_JSON, "{}\n"),
            (aibox_config::layout::EXTRA_CA, ""),
        ] {
            fs_err::write(root.join(path), text).unwrap();
        }
        (dir, root)
    }

    #[test]
    fn each_file_moves_the_digest_it_belongs_to() {
        let (_t, root) = project();
        let first = Fingerprints::of(&root).unwrap();
        assert_eq!(first, Fingerprints::of(&root).unwrap(), "stable");
        assert!(first.build.starts_with("sha256:") && first.build.len() == 71);

        fs_err::write(
            root.join(aibox_config::layout::DEVCONTAINER_JSON),
            "{\"a\":1}",
        )
        .unwrap();
        assert_eq!(
            Fingerprints::of(&root).unwrap(),
            first,
            "devcontainer.json counts for neither"
        );

        fs_err::write(
            root.join(aibox_config::layout::COMPOSE),
            "services: {a: {}}\n",
        )
        .unwrap();
        let compose = Fingerprints::of(&root).unwrap();
        assert_eq!(compose.build, first.build, "Compose is not a build input");
        assert_ne!(compose.config, first.config);

        fs_err::write(root.join(aibox_config::layout::LOCAL_ENV), "A=1\n").unwrap();
        let env = Fingerprints::of(&root).unwrap();
        assert_eq!(env.build, first.build);
        assert_ne!(
            env.config, compose.config,
            "the personal env file is a container input"
        );

        fs_err::write(root.join(aibox_config::layout::EXTRA_CA), "CERT").unwrap();
        let ca = Fingerprints::of(&root).unwrap();
        assert_ne!(
            ca.build, env.build,
            "the personal CA is built into the image"
        );
        assert_ne!(ca.config, env.config, "a new image means a new container");
    }

    /// The QA's ghost container: the checkout deleted and cloned again at the same path
    /// has the same files but is another folder, so its container is stale (the old one
    /// mounts the deleted folder); the image is not.
    #[test]
    fn the_same_files_in_a_new_folder_at_the_same_path_make_a_new_container() {
        let (_t, files) = project();
        let outer = tempfile::tempdir().unwrap();
        let at = |name: &str| outer.path().join(name);
        let cp = |from: &std::path::Path, to: &std::path::Path| {
            let done = std::process::Command::new("cp")
                .arg("-a")
                .args([from, to])
                .status()
                .unwrap();
            assert!(done.success());
        };
        cp(files.as_std_path(), &at("p"));
        let root = Utf8PathBuf::from_path_buf(at("p")).unwrap();
        let first = Fingerprints::of(&root).unwrap();
        assert_eq!(Fingerprints::of(&root).unwrap(), first, "stable");
        // Moved out of the way, a copy moved to its path: the same bytes, a new folder.
        cp(&at("p"), &at("copy"));
        fs_err::rename(at("p"), at("old")).unwrap();
        fs_err::rename(at("copy"), at("p")).unwrap();
        let again = Fingerprints::of(&root).unwrap();
        assert_eq!(again.build, first.build);
        assert_ne!(again.config, first.config);
    }

    #[test]
    fn a_regular_owner_is_a_build_input_and_root_is_not() {
        use std::os::unix::fs::MetadataExt as _;
        let (_t, root) = project();
        let mine = fs_err::metadata(&root).unwrap();
        let prints = Fingerprints::of(&root).unwrap();
        let regular = (1000..65534).contains(&mine.uid());
        assert_eq!(prints.owner.is_some(), regular, "{:?}", prints.owner);
        assert_eq!(prints.build_args().len(), if regular { 3 } else { 1 });
        assert_eq!(
            prints.build_args()[0],
            format!("AIBOX_BUILD_DIGEST={}", prints.build)
        );
        if mine.uid() == 0 {
            // As root (CI): hand the folder to a regular user and back.
            std::os::unix::fs::chown(&root, Some(4321), Some(4322)).unwrap();
            let owned = Fingerprints::of(&root).unwrap();
            assert_eq!(owned.owner, Some((4321, 4322)));
            assert_eq!(
                owned.build_args()[1..],
                ["AIBOX_UID=4321", "AIBOX_GID=4322"]
            );
            assert_ne!(owned.build, prints.build, "another owner, another image");
            std::os::unix::fs::chown(&root, Some(0), Some(0)).unwrap();
            assert_eq!(Fingerprints::of(&root).unwrap(), prints);
        }
    }

    #[test]
    fn moving_bytes_between_files_changes_the_digest() {
        let (_t, root) = project();
        fs_err::write(root.join(".devcontainer/a"), "xy").unwrap();
        fs_err::write(root.join(".devcontainer/b"), "").unwrap();
        let one = Fingerprints::of(&root).unwrap();
        fs_err::write(root.join(".devcontainer/a"), "x").unwrap();
        fs_err::write(root.join(".devcontainer/b"), "y").unwrap();
        assert_ne!(Fingerprints::of(&root).unwrap().build, one.build);
    }
}
