//! `aibox self check`: the running aibox against the newest release on the forge's
//! releases feed, and what the support policy means for it; exit 1 when an update is due.

use aibox_engine::updates;
use serde::Serialize;

use super::{Outcome, json_or};
use crate::args::Global;
use crate::exit::Exit;
use crate::render;

#[derive(Serialize)]
struct Report {
    current: String,
    #[serde(flatten)]
    status: updates::UpdateStatus,
    update_due: bool,
    message: String,
    support_policy: &'static str,
}

const POLICY: &str = "fixes, security fixes included, land only on the newest minor release \
                      line; an older line gets none, so update when a new line is out";

pub fn check(g: &Global) -> Outcome {
    let current = env!("CARGO_PKG_VERSION");
    let environment: Vec<(String, String)> = std::env::vars().collect();
    let extra_ca =
        aibox_engine::versions::extra_ca_of(super::optional_project_root(g)?.as_deref())?;
    let latest = updates::latest_release(&updates::feed_url(&environment), extra_ca)?;
    let status = updates::assess(current, latest)?;
    let report = Report {
        current: current.to_owned(),
        update_due: status.update_due(),
        message: status.message(current),
        status,
        support_policy: POLICY,
    };
    json_or(g, &report, || {
        render::out(&report.message);
        if report.update_due {
            render::out(&format!(
                "update: {}\n    or: cargo install --locked --git \
                 https://github.com/projectious-work/aibox aibox-cli",
                updates::INSTALL_HINT
            ));
        }
        render::out(&format!("support policy: {POLICY}"));
    })?;
    Ok(if report.update_due {
        Exit::Problems
    } else {
        Exit::Ok
    })
}
