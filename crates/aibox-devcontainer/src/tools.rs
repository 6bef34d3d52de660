//! The tool-install steps of the Dockerfile: one `apt-get` layer for the Debian packages,
//! the personal extra CA certificates, then one layer per downloaded tool.
//!
//! Every download goes to a file, is checked against the catalog's digest, and only then
//! unpacked; a mismatch stops the build with the tool, the expected and the actual
//! digest. A failed `RUN` leaves no image, so nothing half-installed can start.

use std::fmt::Write as _;

use crate::catalog::{Archive, Artifact, Tool, Verification, archive_kind, sha512_hex, split_npm};
use crate::quote::shell;

/// Folder (in the build context) holding the personal extra CA certificates.
pub const CA_DIR: &str = "aibox-ca";
/// File inside [`CA_DIR`]: the certificates, or empty when none are configured.
pub const CA_FILE: &str = "extra-ca.crt";

const DL: &str = "/tmp/aibox-download";

/// Text of the committed `README` in [`CA_DIR`].
pub fn ca_readme() -> String {
    format!(
        "# {}\n\
         # This folder is copied into the image build. `extra-ca.crt` (gitignored, personal)\n\
         # holds the CA certificates named by `container.extra_ca_certificates` in\n\
         # .aibox-local.toml, for registries behind a TLS-inspecting proxy; aibox writes it.\n",
        crate::GENERATED_HEADER
    )
}

/// Where an artifact is unpacked inside the image.
pub fn install_dir(tool: &Tool, a: &Artifact) -> String {
    match &a.npm {
        Some(spec) => {
            let name = a
                .install_as
                .as_deref()
                .or_else(|| split_npm(spec).map(|(n, _)| n))
                .unwrap_or(spec);
            format!("/usr/local/lib/node_modules/{name}")
        }
        None => format!("{}/{}", aibox_config::container::TOOLS_DIR, tool.name),
    }
}

/// The download URL of an artifact.
pub fn download_url(a: &Artifact) -> String {
    if let Some(url) = &a.url {
        return url.clone();
    }
    let spec = a.npm.as_deref().unwrap_or_default();
    let (name, version) = split_npm(spec).unwrap_or((spec, ""));
    let base = name.rsplit('/').next().unwrap_or(name);
    format!("https://registry.npmjs.org/{name}/-/{base}-{version}.tgz")
}

/// `(command, expected hex)` for an artifact's check.
pub fn expected_digest(a: &Artifact) -> Option<(&'static str, String)> {
    if let Some(i) = &a.integrity {
        return sha512_hex(i).map(|h| ("sha512sum", h));
    }
    a.sha256.clone().map(|h| ("sha256sum", h))
}

pub(crate) fn render(out: &mut String, tools: &[&Tool]) {
    let apt: Vec<&str> = tools
        .iter()
        .filter(|t| t.verification == Verification::AptSigned)
        .flat_map(|t| t.apt.iter().map(String::as_str))
        .collect();
    if !apt.is_empty() {
        out.push_str(
            "# Debian packages from the base image's signed apt repository (tool catalog).\n",
        );
        let _ = write!(
            out,
            "RUN set -eu; \\\n    \
             apt-get update; \\\n    \
             DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {}; \\\n    \
             rm -rf /var/lib/apt/lists/*\n\n",
            apt.join(" ")
        );
    }
    let _ = write!(
        out,
        "# Extra CA certificates from `.aibox-local.toml` (personal, gitignored; empty when\n\
         # unset): registries behind a TLS-inspecting proxy are reachable only with them.\n\
         COPY {CA_DIR}/ /usr/local/share/aibox-ca/\n\
         RUN if [ -s /usr/local/share/aibox-ca/{CA_FILE} ]; then \\\n        \
         cp /usr/local/share/aibox-ca/{CA_FILE} /usr/local/share/ca-certificates/aibox-{CA_FILE} \\\n        \
         && update-ca-certificates; \\\n    \
         fi\n\
         ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \\\n    \
         UV_SYSTEM_CERTS=1\n\n"
    );
    for tool in tools
        .iter()
        .filter(|t| t.verification != Verification::AptSigned)
    {
        render_tool(out, tool);
    }
}

