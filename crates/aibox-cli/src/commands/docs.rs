//! `aibox docs PAGE` (hidden): a generated reference page as Markdown (`--output json`:
//! `{"page", "markdown"}`).

use super::{Outcome, json_or};
use crate::args::{DocsPage, Global};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, page: DocsPage) -> Outcome {
    let (name, text) = match page {
        DocsPage::Cli => ("cli", crate::docs::cli_reference()),
        DocsPage::Config => ("config", crate::docs::config_reference()),
    };
    let text = text.trim_end();
    json_or(
        g,
        &serde_json::json!({ "page": name, "markdown": text }),
        || render::out(text),
    )?;
    Ok(Exit::Ok)
}
