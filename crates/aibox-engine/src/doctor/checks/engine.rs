//! The `engine` check: the container engine `up` would use.

use aibox_config::Project;
use aibox_policy::{Finding, Severity};
use miette::Diagnostic as _;

use crate::doctor::DoctorOptions;
use crate::doctor::report::Run;

/// The container engine check: which engine `up` would use, or why none is usable.
/// `engine` is doctor's one detection; only when it failed is the engine alone asked
/// again, for its own reason.
pub(crate) fn check(
    run: &mut Run,
    project: Option<&Project>,
    options: &DoctorOptions,
    engine: &super::EngineAt,
) {
    match (project, options.skip_engine) {
        (_, true) => run.skip("engine", super::SKIPPED),
        (None, false) => run.skip("engine", "no valid configuration"),
        (Some(p), false) => {
            let found = match engine {
                Ok((runtime, _)) => Ok(runtime.detected().engine.clone()),
                Err(_) => {
                    aibox_runtime::detect::detect_engine(p.config.container.engine, &options.detect)
                }
            };
            let f = match found {
                Ok(cli) => Finding::new(
                    "aibox::doctor::engine",
                    Severity::Info,
                    "",
                    format!(
                        "container engine: {} ({})",
                        cli.engine,
                        cli.program.display()
                    ),
                    "",
                ),
                Err(e) => Finding::new(
                    "aibox::doctor::no_engine",
                    Severity::Warning,
                    "",
                    format!("no usable container engine: {e}"),
                    e.help()
                        .map_or_else(|| "install Podman or Docker".to_owned(), |h| h.to_string()),
                ),
            };
            run.check("engine", vec![f]);
        }
    }
}
