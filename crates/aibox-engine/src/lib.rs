//! `aibox-engine`: the plan/apply engine shared by the CLI and embedders.
