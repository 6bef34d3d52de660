//! Which files the tools run: every dev container configuration the Dev Containers CLI
//! offers and the Compose files `aibox up` and each configuration hand to Compose, each
//! then judged by `project` (Compose) or `devcontainer` (the configuration).

use aibox_config::hostpath::HostPath;

use super::devcontainer::{check_local_features, devcontainer_findings, visit_devcontainer};
use super::mounts::linked_file;
use super::project::{compose_project, literal_path};
use super::{DEVCONTAINER_PATH, GateInputs, Pass, json_strings};
use crate::compose::{ComposeSources, dir_of, join_project};
use crate::finding::{Consent, Finding, Severity};
use crate::secrets::{TextKind, scan_secrets};
use crate::text::{line_of, parse_jsonc};

/// The Compose files of a project as `aibox up` and the devcontainer CLI hand them to
/// Compose, and every dev container configuration the Dev Containers CLI would use
/// (`.devcontainer/devcontainer.json`, `.devcontainer.json`,
/// `.devcontainer/<name>/devcontainer.json`), each read through `sources`.
///
/// `aibox up`'s files (generated, override, personal) and the `dockerComposeFile` list of
/// `.devcontainer/devcontainer.json` are one Compose project, with `.devcontainer/.env`;
/// every other configuration's list is a project of its own, with the `.env` next to its
/// first file. Listed files outside the project are refused; listed files that do not
/// exist are not run, so they are skipped. A guarded file that is a symbolic link is
/// refused (Compose and the editor follow it; the gate reads regular files only).
pub fn check_compose_setup(sources: &dyn ComposeSources, consent: &Consent) -> Vec<Finding> {
    let inputs = GateInputs::record(sources, |rec| {
        compose_setup(rec, consent, Pass::Traverse);
    });
    inputs.judge(|closed| compose_setup(closed, consent, Pass::Judge))
}