/// The download steps alone (no apt layer, no CA step) for `tools`. aibox's base image
/// recipe (`images/base/`) installs its downloaded tools with these, so a tool's version and
/// digest live only in the catalog.
pub fn render_downloads(tools: &[&Tool]) -> String {
    let mut out = String::new();
    for tool in tools
        .iter()
        .filter(|t| t.verification != Verification::AptSigned)
    {
        render_tool(&mut out, tool);
    }
    out
}

fn render_tool(out: &mut String, tool: &Tool) {
    let label = format!("{} {}", tool.name, tool.version);
    let _ = writeln!(
        out,
        "# {label} ({}): {}",
        tool.verification.as_str(),
        tool.summary
    );
    if let Some(text) = &tool.exception {
        let _ = writeln!(out, "# UNVERIFIED (exception): {text}");
    }
    out.push_str("RUN set -eu; \\\n    arch=\"$(dpkg --print-architecture)\"; \\\n");
    let mut arches: Vec<&str> = tool
        .artifact
        .iter()
        .filter_map(|a| a.arch.as_deref())
        .collect();
    arches.dedup();
    if !arches.is_empty() {
        let _ = write!(
            out,
            "    case \"$arch\" in {}) ;; \\\n        \
             *) echo \"aibox: {label} has no download for $arch\" >&2; exit 1 ;; \\\n    \
             esac; \\\n",
            arches.join("|")
        );
    }
    // curl's own `--retry` leaves out reset connections and cut streams (seen through
    // TLS-inspecting proxies); the loop tries any failure twice more, and the digest is
    // still checked after.
    let _ = write!(
        out,
        "    mkdir -p {DL}; \\\n    \
         fetch() {{ \\\n        \
         n=0; until curl -fsSL --retry 3 -o {DL}/file \"$1\"; do \\\n            \
         n=$((n + 1)); \\\n            \
         if [ \"$n\" -ge 3 ]; then echo \"aibox: {label}: download of $1 failed 3 times\" >&2; exit 1; fi; \\\n            \
         sleep \"$n\"; \\\n        \
         done; \\\n        \
         actual=\"$($2 {DL}/file | cut -d' ' -f1)\"; \\\n        \
         if [ \"$actual\" != \"$3\" ]; then \\\n            \
         echo \"aibox: {label}: checksum mismatch for $1: expected $2 $3, got $actual\" >&2; \\\n            \
         exit 1; \\\n        \
         fi; \\\n    \
         }}; \\\n"
    );
    for a in &tool.artifact {
        let (indent, close) = match &a.arch {
            Some(arch) => {
                let _ = writeln!(out, "    if [ \"$arch\" = {arch} ]; then \\");
                ("        ", true)
            }
            None => ("    ", false),
        };
        let url = download_url(a);
        let (cmd, hex) = expected_digest(a).unwrap_or(("sha256sum", String::new()));
        let dir = install_dir(tool, a);
        let _ = writeln!(out, "{indent}fetch {} {cmd} {hex}; \\", shell(&url));
        let _ = writeln!(out, "{indent}mkdir -p {}; \\", shell(&dir));
        if a.npm.is_some() {
            let _ = writeln!(
                out,
                "{indent}tar -xzf {DL}/file -C {} --strip-components=1 --no-same-owner; \\",
                shell(&dir)
            );
        } else if archive_kind(&url) == Some(Archive::Zip) {
            let _ = writeln!(
                out,
                "{indent}python3 -m zipfile -e {DL}/file {}; \\",
                shell(&dir)
            );
        } else {
            let _ = writeln!(
                out,
                "{indent}tar -xzf {DL}/file -C {} --no-same-owner; \\",
                shell(&dir)
            );
        }
        for (cmd, path) in &a.bin {
            let target = shell(&format!("{dir}/{path}"));
            let _ = writeln!(
                out,
                "{indent}chmod 0755 {target}; ln -sf {target} {}; \\",
                shell(&format!("/usr/local/bin/{cmd}"))
            );
        }
        if close {
            out.push_str("    fi; \\\n");
        }
    }
    let _ = writeln!(out, "    rm -rf {DL}\n");
}
