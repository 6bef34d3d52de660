//! `aibox config set`: a comment-preserving, validated edit of `aibox.toml` or
//! `.aibox-local.toml`, saved atomically. The edit itself lives in `aibox-config`; this
//! module only reads and writes the file, through the one writer as the `config set`
//! command of the file table.

use aibox_config::edit::ConfigFile;
use aibox_config::layout::Writers;
use aibox_fs::{ProjectRoot, Writer};
use camino::Utf8Path;

use crate::init::{InitError, write_error};

/// Mode of the personal files aibox writes (`.aibox-local.toml` and what is made from it).
pub const PERSONAL_MODE: u32 = 0o600;

/// Sets `key` to `value` in the project's `file` and saves it. The edited text is
/// validated with the strict loader first; an invalid edit leaves the file untouched.
/// Returns the file's path.
pub fn config_set(
    root: &Utf8Path,
    file: ConfigFile,
    key: &str,
    value: &str,
) -> Result<camino::Utf8PathBuf, ConfigEditError> {
    config_set_report(root, file, key, value).map(|set| set.path)
}

/// What [`config_set_report`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetReport {
    /// The edited file.
    pub path: camino::Utf8PathBuf,
    /// The seccomp consent key the settings need and lack after the edit (saved anyway:
    /// `apply` asks for it at a terminal, and refuses without one).
    pub needs_consent: Option<String>,
    /// What the edit gives away when it records a security consent or relaxation (for
    /// example `security.acknowledge_seccomp_unconfined = true`), to be shown to whoever
    /// made it: a relaxation is never recorded without a word.
    pub relaxes: Option<String>,
    /// After an edit of a `[network]` key: the settings there that the egress mode ignores
    /// (saved anyway; `apply` warns of them too, see
    /// [`crate::config_check::ignored_egress_settings`]).
    pub warnings: Vec<String>,
}

/// [`config_set`], and the seccomp consent the settings still need afterwards, found by
/// the same checks that judged the edit (and, for a `[network]` key, what the egress
/// mode ignores).
///
/// # Errors
/// As [`config_set`].
pub fn config_set_report(
    root: &Utf8Path,
    file: ConfigFile,
    key: &str,
    value: &str,
) -> Result<SetReport, ConfigEditError> {
    edit_file(root, file, |text| {
        aibox_config::edit::set_in(file, text, key, value).map(Some)
    })
    .map(|edited| SetReport {
        path: edited.path,
        needs_consent: edited.needs_consent,
        relaxes: aibox_policy::relaxation(key, value),
        // Said where the user edits the network, not on every other key.
        warnings: if key == "network" || key.starts_with("network.") {
            edited.ignored_egress
        } else {
            Vec::new()
        },
    })
}

/// `aibox mcp add`: appends `server` to the team's `[[ai.mcp.servers]]` or the personal
/// `[[mcp.servers]]`, validated like `config set` (a literal secret, a bad name or a
/// duplicate is refused and nothing is written). Returns the file's path.
pub fn mcp_add(
    root: &Utf8Path,
    file: ConfigFile,
    server: &aibox_config::McpServer,
) -> Result<camino::Utf8PathBuf, ConfigEditError> {
    edit_file(root, file, |text| {
        aibox_config::edit::add_mcp_server(file, text, server).map(Some)
    })
    .map(|edited| edited.path)
}

/// `aibox mcp remove`: removes the server `name` from the file; whether it was there.
pub fn mcp_remove(
    root: &Utf8Path,
    file: ConfigFile,
    name: &str,
) -> Result<(camino::Utf8PathBuf, bool), ConfigEditError> {
    edit_file(root, file, |text| {
        aibox_config::edit::remove_mcp_server(file, text, name)
    })
    .map(|edited| (edited.path, edited.changed))
}

/// Reads `file`, applies `edit` (`None`: nothing to change), runs `apply`'s checks on a
/// team file and saves the result through the writer. Returns the path and whether the
/// edit applied.
/// What [`edit_file`] did: the file, whether it changed, the seccomp consent the edited
/// settings lack (see [`SetReport::needs_consent`]) and the `[network]` settings their
/// egress mode ignores.
struct Edited {
    path: camino::Utf8PathBuf,
    changed: bool,
    needs_consent: Option<String>,
    ignored_egress: Vec<String>,
}

