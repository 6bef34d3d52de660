//! `aibox config get|set|validate|schema`: reading and editing `aibox.toml` through
//! `aibox_engine::config_edit` and `aibox_engine::config_check`.

use super::{Outcome, json_or, project_root};
use crate::args::{ConfigCommand, Global};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, cmd: &ConfigCommand) -> Outcome {
    match cmd {
        ConfigCommand::Schema { local } => Ok(schema(*local)),
        ConfigCommand::Validate => validate(g),
        ConfigCommand::Get { key, local } => get(g, key, *local),
        ConfigCommand::Set { key, value, local } => set(g, key, value, *local),
    }
}

/// The schema is JSON already; `--output` does not change it.
fn schema(local: bool) -> Exit {
    let schema = if local {
        aibox_config::schema::local_toml_schema()
    } else {
        aibox_config::schema::aibox_toml_schema()
    };
    render::out(aibox_config::schema::render_schema(&schema).trim_end());
    Exit::Ok
}

fn validate(g: &Global) -> Outcome {
    let root = project_root(g)?;
    // The same checks as `apply` and `config set`, of both files.
    aibox_engine::config_check::check_all(&root)?;
    let local = root.join(aibox_config::LOCAL_TOML);
    let checked: Vec<_> = std::iter::once(root.join(aibox_config::AIBOX_TOML))
        .chain(local.is_file().then_some(local))
        .collect();
    json_or(
        g,
        &serde_json::json!({ "valid": true, "project": root, "files": checked }),
        || {
            let names: Vec<_> = checked.iter().map(ToString::to_string).collect();
            let verb = if names.len() == 1 { "is" } else { "are" };
            render::note(g.quiet, &format!("{} {verb} valid", names.join(" and ")));
        },
    )?;
    Ok(Exit::Ok)
}

fn get(g: &Global, key: &str, local: bool) -> Outcome {
    let root = project_root(g)?;
    let value = if local {
        aibox_config::get::get_local(&root, key)?
    } else {
        aibox_config::get::get(&root, key)?
    };
    json_or(
        g,
        &serde_json::json!({ "key": key, "value": value }),
        || {
            render::out(&aibox_config::get::raw(&value));
        },
    )?;
    Ok(Exit::Ok)
}

fn set(g: &Global, key: &str, value: &str, local: bool) -> Outcome {
    let root = project_root(g)?;
    let file = if local {
        aibox_config::edit::ConfigFile::Local
    } else {
        aibox_config::edit::ConfigFile::Team
    };
    let set = match aibox_engine::config_edit::config_set_report(&root, file, key, value) {
        Ok(set) => set,
        Err(e) => {
            // The diagnostic quotes the edited text (or the file as it is); say it was
            // never saved, and whose problem it is.
            use aibox_engine::config_edit::ConfigEditError as E;
            let why = match e {
                E::Existing(_) => "it already has the problem below; fix that first",
                E::Linked { .. } => "it is a symbolic link",
                _ => "the edit below is refused",
            };
            render::note(
                g.quiet || g.output == crate::args::Output::Json,
                &format!("{} was not changed: {why}", file.file_name()),
            );
            return Err(e.into());
        }
    };
    // A consent set by hand is told what it gives away, even with `--quiet`. A setting
    // that needs a consent is saved (`apply` asks for it at a terminal), and said so:
    // without a terminal, `apply` refuses until the consent is recorded.
    let (path, consent, relaxes, warnings) =
        (set.path, set.needs_consent, set.relaxes, set.warnings);
    json_or(
        g,
        &serde_json::json!({
            "key": key,
            "file": path,
            "relaxes": relaxes,
            "needs_consent": consent,
            "warnings": warnings,
        }),
        || {
            render::note(g.quiet, &format!("set {key} in {path}"));
            if let Some(what) = &relaxes {
                render::warning(what);
            }
            if let Some(consent) = &consent {
                render::warning(&format!(
                    "`aibox apply` needs the consent `{consent} = true` for this setting: it \
                     asks for it at a terminal and refuses without one (`aibox config \
                     validate` refuses too); read what it allows in the security docs, then \
                     `aibox config set {consent} true`"
                ));
            }
            for warning in &warnings {
                render::warning(warning);
            }
        },
    )?;
    Ok(Exit::Ok)
}