/// [`check_compose_setup`] in one pass: the traversal reads what the rules will read
/// (and finds nothing), the judgement runs the rules.
pub(super) fn compose_setup(
    sources: &dyn ComposeSources,
    consent: &Consent,
    pass: Pass,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut configs = devcontainer_files(sources);
    if !configs.iter().any(|c| c == DEVCONTAINER_PATH) {
        // `aibox up` runs its own files whether or not the editor's configuration exists.
        configs.insert(0, DEVCONTAINER_PATH.to_owned());
    }
    for config in configs {
        let devcontainer = if linked_file(sources, consent, &config, &config, &mut out) {
            None
        } else {
            sources.read(&config)
        };
        let dir = dir_of(&config).to_owned();
        if let Some(text) = &devcontainer {
            match pass {
                Pass::Traverse => visit_devcontainer(&config, text, sources),
                Pass::Judge => out.extend(judge_config(&config, text, consent, sources)),
            }
            out.extend(check_local_features(&config, text, sources, consent, pass));
        }
        let names = compose_names(&config, &dir, devcontainer.as_deref());
        let mut texts: Vec<(String, String)> = Vec::new();
        for name in names {
            let name = match name {
                Ok(name) => name,
                Err(written) => {
                    let f = Finding::new(
                        "aibox::policy::unchecked_include",
                        Severity::Error,
                        &config,
                        format!(
                            "`dockerComposeFile` names `{written}`, outside the project, which \
                             the gate cannot judge"
                        ),
                        "list only Compose files inside the project",
                    )
                    .at(devcontainer
                        .as_deref()
                        .and_then(|t| line_of(t, "dockerComposeFile")));
                    out.extend(consent.judge(true, &format!("include:{written}"), f));
                    continue;
                }
            };
            if linked_file(sources, consent, &config, &name, &mut out) {
                continue;
            }
            if let Some(text) = sources.read(&name) {
                texts.push((name, text));
            }
        }
        let Some(env_path) = env_file(&config, texts.first().map(|(first, _)| first.as_str()))
        else {
            continue;
        };
        let env = if linked_file(sources, consent, &config, &env_path, &mut out) {
            None
        } else {
            sources.read(&env_path)
        };
        if texts.is_empty() {
            continue;
        }
        if pass == Pass::Judge {
            out.extend(scan_listed_compose_files(&texts));
        }
        let files: Vec<(&str, &str)> = texts
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        out.extend(compose_project(
            &files,
            env.as_deref(),
            sources,
            consent,
            pass,
        ));
    }
    let mut seen = Vec::new();
    out.retain(|f| {
        let key = (f.code.clone(), f.file.clone(), f.line, f.message.clone());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    out
}

/// The secret scan of the Compose files a configuration lists beyond `aibox up`'s own:
/// they are committed files like the override (`aibox up`'s files are scanned with the
/// plan and by doctor's secret check, so they are not reported twice).
fn scan_listed_compose_files(texts: &[(String, String)]) -> Vec<Finding> {
    texts
        .iter()
        .filter(|(name, _)| {
            !aibox_config::layout::COMPOSE_FILES.contains(&name.as_str())
                && !aibox_config::is_local_state(name)
        })
        .flat_map(|(name, text)| scan_secrets(name, text, TextKind::Yaml))
        .collect()
}

/// The rules over one dev container configuration. It is a committed file: literal
/// secrets are refused as in Compose files. The generated configuration is scanned with
/// the plan's files (and doctor's secret check), so it is not reported twice.
fn judge_config(
    config: &str,
    text: &str,
    consent: &Consent,
    sources: &dyn ComposeSources,
) -> Vec<Finding> {
    let mut out = devcontainer_findings(config, text, consent, sources);
    if config != DEVCONTAINER_PATH {
        out.extend(scan_secrets(config, text, TextKind::Json));
    }
    out
}

/// The Compose files of configuration `config` (in folder `dir`, its text
/// `devcontainer`), in order: `Ok` a project path, `Err` an entry as written that leaves
/// the project. `aibox up` runs its own files itself for the main configuration; the
/// editor runs the listed ones. Both count.
fn compose_names(
    config: &str,
    dir: &str,
    devcontainer: Option<&str>,
) -> Vec<Result<String, String>> {
    let mut names: Vec<Result<String, String>> = if config == DEVCONTAINER_PATH {
        aibox_config::layout::COMPOSE_FILES
            .map(|n| Ok(n.to_owned()))
            .to_vec()
    } else {
        Vec::new()
    };
    for name in devcontainer
        .map(|t| compose_files_in(dir, t))
        .unwrap_or_default()
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The `.env` Compose reads for configuration `config` whose first existing Compose file
/// is `first`: `.devcontainer/.env` for `aibox up`'s project, else the one in the folder
/// of the first file; `None` when the configuration runs no file.
fn env_file(config: &str, first: Option<&str>) -> Option<String> {
    match first {
        _ if config == DEVCONTAINER_PATH => Some(aibox_config::layout::COMPOSE_ENV.to_owned()),
        Some(first) => Some(join_project(dir_of(first), ".env").unwrap_or_default()),
        None => None,
    }
}

/// Every Compose project the tools may run, as the files it merges (project paths of
/// files that exist, in order) and the `.env` Compose reads with them: `aibox up`'s
/// (with `.devcontainer/devcontainer.json`'s list) and each other dev container
/// configuration's. The same lists [`compose_setup`] judges; the egress rules read them
/// too, so no Compose file a configuration names escapes them.
pub(crate) fn compose_projects(sources: &dyn ComposeSources) -> Vec<(Vec<String>, String)> {
    let mut configs = devcontainer_files(sources);
    if !configs.iter().any(|c| c == DEVCONTAINER_PATH) {
        configs.insert(0, DEVCONTAINER_PATH.to_owned());
    }
    let mut out = Vec::new();
    for config in configs {
        let devcontainer = sources.read(&config);
        let files: Vec<String> = compose_names(&config, dir_of(&config), devcontainer.as_deref())
            .into_iter()
            .filter_map(Result::ok)
            .filter(|name| sources.read(name).is_some())
            .collect();
        if let Some(env) = env_file(&config, files.first().map(String::as_str)) {
            out.push((files, env));
        }
    }
    out
}

/// Every dev container configuration the Dev Containers CLI would offer, sorted:
/// `.devcontainer/devcontainer.json`, `.devcontainer.json`, and
/// `.devcontainer/<name>/devcontainer.json` (one level down).
fn devcontainer_files(sources: &dyn ComposeSources) -> Vec<String> {
    // A link counts when it leads out of the project (what is there is unknown) or to a
    // file of the project.
    let exists = |path: &str| match sources.host_path(path) {
        HostPath::Plain => sources.read(path).is_some(),
        HostPath::Project(p) => sources.read(&p).is_some(),
        HostPath::Outside(_) | HostPath::Unresolvable(_) => true,
    };
    let mut out = Vec::new();
    for path in [
        DEVCONTAINER_PATH,
        aibox_config::layout::DEVCONTAINER_ROOT_JSON,
    ] {
        if exists(path) {
            out.push(path.to_owned());
        }
    }
    let dir = aibox_config::layout::DEVCONTAINER_DIR;
    for name in sources.subdirs(dir.trim_end_matches('/')) {
        let path = format!(
            "{dir}{name}/{}",
            aibox_config::layout::DEVCONTAINER_NAMED_JSON
        );
        if exists(&path) {
            out.push(path);
        }
    }
    out
}

/// The files of a `.devcontainer/devcontainer.json` `dockerComposeFile` (project-relative,
/// in order; entries outside the project or named through a variable as written); `None`
/// when the text does not parse or names none.
pub fn devcontainer_compose_files(jsonc_text: &str) -> Option<Vec<String>> {
    let list: Vec<String> = compose_files_in(".devcontainer", jsonc_text)
        .into_iter()
        .map(|r| r.unwrap_or_else(|written| written))
        .collect();
    (!list.is_empty()).then_some(list)
}

/// The `dockerComposeFile` entries of a configuration in `dir`: `Ok` the project-relative
/// path, `Err` the entry as written when it leaves the project or uses a variable.
fn compose_files_in(dir: &str, jsonc_text: &str) -> Vec<Result<String, String>> {
    let Ok(doc) = parse_jsonc(jsonc_text) else {
        return Vec::new();
    };
    json_strings(doc.get("dockerComposeFile"))
        .into_iter()
        .map(|f| {
            literal_path(&f)
                .and_then(|p| join_project(dir, &p))
                .ok_or(f)
        })
        .collect()
}
