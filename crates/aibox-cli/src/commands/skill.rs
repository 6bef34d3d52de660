//! `aibox skill list|review|enable|disable`: processkit skills (`aibox_engine::skills`).

use camino::Utf8Path;

use super::{Outcome, json_or, optional_project_root, project_root};
use crate::args::{Global, SkillCommand};
use crate::exit::Exit;
use crate::render;
use aibox_engine::skills::{SkillGate, SkillTrust, Trust};

pub fn run(g: &Global, cmd: &SkillCommand) -> Outcome {
    match cmd {
        SkillCommand::List => list(g),
        SkillCommand::Review { target } => review(g, target),
        SkillCommand::Enable { name } => select(g, name, true),
        SkillCommand::Disable { name } => select(g, name, false),
    }
}

/// Says so when an apply was interrupted: what follows is the half-written tree's state,
/// until `aibox apply` finishes it (as `doctor` says first).
fn warn_unfinished(root: &Utf8Path) {
    if let Some(record) = aibox_engine::records::unfinished_apply_at(root) {
        render::warning(&format!(
            "an apply was interrupted (`{record}` is there): this shows the half-written \
             state; run `aibox apply` to finish it"
        ));
    }
}

fn list(g: &Global) -> Outcome {
    let root = project_root(g)?;
    warn_unfinished(&root);
    let skills = aibox_engine::skills::list(&root)?;
    json_or(g, &skills, || {
        if skills.is_empty() {
            render::out("no processkit skills are installed");
        }
        let mut cells = Vec::new();
        for s in &skills {
            let mut tags = Vec::new();
            if s.core {
                tags.push("core");
            }
            if s.mcp_server {
                tags.push("mcp");
            }
            if s.included {
                tags.push("included");
            }
            if s.excluded {
                tags.push("excluded");
            }
            let used_by = format!("dependency of {}", s.dependency_of.join(", "));
            if !s.dependency_of.is_empty() {
                tags.push(&used_by);
            }
            let origin = match s.origin {
                Trust::FirstParty => "first-party",
                Trust::ThirdParty => "third-party",
            };
            let points: Vec<String> = s.failed_points.iter().map(u8::to_string).collect();
            let failed = format!("fail (point {})", points.join(", "));
            let verdict = match &s.gate {
                SkillGate::Passes => s.verdict.as_str().to_owned(),
                SkillGate::Reported => format!("{failed}, reported"),
                SkillGate::Consented { .. } => format!("{failed}, consented"),
                SkillGate::Blocking => format!("{failed}, blocking"),
                SkillGate::Stale { .. } => format!("{failed}, blocking (stale consent)"),
            };
            cells.push(vec![
                s.name.clone(),
                s.category.clone(),
                origin.to_owned(),
                verdict,
                tags.join(", "),
            ]);
        }
        if !skills.is_empty() {
            let headers = ["skill", "category", "origin", "review", "tags"];
            for line in render::table(&headers, &cells) {
                render::out(&line);
            }
        }
    })?;
    Ok(Exit::Ok)
}