fn edit_file(
    root: &Utf8Path,
    file: ConfigFile,
    edit: impl FnOnce(&str) -> Result<Option<String>, aibox_config::ConfigError>,
) -> Result<Edited, ConfigEditError> {
    let path = root.join(file.file_name());
    let rel = Utf8Path::new(file.file_name());
    let project = ProjectRoot::open(root).map_err(|e| edit_error(root, e))?;
    // Only a project is edited: an `aibox.toml` made here would lack `init`'s `.gitignore`
    // entries, and the personal file (where tokens go) would then be committed.
    let team = project
        .read(Utf8Path::new(aibox_config::AIBOX_TOML))
        .map_err(|e| edit_error(root, e))?;
    if team.is_none() {
        return Err(aibox_config::ConfigError::NotFound {
            start: root.to_owned(),
            boundary: root.to_owned(),
        }
        .into());
    }
    let read = match file {
        ConfigFile::Team => team,
        ConfigFile::Local => project.read(rel).map_err(|e| edit_error(root, e))?,
    };
    let text = match read {
        Some(bytes) => aibox_config::config_text(bytes, file.file_name())?,
        None => String::new(),
    };
    // A problem already in the file is reported as the file's, at its own lines: checked
    // after the edit, it read as the edit's fault, its lines shifted by the inserted ones.
    if !text.is_empty() {
        let checked = match file {
            ConfigFile::Team => {
                aibox_config::parse_aibox_toml(&text, aibox_config::AIBOX_TOML).map(drop)
            }
            ConfigFile::Local => {
                aibox_config::parse_local_toml(&text, aibox_config::LOCAL_TOML).map(drop)
            }
        };
        checked.map_err(ConfigEditError::Existing)?;
    }
    let Some(new) = edit(&text)? else {
        return Ok(Edited {
            path,
            changed: false,
            needs_consent: None,
            ignored_egress: Vec::new(),
        });
    };
    // The checks `apply` runs: an edit apply would refuse is refused here, the MCP
    // servers of both files together included (a literal environment value, a name in
    // both files).
    let other = match file {
        ConfigFile::Team => ConfigFile::Local,
        ConfigFile::Local => ConfigFile::Team,
    };
    let other_text = project
        .read(Utf8Path::new(other.file_name()))
        .map_err(|e| edit_error(root, e))?
        .map(|bytes| aibox_config::config_text(bytes, other.file_name()))
        .transpose()?;
    let (team_text, local_text) = match file {
        ConfigFile::Team => (Some(new.as_str()), other_text.as_deref()),
        ConfigFile::Local => (other_text.as_deref(), Some(new.as_str())),
    };
    let config = team_text
        .map(|t| aibox_config::parse_aibox_toml(t, aibox_config::AIBOX_TOML))
        .transpose()?;
    if let (ConfigFile::Team, Some(config)) = (file, &config) {
        crate::config_check::check_team_config(&new, config)?;
    }
    // A broken other file is its own error, reported by the command that reads it.
    let local = local_text
        .and_then(|t| aibox_config::parse_local_toml(t, aibox_config::LOCAL_TOML).ok())
        .unwrap_or_default();
    let mut needs_consent = None;
    let mut ignored_egress = Vec::new();
    if let Some(config) = &config {
        crate::config_check::check_servers(config, &local)?;
        needs_consent =
            check_settings_edit(root, file, &text, other_text.as_deref(), config, &local)?;
        ignored_egress = crate::config_check::ignored_egress_settings(config, &local);
    }
    // The personal file is where tokens go: readable by its owner only, whoever made it.
    let mode = (file == ConfigFile::Local).then_some(PERSONAL_MODE);
    Writer::for_command(&project, Writers::CONFIG_SET)
        .write(rel, new.as_bytes(), mode)
        .map_err(|e| edit_error(root, e))?;
    Ok(Edited {
        path,
        changed: true,
        needs_consent,
        ignored_egress,
    })
}

/// [`crate::config_check::check_settings`] on the edited configuration: a value `apply`
/// would refuse is refused, unless the files had that very problem before the edit (a
/// problem the edit did not make, such as a CA file not there yet, blocks no other key).
/// A missing seccomp consent is left to the caller (`apply` asks for it at a terminal):
/// its key is returned.
fn check_settings_edit(
    root: &Utf8Path,
    file: ConfigFile,
    old_text: &str,
    other_text: Option<&str>,
    config: &aibox_config::AiboxToml,
    local: &aibox_config::LocalToml,
) -> Result<Option<String>, ConfigEditError> {
    use crate::config_check::settings_problems;
    let after = settings_problems(root, config, local);
    let consent = after
        .iter()
        .find_map(crate::error::EngineError::missing_consent);
    if after.iter().all(|e| e.consent_key().is_some()) {
        return Ok(consent);
    }
    // The configuration as it was: both files parsed from their old texts.
    let (team_old, local_old) = match file {
        ConfigFile::Team => (Some(old_text), other_text),
        ConfigFile::Local => (other_text, Some(old_text)),
    };
    let before: Vec<String> = team_old
        .filter(|t| !t.is_empty())
        .and_then(|t| aibox_config::parse_aibox_toml(t, aibox_config::AIBOX_TOML).ok())
        .map(|config| {
            let local = local_old
                .and_then(|t| aibox_config::parse_local_toml(t, aibox_config::LOCAL_TOML).ok())
                .unwrap_or_default();
            settings_problems(root, &config, &local)
        })
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect();
    match after
        .into_iter()
        .find(|e| e.consent_key().is_none() && !before.contains(&e.to_string()))
    {
        Some(err) => Err(ConfigEditError::Settings(Box::new(err))),
        None => Ok(consent),
    }
}

