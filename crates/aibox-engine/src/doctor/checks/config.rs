//! The `config` check: the configuration loads (`aibox.toml` + `.aibox-local.toml`).

use aibox_config::Project;
use aibox_policy::Severity;

use crate::doctor::report::Run;
use crate::writer::ProjectRoot;

/// Loads the project once for every other check; a load failure is the `config` error.
pub(crate) fn check(run: &mut Run, root: &ProjectRoot) -> Option<Project> {
    match aibox_config::load_project(root.path()) {
        Ok(p) => {
            run.check("config", Vec::new());
            Some(p)
        }
        Err(e) => {
            let f = crate::doctor::diagnostic_finding(
                "aibox::doctor::config_invalid",
                Severity::Error,
                aibox_config::AIBOX_TOML,
                "the configuration does not load: ",
                &e,
                "fix the reported keys; `aibox config validate` shows the same diagnostics",
            );
            run.check("config", vec![f]);
            None
        }
    }
}