fn review(g: &Global, target: &str) -> Outcome {
    let root = optional_project_root(g)?;
    if let Some(root) = &root {
        warn_unfinished(root);
    }
    let review = aibox_engine::skills::review_target(root.as_deref(), target)?;
    let trust = root
        .as_deref()
        .filter(|_| !Utf8Path::new(target).is_dir())
        .and_then(|r| aibox_engine::skills::trust_of_installed(r, target));
    let sha256 = match &trust {
        Some(t) => t.sha256.clone(),
        None => aibox_engine::skills::content_sha256(Utf8Path::new(target)).unwrap_or_default(),
    };
    // The review's own JSON, plus what a consent needs.
    let mut json = serde_json::to_value(&review).unwrap_or_default();
    if let Some(obj) = json.as_object_mut() {
        obj.insert("sha256".to_owned(), serde_json::json!(sha256));
        obj.insert("trust".to_owned(), serde_json::json!(trust));
    }
    let name = if trust.is_some() {
        target
    } else {
        review.skill.as_str()
    };
    json_or(g, &json, || {
        render::out(review.render_human().trim_end());
        if let Some(t) = &trust {
            let label = match t.trust {
                Trust::FirstParty => "first-party",
                Trust::ThirdParty => "third-party",
            };
            render::out(&format!("Trust: {label}: {}", t.why));
            render::out(&format!(
                "Trusted sources: {}",
                t.trusted_sources.join(", ")
            ));
        }
        render::out(&format!("Content sha256: {sha256}"));
        if review.failed() {
            render::out(&verdict(target, trust.as_ref()));
            render::out(&format!(
                "To consent after reading its code, record in aibox.toml (valid for this \
                 content and these points only):\n{}",
                aibox_engine::skills::consent_snippet(name, &sha256, &review.failed_points())
            ));
        }
    })?;
    Ok(if review.failed() {
        Exit::Problems
    } else {
        Exit::Ok
    })
}

/// The one verdict for a skill that fails a point: whether `aibox apply` registers it.
/// An installed skill's is the engine's (`SkillGate`, which `skill list` and `doctor`
/// show too); a folder given by path is not installed, so it is third-party: gated when
/// it has an MCP server.
fn verdict(target: &str, installed: Option<&SkillTrust>) -> String {
    let (gate, has_server, origin) = if let Some(t) = installed {
        (t.gate.clone(), t.mcp_server, t.trust)
    } else {
        let has_server = Utf8Path::new(target).join("mcp/mcp-config.json").is_file();
        let gate = if has_server {
            SkillGate::Blocking
        } else {
            SkillGate::Reported
        };
        (gate, has_server, Trust::ThirdParty)
    };
    match gate {
        SkillGate::Passes => "Verdict: passes.".to_owned(),
        SkillGate::Reported if !has_server => "Verdict: reported, not blocking: the skill has \
             no MCP server, so `aibox apply` registers nothing of it."
            .to_owned(),
        SkillGate::Reported => {
            debug_assert_eq!(origin, Trust::FirstParty);
            "Verdict: reported, not blocking: the skill is first-party (from a trusted \
             source's verified release pinned in aibox.lock, and unchanged), so `aibox apply` \
             registers it unless `[processkit] review = \"all\"`."
                .to_owned()
        }
        SkillGate::Consented { reviewer } => format!(
            "Verdict: consented: `aibox apply` registers it under the consent {reviewer} \
             recorded for this content and these points."
        ),
        SkillGate::Blocking => "Verdict: blocking: `aibox apply` will not register this skill \
             unless aibox.toml records a [[skills.review_exceptions]] entry for it."
            .to_owned(),
        SkillGate::Stale { why } => format!(
            "Verdict: blocking: the consent recorded for it is stale ({why}); replace it with \
             the entry below."
        ),
    }
}

fn select(g: &Global, name: &str, enable: bool) -> Outcome {
    let root = project_root(g)?;
    let selection = if enable {
        aibox_engine::skills::enable(&root, name, None)
    } else {
        aibox_engine::skills::disable(&root, name, None)
    }?;
    let path = &selection.file;
    // Shown even with --quiet: the command did nothing the user can use yet.
    let warning = selection
        .no_effect
        .then(|| {
            "context mode is `harness-only`, so no processkit skill is installed and this has \
             no effect until [context] mode = \"processkit\""
                .to_owned()
        })
        .or_else(|| {
            selection
                .unchecked
                .as_ref()
                .map(|why| format!("`{name}` was not checked against the release: {why}"))
        });
    json_or(
        g,
        &serde_json::json!({
            "skill": name,
            "enabled": enable,
            "file": path,
            "warning": warning,
        }),
        || {
            render::note(
                g.quiet,
                &format!("updated [skills] in {path}; run `aibox apply` to install or remove it"),
            );
            if let Some(w) = &warning {
                render::warning(w);
            }
        },
    )?;
    Ok(Exit::Ok)
}
