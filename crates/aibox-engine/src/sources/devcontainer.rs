//! Plan source: the dev container files from `aibox-devcontainer`.
//!
//! The generator is pure; this source looks up the facts it needs (the text of
//! `Dockerfile.local`, whether the Compose override exists) through the context.

use aibox_devcontainer::{COMPOSE_OVERRIDE_PATH, DOCKERFILE_LOCAL_PATH, Inputs};
use camino::Utf8Path;

use crate::EngineError;
use crate::plan::{PlanBuilder, PlanContext};

/// Adds the generated `.devcontainer/` files, `.aibox-local.env`, the `.aibox-home/`
/// skeleton and the scaffold-once user files to the plan.
pub fn contribute(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError> {
    let dockerfile_local = ctx.read_text(Utf8Path::new(DOCKERFILE_LOCAL_PATH))?;
    let override_exists = ctx.exists(Utf8Path::new(COMPOSE_OVERRIDE_PATH))?;
    let mut inputs = Inputs::new(&ctx.project.config, &ctx.project.local, ctx.aibox_version);
    inputs.dockerfile_local = dockerfile_local.as_deref();
    inputs.override_exists = override_exists;
    inputs.security_opt = &ctx.security_opt;
    plan.extend(aibox_devcontainer::render(&inputs)?)
}