/// A refused read or write of a configuration file: a link is named with where it leads
/// (init's advice, to run `aibox init` again, does not fit an edit).
fn edit_error(root: &Utf8Path, e: aibox_fs::WriteError) -> ConfigEditError {
    match write_error(root, e) {
        InitError::Symlink { path } => {
            let target = fs_err::read_link(&path)
                .map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
            ConfigEditError::Linked { path, target }
        }
        other => ConfigEditError::Write(other),
    }
}

/// Errors of [`config_set`].
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConfigEditError {
    /// The edit is invalid.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] aibox_config::ConfigError),
    /// The file already has a problem (before any edit): fix it first.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Existing(aibox_config::ConfigError),
    /// The edit passes the loader but `apply` would refuse it.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Check(#[from] crate::config_check::ConfigCheckError),
    /// The edit passes the loader but `apply` would refuse the settings (see
    /// [`crate::config_check::check_settings`]). Boxed: the engine's error is large.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Settings(Box<crate::error::EngineError>),
    /// Writing failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Write(#[from] InitError),
    /// `aibox skill enable` of a skill whose installed folder was deleted by hand: `apply`
    /// keeps that deletion, so enabling it would promise an install that never happens.
    #[error(
        "skill `{name}` was installed in `{dir}`, and that folder was deleted by hand; \
         `aibox apply` keeps a deletion (it never undoes a local change), so enabling the \
         skill would not bring it back"
    )]
    #[diagnostic(
        code(aibox::skill::deleted_by_hand),
        help(
            "to get it back, copy it from the snapshot of the installed release: `cp -r \
             {snapshot} {parent}/`, then run `aibox skill enable {name}` and `aibox apply`; \
             to drop it for good, `aibox skill disable {name}`"
        )
    )]
    SkillDeletedByHand {
        /// The skill's name.
        name: String,
        /// Root-relative folder the install marker records for it.
        dir: String,
        /// Its category folder (`dir` without the skill's own name).
        parent: String,
        /// Root-relative copy of it in the installed release's snapshot.
        snapshot: String,
    },
    /// `aibox skill enable` of a name the installed release has no skill of: `apply`
    /// would only ignore it with a warning.
    #[error("the installed processkit release has no skill `{name}`")]
    #[diagnostic(code(aibox::skill::unknown), help("{suggestion}"))]
    UnknownSkill {
        /// The name asked for.
        name: String,
        /// The closest skill name, or where to see them.
        suggestion: String,
    },
    /// `skill disable` of a core skill of the installed release: `apply` keeps core skills
    /// installed whatever `[skills] exclude` says, so the exclusion would only be ignored.
    #[error("`{name}` is a core skill of the installed processkit release: it cannot be disabled")]
    #[diagnostic(
        code(aibox::skill::core),
        help(
            "core skills are always installed (`aibox skill list` marks them); nothing was \
             changed"
        )
    )]
    CoreSkill {
        /// The name asked for.
        name: String,
    },
    /// The configuration file is a symbolic link: aibox edits files only in place.
    #[error("{path} is a symbolic link (to {target}); aibox edits it only as a regular file")]
    #[diagnostic(
        code(aibox::config::linked_file),
        help(
            "edit {target} by hand, or replace the link with that file (`cp --remove-destination \
             {target} {path}`) and run the command again"
        )
    )]
    Linked {
        /// The link.
        path: camino::Utf8PathBuf,
        /// Where it leads.
        target: String,
    },
    /// Reading failed.
    #[error("cannot read {path}")]
    #[diagnostic(code(aibox::config::io))]
    Io {
        /// The file.
        path: camino::Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl ConfigEditError {
    /// Who can fix it: a disk error is the environment; the rest keeps its own kind.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Config(e) | Self::Existing(e) => e.kind(),
            Self::Check(e) => e.kind(),
            Self::Settings(e) => e.kind(),
            Self::Write(e) => e.kind(),
            Self::Io { .. } => aibox_config::ErrorKind::Environment,
            Self::Linked { .. }
            | Self::SkillDeletedByHand { .. }
            | Self::UnknownSkill { .. }
            | Self::CoreSkill { .. } => aibox_config::ErrorKind::User,
        }
    }
}
