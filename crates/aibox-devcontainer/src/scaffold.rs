//! Scaffold-once user files: created when missing, never overwritten afterwards.

/// `.devcontainer/Dockerfile.local`: comments only, so it changes nothing by default.
pub(crate) const DOCKERFILE_LOCAL: &str = "\
# Dockerfile.local: your additions to the dev container image (aibox never overwrites this
# file). `aibox apply` inlines it verbatim near the end of the generated Dockerfile; the
# steps here run as root, and the generated `USER` line follows them.
# Do not add `FROM` (change `container.base_image` in aibox.toml instead), do not end with a
# line continuation, close every heredoc (`RUN <<EOT` needs its `EOT` line), and never put
# secrets here: image layers are not private.
#
# Example:
# RUN apt-get update \\
#  && apt-get install -y --no-install-recommends ripgrep \\
#  && rm -rf /var/lib/apt/lists/*
";

/// `.devcontainer/docker-compose.override.yml`: a valid Compose file that adds nothing.
///
/// It names the service with no keys: docker-compose 1.29 reads a file whose `services`
/// map is empty as the legacy version-1 format and refuses to merge it.
pub(crate) fn compose_override(service: &str) -> String {
    format!(
        "\
# docker-compose.override.yml: your additions to the dev container service (aibox never
# overwrites this file). Compose merges it over docker-compose.yml, and aibox's security
# policy checks the merged result. Replace `{{}}` below with your keys, for example:
#
# services:
#   {name}:
#     ports:
#       - \"127.0.0.1:3000:3000\"
#
# If you rename `container.name` in aibox.toml, rename the service here too.
# Secrets belong in .aibox-local.toml [container.environment], not here.
services:
  {name}: {{}}
",
        name = crate::quote::yaml(service)
    )
}
