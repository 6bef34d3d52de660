//! `aibox processkit versions`: the releases a processkit source has published
//! (`aibox_engine::versions`).

use super::{Outcome, json_or, optional_project_root};
use crate::args::Global;
use crate::exit::Exit;
use crate::render;

pub fn versions(g: &Global, source: Option<&str>) -> Outcome {
    let root = optional_project_root(g)?;
    let source = aibox_engine::versions::source_for(root.as_deref(), source)?;
    let extra_ca = aibox_engine::versions::extra_ca_of(root.as_deref())?;
    let list = aibox_engine::versions::list(&source, extra_ca)?;
    let newest = list.newest(false).map(|r| r.version.clone());
    let json = serde_json::json!({
        "source": source,
        "latest": newest,
        "releases": list.releases,
        "drafts_left_out": list.drafts,
        "other_tags": list.other_tags,
    });
    json_or(g, &json, || {
        if list.releases.is_empty() {
            render::out(&format!(
                "{source} has published no release with a version tag"
            ));
            return;
        }
        let cells: Vec<Vec<String>> = list
            .releases
            .iter()
            .map(|r| {
                let mut tags = Vec::new();
                if newest.as_deref() == Some(r.version.as_str()) {
                    tags.push("latest");
                }
                if r.prerelease {
                    tags.push("pre-release");
                }
                vec![
                    r.version.clone(),
                    r.published_at
                        .as_deref()
                        .map(|t| t.get(..10).unwrap_or(t).to_owned())
                        .unwrap_or_default(),
                    tags.join(", "),
                ]
            })
            .collect();
        render::out(&format!("releases of {source}:"));
        for line in render::table(&["version", "published", "tags"], &cells) {
            render::out(&line);
        }
        if !list.other_tags.is_empty() {
            render::note(
                g.quiet,
                &format!(
                    "left out {} release(s) whose tag is not a version: {}",
                    list.other_tags.len(),
                    list.other_tags.join(", ")
                ),
            );
        }
        render::note(
            g.quiet,
            "pin one with `aibox config set processkit.version <VERSION>`, then `aibox apply`",
        );
    })?;
    Ok(Exit::Ok)
}
