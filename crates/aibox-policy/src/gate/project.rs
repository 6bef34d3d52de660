//! Compose resolution: a project's Compose files loaded as Compose loads them (merge
//! keys, interpolation, `include:`, `extends`), each file, service, network and volume
//! handed to the rules, and whatever cannot be resolved refused until consent names it.

use std::collections::BTreeMap;

use aibox_config::hostpath::HostPath;
use serde_norway::Value as Yaml;
use serde_norway::value::Mapping;

use super::mounts::{Mount, linked_file, proven_read_only, visit_host_read, visit_mount};
use super::service::{check_service, visit_service};
use super::{Ctx, GateInputs, Pass, unparsable};
use crate::compose::{
    ComposeSources, NoSources, dir_of, interpolate_tree, join_project, normalise_yaml,
    parse_env_file, variables_in, yaml_tags,
};
use crate::finding::{Consent, Finding, Severity};
use crate::text::line_of;

/// Checks a Compose file (generated or the user-owned override) for dangerous options, as
/// Compose resolves it (merge keys, interpolation, `extends` within the file). Files it
/// refers to are not available here, so `include:` and `extends.file` are refused; the
/// engine uses [`check_compose_project`], which follows them.
pub fn check_compose(file: &str, yaml_text: &str, consent: &Consent) -> Vec<Finding> {
    check_compose_project(&[(file, yaml_text)], None, &NoSources, consent)
}

/// Service keys whose values the gate judges: a variable in any of them could turn a
/// harmless file into a dangerous one at run time (the shell overrides `.env` and defaults).
const GUARDED_KEYS: [&str; 29] = [
    "networks",
    "privileged",
    "cap_add",
    "security_opt",
    "network_mode",
    "pid",
    "ipc",
    "uts",
    "userns_mode",
    "cgroup",
    "cgroup_parent",
    "devices",
    "device_cgroup_rules",
    "volumes",
    "volumes_from",
    "user",
    "use_api_socket",
    "build",
    "env_file",
    "extends",
    "runtime",
    "sysctls",
    "group_add",
    "configs",
    "secrets",
    "logging",
    "post_start",
    "pre_stop",
    "provider",
];

/// Variables whose value the gate knows: the user's home stays the home.
const KNOWN_VARIABLES: [&str; 1] = ["HOME"];

/// Checks the Compose files of a project as Compose loads them: `files` in load order
/// (project-relative path, text), `env_text` the `.env` file next to the first one,
/// `sources` for files they refer to (`include`, `extends.file`).
///
/// Judged: every service of every file and of every included file, every service reached
/// through `extends`, named volumes that bind host paths, and host files read by
/// `env_file`, `configs`, `secrets`, `build.context` and `build.additional_contexts`. A
/// variable in a guarded field, a file that cannot be read, or a reference outside the
/// project is refused until a `[[security.exceptions]]` entry names it.
pub fn check_compose_project(
    files: &[(&str, &str)],
    env_text: Option<&str>,
    sources: &dyn ComposeSources,
    consent: &Consent,
) -> Vec<Finding> {
    let inputs = GateInputs::record(sources, |rec| {
        compose_project(files, env_text, rec, consent, Pass::Traverse);
    });
    inputs.judge(|closed| compose_project(files, env_text, closed, consent, Pass::Judge))
}

