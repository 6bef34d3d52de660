//! The `container-state` check: what the engine actually runs, under the policy gate.

use aibox_config::Project;
use camino::Utf8Path;

use crate::doctor::DoctorOptions;
use crate::doctor::report::Run;

/// The `container-state` check: the engine state of the project's container (what the
/// engine actually runs) under the policy gate's rules, as `up` checks it.
pub(crate) fn check(
    run: &mut Run,
    root: &Utf8Path,
    project: Option<&Project>,
    options: &DoctorOptions,
) {
    let Some(p) = project else {
        run.skip("container-state", "no valid configuration");
        return;
    };
    if options.skip_engine {
        run.skip("container-state", "skipped by the caller");
        return;
    }
    let lifecycle = crate::lifecycle::LifecycleOptions {
        env: options.detect.clone(),
        timeouts: aibox_runtime::Timeouts::default(),
    };
    let state = crate::lifecycle::runtime_for_config(root, &p.config, &lifecycle)
        .map_err(|e| e.to_string())
        .and_then(|(runtime, target)| {
            let inspect = || -> Result<_, aibox_runtime::RuntimeError> {
                let Some(mut findings) =
                    crate::lifecycle::container_state(&runtime, &target, &p.config)?
                else {
                    return Ok(None);
                };
                findings.extend(crate::lifecycle::container_health(&runtime, &target)?);
                Ok(Some(findings))
            };
            inspect().map_err(|e| e.to_string())
        });
    match state {
        Ok(Some(findings)) => run.check("container-state", findings),
        Ok(None) => run.skip("container-state", "no container"),
        Err(e) => run.skip("container-state", &e),
    }
}
