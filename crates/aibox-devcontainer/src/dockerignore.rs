//! `.devcontainer/.dockerignore`: what the engine is not sent when it builds the image.
//!
//! Both images build with `.devcontainer/` as their context, which also holds the files
//! only Compose reads ([`aibox_config::layout::compose_only_files`]), among them the
//! personal environment (tokens) and Compose overlay. No build step reads those, yet
//! without this file every build sent them to the engine: to the daemon's socket, a
//! remote `DOCKER_HOST` included. Podman (buildah), docker-compose 1.29 (docker-py) and
//! the Docker CLI all read `.dockerignore` at the context root, with patterns relative
//! to it.

use aibox_config::layout;

/// The file's text: aibox's header, then one pattern per compose-only file.
pub(crate) fn render() -> String {
    let mut out = format!(
        "# {}\n\
         # Files only Compose reads (some of them personal) stay out of the build context.\n",
        crate::GENERATED_HEADER
    );
    for path in layout::compose_only_files() {
        // Relative to the context root, `.devcontainer/` (every entry is below it).
        let rel = path.strip_prefix(layout::DEVCONTAINER_DIR).unwrap_or(path);
        out.push_str(rel);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personal_files_are_left_out_and_what_the_build_copies_is_not() {
        let text = render();
        let patterns: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        for personal in [
            layout::LOCAL_ENV,
            layout::COMPOSE_LOCAL,
            layout::COMPOSE_ENV,
        ] {
            let rel = personal.strip_prefix(layout::DEVCONTAINER_DIR).unwrap();
            assert!(patterns.contains(&rel), "{rel}: {text}");
        }
        // Every pattern names a file below the context, never a folder the build copies
        // (`aibox-ca/`, `aibox-mcp/`) or the Dockerfiles.
        for p in &patterns {
            assert!(
                !p.starts_with('/') && !p.ends_with('/') && !p.contains('*'),
                "{p}"
            );
            assert!(layout::read_by_compose_only(&format!(
                "{}{p}",
                layout::DEVCONTAINER_DIR
            )));
        }
        assert!(text.contains(crate::GENERATED_HEADER_MARKER));
    }
}