/// [`check_compose_project`] in one pass: the traversal reads what the rules will read,
/// the judgement runs the rules.
pub(super) fn compose_project(
    files: &[(&str, &str)],
    env_text: Option<&str>,
    sources: &dyn ComposeSources,
    consent: &Consent,
    pass: Pass,
) -> Vec<Finding> {
    let mut env = env_text.map(parse_env_file).unwrap_or_default();
    env.insert("HOME".to_owned(), "~".to_owned());
    let mut r = Resolver {
        env,
        pass,
        sources,
        consent,
        loaded: BTreeMap::new(),
        base_dirs: BTreeMap::new(),
        out: Vec::new(),
        visited: Vec::new(),
    };
    let mut queue: Vec<String> = Vec::new();
    for (path, text) in files {
        r.load_text(path, text);
        queue.push((*path).to_owned());
    }
    // In load order; included files after the ones handed in.
    let mut judged: Vec<String> = Vec::new();
    let mut next = 0;
    while let Some(path) = queue.get(next).cloned() {
        next += 1;
        if judged.contains(&path) {
            continue;
        }
        judged.push(path.clone());
        if judged.len() > 64 {
            break;
        }
        r.judge_file(&path);
        queue.extend(r.includes(&path));
    }
    let mut out = r.out;
    let mut seen = Vec::new();
    out.retain(|f| {
        let key = (f.code.clone(), f.file.clone(), f.line, f.message.clone());
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    out
}

struct LoadedFile {
    text: String,
    doc: Option<Yaml>,
}

struct Resolver<'a> {
    env: BTreeMap<String, String>,
    /// Traversal (read what the rules read) or judgement (run the rules).
    pass: Pass,
    sources: &'a dyn ComposeSources,
    consent: &'a Consent,
    loaded: BTreeMap<String, LoadedFile>,
    /// The folder relative paths of an included file resolve against, when `include`
    /// set a `project_directory` (else the file's own folder).
    base_dirs: BTreeMap<String, String>,
    out: Vec<Finding>,
    visited: Vec<(String, String)>,
}

impl Resolver<'_> {
    /// The rule context for a file of this project: its text and the folder its relative
    /// paths resolve against.
    fn ctx<'c>(&'c self, file: &'c str, text: &'c str, dir: &'c str) -> Ctx<'c> {
        Ctx {
            file,
            text,
            consent: self.consent,
            sources: self.sources,
            dir: Some(dir),
        }
    }

    fn load_text(&mut self, path: &str, text: &str) {
        let mut kept = Vec::new();
        let doc = match serde_norway::from_str::<Yaml>(text) {
            Ok(doc) => match normalise_yaml(doc, 0, &mut kept) {
                Ok(doc) => Some(doc),
                Err(e) => {
                    self.out.push(unparsable(path, "YAML", &e));
                    None
                }
            },
            Err(e) => {
                let line = e.location().map(|l| l.line());
                self.out
                    .push(unparsable(path, "YAML", &e.to_string()).at(line));
                None
            }
        };
        let mut tags: Vec<(Option<usize>, String)> = yaml_tags(text)
            .into_iter()
            .map(|(line, tag)| (Some(line), tag))
            .collect();
        if tags.is_empty() {
            // A tag the parser saw and the text scan did not: still refused.
            tags.extend(kept.into_iter().map(|tag| (None, tag)));
        }
        for (line, tag) in tags {
            self.out.push(
                Finding::new(
                    "aibox::policy::yaml_tag",
                    Severity::Error,
                    path,
                    format!(
                        "`{tag}`: a YAML tag or directive changes what Compose reads (it decodes \
                         `!!binary`, `!reset` and `!override` change merges), and the gate \
                         judges untagged YAML only"
                    ),
                    "write the value itself without a tag; instead of `!reset`/`!override`, \
                     write the resulting list or mapping in full",
                )
                .at(line),
            );
        }
        self.loaded.insert(
            path.to_owned(),
            LoadedFile {
                text: text.to_owned(),
                doc,
            },
        );
    }

    /// Loads a referenced file through the sources; false when it cannot be read.
    fn load_ref(&mut self, path: &str) -> bool {
        if self.loaded.contains_key(path) {
            return true;
        }
        let mut refused = Vec::new();
        if linked_file(self.sources, self.consent, path, path, &mut refused) {
            // Refused as a link; nothing of it is judged (or run, once fixed).
            self.out.extend(refused);
            self.loaded.insert(
                path.to_owned(),
                LoadedFile {
                    text: String::new(),
                    doc: None,
                },
            );
            return true;
        }
        match self.sources.read(path) {
            Some(text) => {
                self.load_text(path, &text);
                true
            }
            None => false,
        }
    }

    fn unseen(&mut self, file: &str, what: &str, target: &str, line: Option<usize>) {
        let f = Finding::new(
            "aibox::policy::unchecked_include",
            Severity::Error,
            file,
            format!(
                "{what} `{target}`, which the gate cannot read (missing, outside the project, or \
                 named through a variable), so it cannot tell what runs"
            ),
            format!(
                "use a file inside the project under a literal path, or record the consent with a \
                 `[[security.exceptions]]` entry `option = \"include:{target}\"`"
            ),
        )
        .at(line);
        self.out
            .extend(self.consent.judge(true, &format!("include:{target}"), f));
    }

    /// The files `path` includes (`include:`), loaded; the unreadable ones are refused.
    fn includes(&mut self, path: &str) -> Vec<String> {
        let Some(include) = self
            .loaded
            .get(path)
            .and_then(|l| l.doc.as_ref())
            .and_then(|d| d.get("include"))
            .cloned()
        else {
            return Vec::new();
        };
        let text = self.text_of(path);
        // (file as written, `project_directory` as written)
        let mut raw: Vec<(String, Option<String>)> = Vec::new();
        let entries = match include {
            Yaml::Sequence(items) => items,
            other => vec![other],
        };
        for entry in entries {
            let project_dir = entry
                .get("project_directory")
                .map(|d| d.as_str().unwrap_or("?").to_owned());
            match &entry {
                Yaml::String(s) => raw.push((s.clone(), None)),
                Yaml::Mapping(_) => match entry.get("path") {
                    Some(Yaml::String(s)) => raw.push((s.clone(), project_dir)),
                    Some(Yaml::Sequence(items)) => raw.extend(
                        items
                            .iter()
                            .filter_map(Yaml::as_str)
                            .map(|s| (s.to_owned(), project_dir.clone())),
                    ),
                    _ => raw.push(("?".to_owned(), None)),
                },
                _ => raw.push(("?".to_owned(), None)),
            }
        }
        let mut found = Vec::new();
        for (target, project_dir) in raw {
            let line = line_of(&text, &target);
            let resolved = literal_path(&target).and_then(|t| join_project(dir_of(path), &t));
            let Some(p) = resolved.filter(|p| self.load_ref(p)) else {
                self.unseen(path, "`include:` pulls in", &target, line);
                continue;
            };
            if let Some(raw_dir) = project_dir {
                // When refused, the file is still judged against its own folder.
                if let Some(dir) = self.project_directory(path, &raw_dir) {
                    self.base_dirs.entry(p.clone()).or_insert(dir);
                }
            }
            found.push(p);
        }
        found
    }

    /// An `include` entry's `project_directory`, project-relative, or `None` (refused)
    /// when it leaves the project, uses a variable, or is a link out of the project: the
    /// included file's relative paths (`./etc/cron.d`) would then name host folders.
    fn project_directory(&mut self, path: &str, raw: &str) -> Option<String> {
        let dir = literal_path(raw)
            .and_then(|d| join_project(dir_of(path), &d))
            .and_then(|d| match self.sources.host_path(&d) {
                HostPath::Plain => Some(d),
                HostPath::Project(real) => Some(real),
                HostPath::Outside(_) | HostPath::Unresolvable(_) => None,
            });
        if dir.is_none() {
            let text = self.text_of(path);
            let f = Finding::new(
                "aibox::policy::unchecked_include",
                Severity::Error,
                path,
                format!(
                    "`include:` sets `project_directory: {raw}`, outside the project: the \
                     included file's relative paths then name host folders"
                ),
                format!(
                    "drop `project_directory` or name a folder inside the project; to keep it, \
                     record the consent with a `[[security.exceptions]]` entry \
                     `option = \"include:{raw}\"`"
                ),
            )
            .at(line_of(&text, "project_directory"));
            self.out
                .extend(self.consent.judge(true, &format!("include:{raw}"), f));
        }
        dir
    }

    /// The folder relative paths in `path` resolve against.
    fn dir_for(&self, path: &str) -> String {
        self.base_dirs
            .get(path)
            .cloned()
            .unwrap_or_else(|| dir_of(path).to_owned())
    }

    /// The text of a loaded file (empty when it was not loaded), for line lookups.
    fn text_of(&self, path: &str) -> String {
        self.loaded
            .get(path)
            .map(|l| l.text.clone())
            .unwrap_or_default()
    }

    fn judge_file(&mut self, path: &str) {
        let Some(doc) = self.loaded.get(path).and_then(|l| l.doc.clone()) else {
            return;
        };
        let text = self.text_of(path);
        let dir = self.dir_for(path);
        // Top-level named volumes that bind a host path, and files handed in as configs
        // or secrets.
        if self.pass == Pass::Judge {
            self.judge_networks(path, &text, &doc, &dir);
        }
        for (key, is_volume) in [("volumes", true), ("configs", false), ("secrets", false)] {
            let Some(map) = doc.get(key).and_then(Yaml::as_mapping) else {
                continue;
            };
            for (name, def) in map {
                let name = name.as_str().unwrap_or("?");
                let mut errors = Vec::new();
                let def = self.guard_variables(path, &text, key, def, &mut errors);
                if self.pass == Pass::Traverse {
                    visit_top_level(self.sources, &dir, is_volume, &def);
                    continue;
                }
                let ctx = self.ctx(path, &text, &dir);
                let mut out = Vec::new();
                if is_volume {
                    if let Some(device) = volume_device(&def) {
                        // A block device (`type: ext4`, `device: /dev/sda1`) hands over a
                        // whole file system, read-only or not.
                        let read_only = !device.trim().starts_with("/dev/")
                            && def
                                .get("driver_opts")
                                .and_then(|o| o.get("o"))
                                .and_then(Yaml::as_str)
                                .is_some_and(proven_read_only);
                        ctx.mount(
                            &Mount {
                                source: device.to_owned(),
                                read_only,
                            },
                            &mut out,
                        );
                    }
                } else if let Some(file) = def.get("file").and_then(Yaml::as_str) {
                    ctx.host_read(&format!("{key}.{name}.file"), file, &mut out);
                }
                self.out.extend(out);
            }
        }
        if let Some(services) = doc.get("services").and_then(Yaml::as_mapping) {
            for (name, _) in services {
                let name = name.as_str().unwrap_or("?").to_owned();
                self.visited.clear();
                self.judge_service(path, &name, 0);
            }
        }
    }

    /// Top-level networks that are the host's network (`host` by key or by `name`, or the
    /// `host` driver): a service on them shares the host's network namespace.
    fn judge_networks(&mut self, path: &str, text: &str, doc: &Yaml, dir: &str) {
        let Some(map) = doc.get("networks").and_then(Yaml::as_mapping) else {
            return;
        };
        for (name, def) in map {
            let name = name.as_str().unwrap_or("?");
            let mut errors = Vec::new();
            let def = self.guard_variables(path, text, "networks", def, &mut errors);
            let field = |k: &str| def.get(k).and_then(Yaml::as_str).map(str::trim);
            let host = name == "host"
                || field("name").is_some_and(|n| n.eq_ignore_ascii_case("host"))
                || field("driver").is_some_and(|d| d.eq_ignore_ascii_case("host"));
            if host {
                let ctx = self.ctx(path, text, dir);
                let mut out = Vec::new();
                ctx.namespace("network_mode", "host", &mut out);
                self.out.extend(out);
            }
        }
    }

    /// Refuses variables (and invalid templates) in a guarded value and returns the value
    /// as Compose interpolates it.
    fn guard_variables(
        &mut self,
        file: &str,
        text: &str,
        key: &str,
        value: &Yaml,
        errors: &mut Vec<String>,
    ) -> Yaml {
        let mut vars = Vec::new();
        let invalid = variables_in(value, &mut vars);
        vars.sort();
        vars.dedup();
        // The internal egress network's name: `aibox up` sets it, `.env` may not (the
        // egress gate), and the value judged here is the generated default.
        let known = |v: &str| {
            KNOWN_VARIABLES.contains(&v)
                || (key == "networks" && v == aibox_config::container::EGRESS_NETWORK_VAR)
        };
        for var in vars.iter().filter(|v| !known(v)) {
            let f = Finding::new(
                "aibox::policy::unresolved_variable",
                Severity::Error,
                file,
                format!(
                    "`{key}` depends on the variable `{var}`: its value comes from the shell or \
                     `.env` when the container starts, so the gate cannot judge it"
                ),
                format!(
                    "write the value literally, or record the consent with a \
                     `[[security.exceptions]]` entry `option = \"env:{var}\"`"
                ),
            )
            .at(line_of(text, var));
            self.out
                .extend(self.consent.judge(true, &format!("env:{var}"), f));
        }
        if invalid {
            let f = Finding::new(
                "aibox::policy::unresolved_variable",
                Severity::Error,
                file,
                format!("`{key}` holds an invalid `$` interpolation, which Compose refuses"),
                "write `$$` for a literal dollar sign",
            )
            .at(line_of(text, key));
            self.out.push(f);
        }
        interpolate_tree(value, &self.env, errors)
    }

    fn judge_service(&mut self, path: &str, name: &str, depth: usize) {
        let key = (path.to_owned(), name.to_owned());
        if self.visited.contains(&key) {
            return;
        }
        self.visited.push(key);
        let Some(raw) = self
            .loaded
            .get(path)
            .and_then(|l| l.doc.as_ref())
            .and_then(|d| d.get("services"))
            .and_then(|s| s.get(name))
            .cloned()
        else {
            return;
        };
        let text = self.text_of(path);
        let dir = self.dir_for(path);
        let mut svc = Mapping::new();
        if let Some(map) = raw.as_mapping() {
            for (k, v) in map {
                let key_name = k.as_str().unwrap_or("");
                let value = if GUARDED_KEYS.contains(&key_name) {
                    let mut errors = Vec::new();
                    self.guard_variables(path, &text, key_name, v, &mut errors)
                } else {
                    v.clone()
                };
                svc.insert(k.clone(), value);
            }
        }
        let svc = Yaml::Mapping(svc);
        match self.pass {
            Pass::Traverse => visit_service(self.sources, &dir, &svc),
            Pass::Judge => {
                let ctx = self.ctx(path, &text, &dir);
                let mut out = Vec::new();
                check_service(&ctx, name, &svc, &mut out);
                self.out.extend(out);
            }
        }
        // `extends`: the base service is part of this one; judge it where it is defined.
        let Some(extends) = svc.get("extends") else {
            return;
        };
        let (base_file, base_name) = match extends {
            Yaml::String(s) => (None, s.clone()),
            other => (
                other.get("file").and_then(Yaml::as_str).map(str::to_owned),
                other
                    .get("service")
                    .and_then(Yaml::as_str)
                    .unwrap_or("?")
                    .to_owned(),
            ),
        };
        let line = line_of(&text, "extends");
        let target = match base_file {
            None => Some(path.to_owned()),
            Some(f) => join_project(&dir, &f)
                .filter(|p| self.load_ref(p))
                .or_else(|| {
                    self.unseen(
                        path,
                        &format!("service `{name}` extends a service from"),
                        &f,
                        line,
                    );
                    None
                }),
        };
        if let Some(target) = target {
            if depth >= 16 {
                self.unseen(path, "`extends` nests deeper than 16 levels at", name, line);
                return;
            }
            self.judge_service(&target, &base_name, depth + 1);
        }
    }
}

/// What the rules read for a top-level volume (the host path a `driver_opts.device`
/// binds) or config/secret (its `file`), read without judging.
fn visit_top_level(sources: &dyn ComposeSources, dir: &str, is_volume: bool, def: &Yaml) {
    if is_volume {
        if let Some(device) = volume_device(def) {
            visit_mount(sources, Some(dir), device);
        }
    } else if let Some(file) = def.get("file").and_then(Yaml::as_str) {
        visit_host_read(sources, Some(dir), file);
    }
}

/// The host path a named volume's `driver_opts.device` binds (not an NFS-style
/// `:/export`).
fn volume_device(def: &Yaml) -> Option<&str> {
    def.get("driver_opts")
        .and_then(|o| o.get("device"))
        .and_then(Yaml::as_str)
        .filter(|d| !d.starts_with(':'))
}

/// The path when it has no interpolation; `None` otherwise.
pub(super) fn literal_path(raw: &str) -> Option<String> {
    (!raw.contains('$')).then(|| raw.trim().to_owned())
}
