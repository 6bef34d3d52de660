//! Which digest an image tag names now, asked of its registry through the OCI
//! distribution API (`HEAD`, else `GET`, `/v2/<repo>/manifests/<tag>`), with Docker's
//! anonymous bearer-token dance when the registry asks for it.
//!
//! The pure parts ([`Target::parse`], [`Challenge::parse`], [`body_digest`]) are separate
//! from the one function that talks to the network ([`resolve_digest`]). Nothing is
//! printed and nothing is written.

use std::time::Duration;

use crate::digest::Sha256;
use crate::fetch::{HttpOptions, agent, describe};

/// Manifest media types a registry may answer with, index types first (a
/// multi-architecture tag must be pinned by its index, never one platform's manifest).
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// Largest manifest body read on the `GET` path (manifests are a few KiB).
const MAX_MANIFEST: u64 = 4 * 1024 * 1024;

/// Where a tag lives: the registry's API address, the repository and the tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `https` or, for a loopback registry, `http`.
    pub scheme: &'static str,
    /// The API host (`registry-1.docker.io` for `docker.io`), with its port.
    pub host: String,
    /// The repository path, `library/debian` for Docker Hub's official images.
    pub repository: String,
    /// The tag.
    pub tag: String,
    /// The name as written (before Docker's defaults), for `name:tag@digest`.
    pub name: String,
}

impl Target {
    /// Resolves `reference` (`[host/]path:tag[@digest]`) the way Docker does: no host means
    /// `docker.io`, a single-component Docker Hub name gets `library/`. A reference without
    /// a tag is refused: only a tag can be re-pinned.
    pub fn parse(reference: &str) -> Result<Self, RegistryError> {
        let bad = |reason: &str| RegistryError::BadReference {
            reference: reference.to_owned(),
            reason: reason.to_owned(),
        };
        let r = aibox_config::ImageRef::parse(reference.trim());
        // What is no reference at all is said so first: "no tag" would send the user
        // after a tag for text that is not an image name.
        if r.name.is_empty() || r.name.chars().any(char::is_whitespace) {
            return Err(bad("the image name is empty or holds spaces"));
        }
        // The pinned digest is replaced; a malformed one is a typo to show, not to drop.
        if let Some(digest) = &r.digest
            && !digest
                .strip_prefix("sha256:")
                .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(bad(
                "the digest after `@` must be `sha256:` and 64 hex digits",
            ));
        }
        let tag = r.tag.clone().ok_or_else(|| RegistryError::NoTag {
            reference: reference.to_owned(),
        })?;
        if tag.is_empty()
            || !tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(bad(
                "the tag may hold only letters, digits, `.`, `_` and `-`",
            ));
        }
        let name = r.name;
        if name.is_empty()
            || name
                .chars()
                .any(|c| c.is_whitespace() || c == '?' || c == '#')
        {
            return Err(bad("the image name is empty or holds spaces, `?` or `#`"));
        }
        // Docker's rule: the first component is a host when it has `.` or `:` or is
        // `localhost`.
        let (host, path) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_owned(), rest.to_owned())
            }
            _ => ("docker.io".to_owned(), name.clone()),
        };
        if path.is_empty()
            || path.split('/').any(str::is_empty)
            || path.chars().any(|c| c.is_ascii_uppercase())
        {
            return Err(bad(
                "the repository path must be lowercase components joined by `/`",
            ));
        }
        let docker_hub = matches!(host.as_str(), "docker.io" | "index.docker.io");
        let repository = if docker_hub && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        let host = if docker_hub {
            "registry-1.docker.io".to_owned()
        } else {
            host
        };
        let scheme = if is_loopback(&host) { "http" } else { "https" };
        Ok(Self {
            scheme,
            host,
            repository,
            tag,
            name,
        })
    }

    /// `<scheme>://<host>/v2/<repository>/manifests/<tag>`.
    pub fn manifest_url(&self) -> String {
        format!(
            "{}://{}/v2/{}/manifests/{}",
            self.scheme, self.host, self.repository, self.tag
        )
    }

    /// `name:tag@digest`, the name as written.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}:{}@{digest}", self.name, self.tag)
    }
}

/// Docker treats `localhost`, `127.0.0.1` and `[::1]` (any port) as plain-HTTP registries.
fn is_loopback(host: &str) -> bool {
    let bare = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    bare == "localhost"
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A `WWW-Authenticate: Bearer realm=..,service=..,scope=..` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The token endpoint.
    pub realm: String,
    /// `service=`, when given.
    pub service: Option<String>,
    /// `scope=`, when given.
    pub scope: Option<String>,
}

impl Challenge {
    /// Parses a Bearer challenge; `None` for any other scheme or without a realm.
    pub fn parse(header: &str) -> Option<Self> {
        let (scheme, params) = header.trim().split_once(char::is_whitespace)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let (mut realm, mut service, mut scope) = (None, None, None);
        let mut rest = params.trim();
        while !rest.is_empty() {
            let (key, after) = rest.split_once('=')?;
            let after = after.trim_start();
            let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
                let end = quoted.find('"')?;
                (&quoted[..end], &quoted[end + 1..])
            } else {
                after.split_at(after.find(',').unwrap_or(after.len()))
            };
            match key.trim().to_ascii_lowercase().as_str() {
                "realm" => realm = Some(value.to_owned()),
                "service" => service = Some(value.to_owned()),
                "scope" => scope = Some(value.to_owned()),
                _ => {}
            }
            rest = tail.trim_start().trim_start_matches(',').trim_start();
        }
        Some(Self {
            realm: realm?,
            service,
            scope,
        })
    }

    /// The token URL: the realm with `scope` (the challenge's, else pull on `repository`)
    /// and `service` as query parameters.
    pub fn token_url(&self, repository: &str) -> String {
        let scope = self
            .scope
            .clone()
            .unwrap_or_else(|| format!("repository:{repository}:pull"));
        let mut url = format!(
            "{}{}scope={}",
            self.realm,
            if self.realm.contains('?') { '&' } else { '?' },
            query_escape(&scope)
        );
        if let Some(s) = &self.service {
            url.push_str("&service=");
            url.push_str(&query_escape(s));
        }
        url
    }
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
fn query_escape(value: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The digest a `GET` answer stands for: its body's SHA-256, which the
/// `Docker-Content-Digest` header must equal when present.
pub fn body_digest(url: &str, header: Option<&str>, body: &[u8]) -> Result<String, RegistryError> {
    let actual = format!("sha256:{}", Sha256::of(body));
    match header {
        Some(h) if h.trim() != actual => Err(RegistryError::DigestMismatch {
            url: url.to_owned(),
            header: h.trim().to_owned(),
            body: actual,
        }),
        _ => Ok(actual),
    }
}

/// Asks the registry which digest `target`'s tag names now.
pub fn resolve_digest(target: &Target, opts: &HttpOptions) -> Result<String, RegistryError> {
    let url = target.manifest_url();
    let agent = agent(opts, &url);
    let mut token: Option<String> = None;
    for method in [Method::Head, Method::Get] {
        let mut answer = request(&agent, method, &url, token.as_deref(), opts)?;
        if answer.status == 401 && token.is_none() {
            token = Some(fetch_token(
                &agent,
                target,
                &url,
                answer.challenge.as_deref(),
                opts,
            )?);
            answer = request(&agent, method, &url, token.as_deref(), opts)?;
        }
        match answer.status {
            200 => match method {
                Method::Head => {
                    if let Some(d) = answer.digest.filter(|d| d.starts_with("sha256:")) {
                        return Ok(d);
                    }
                }
                Method::Get => {
                    return body_digest(&url, answer.digest.as_deref(), &answer.body);
                }
            },
            404 => {
                return Err(RegistryError::UnknownTag {
                    reference: format!("{}:{}", target.name, target.tag),
                    url,
                });
            }
            401 | 403 => {
                return Err(RegistryError::Denied {
                    url,
                    status: answer.status,
                });
            }
            // Some registries refuse HEAD; GET is the fallback.
            s if method == Method::Get || !(400..500).contains(&s) && s != 405 => {
                return Err(RegistryError::Status { url, status: s });
            }
            _ => {}
        }
    }
    Err(RegistryError::Status { url, status: 200 })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Head,
    Get,
}

struct Answer {
    status: u16,
    digest: Option<String>,
    challenge: Option<String>,
    body: Vec<u8>,
}

fn request(
    agent: &ureq::Agent,
    method: Method,
    url: &str,
    token: Option<&str>,
    opts: &HttpOptions,
) -> Result<Answer, RegistryError> {
    let unreachable = |e: &ureq::Error| RegistryError::Unreachable {
        url: url.to_owned(),
        reason: describe(e, opts),
    };
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut req = match method {
        Method::Head => agent.head(url),
        Method::Get => agent.get(url),
    }
    .header("Accept", ACCEPT);
    if let Some(a) = &auth {
        req = req.header("Authorization", a);
    }
    let response = req.call().map_err(|e| unreachable(&e))?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(ToOwned::to_owned)
    };
    let status = response.status().as_u16();
    let digest = header("docker-content-digest");
    let challenge = header("www-authenticate");
    let body = if method == Method::Get && status == 200 {
        response
            .into_body()
            .with_config()
            .limit(opts.max_bytes)
            .read_to_vec()
            .map_err(|e| unreachable(&e))?
    } else {
        Vec::new()
    };
    Ok(Answer {
        status,
        digest,
        challenge,
        body,
    })
}

/// An anonymous token from the challenge's realm (`token`, else `access_token`).
fn fetch_token(
    agent: &ureq::Agent,
    target: &Target,
    url: &str,
    challenge: Option<&str>,
    opts: &HttpOptions,
) -> Result<String, RegistryError> {
    let denied = |reason: String| RegistryError::Token {
        url: url.to_owned(),
        reason,
    };
    let challenge = challenge
        .and_then(Challenge::parse)
        .ok_or_else(|| denied("401 without a Bearer challenge (`WWW-Authenticate`)".into()))?;
    let token_url = challenge.token_url(&target.repository);
    crate::fetch::check_url(&token_url)
        .map_err(|_| denied(format!("the token realm {} is not HTTPS", challenge.realm)))?;
    let response = agent
        .get(&token_url)
        .call()
        .map_err(|e| RegistryError::Unreachable {
            url: token_url.clone(),
            reason: describe(&e, opts),
        })?;
    if response.status().as_u16() != 200 {
        return Err(denied(format!(
            "{token_url} answered HTTP {}",
            response.status().as_u16()
        )));
    }
    let body = response
        .into_body()
        .with_config()
        .limit(opts.max_bytes)
        .read_to_vec()
        .map_err(|e| denied(e.to_string()))?;
    let json: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| denied(format!("not JSON: {e}")))?;
    json.get("token")
        .or_else(|| json.get("access_token"))
        .and_then(serde_json::Value::as_str)
        .map(ToOwned::to_owned)
        .ok_or_else(|| denied("the answer holds no `token`".into()))
}

/// Default limits for registry questions: short, since the answer is a header.
pub fn default_options() -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(10),
        read_timeout: Duration::from_secs(20),
        overall_timeout: Duration::from_mins(1),
        max_bytes: MAX_MANIFEST,
        max_redirects: 0,
        extra_ca_pem: None,
    }
}

const OFFLINE: &str = "nothing was changed; the committed pin stays valid (a digest never moves)";

/// Errors of the registry question.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RegistryError {
    /// The reference has no tag.
    #[error("`{reference}` has no tag to pin")]
    #[diagnostic(
        code(aibox::base_image::no_tag),
        help(
            "name a tag, such as `docker.io/library/debian:trixie-slim`; a digest alone cannot be re-pinned"
        )
    )]
    NoTag {
        /// The reference.
        reference: String,
    },
    /// The reference cannot be an image reference.
    #[error("`{reference}` is not an image reference: {reason}")]
    #[diagnostic(
        code(aibox::base_image::bad_reference),
        help("write `[host/]repository:tag`, such as `docker.io/library/debian:bookworm-slim`")
    )]
    BadReference {
        /// The reference.
        reference: String,
        /// What is wrong.
        reason: String,
    },
    /// No answer: DNS, refusal, timeout, TLS.
    #[error("cannot reach the registry at {url}: {reason}")]
    #[diagnostic(
        code(aibox::base_image::unreachable),
        help("check the network, proxy and the registry host; {OFFLINE}")
    )]
    Unreachable {
        /// The URL asked.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The registry does not know the tag.
    #[error("the registry does not know `{reference}` ({url} answered HTTP 404)")]
    #[diagnostic(
        code(aibox::base_image::unknown_tag),
        help("check the repository and tag spelling; {OFFLINE}")
    )]
    UnknownTag {
        /// `name:tag`.
        reference: String,
        /// The URL asked.
        url: String,
    },
    /// The registry refused the (anonymous) request.
    #[error("the registry refused {url} (HTTP {status})")]
    #[diagnostic(
        code(aibox::base_image::denied),
        help("aibox asks anonymously; a private repository cannot be pinned this way. {OFFLINE}")
    )]
    Denied {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// The anonymous token could not be had.
    #[error("no anonymous token for {url}: {reason}")]
    #[diagnostic(code(aibox::base_image::token), help("{OFFLINE}"))]
    Token {
        /// The manifest URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// Another error status.
    #[error("{url} answered HTTP {status}")]
    #[diagnostic(code(aibox::base_image::http_status), help("{OFFLINE}"))]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// The manifest body does not hash to the digest the registry named.
    #[error("{url} named digest {header} but its manifest hashes to {body}")]
    #[diagnostic(
        code(aibox::base_image::digest_mismatch),
        help("a proxy or the registry changed the answer; {OFFLINE}")
    )]
    DigestMismatch {
        /// The URL.
        url: String,
        /// `Docker-Content-Digest`.
        header: String,
        /// SHA-256 of the body.
        body: String,
    },
}

impl RegistryError {
    /// Who can fix it: a bad reference is the user's; every registry answer the
    /// environment's.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::NoTag { .. } | Self::BadReference { .. } => aibox_config::ErrorKind::User,
            _ => aibox_config::ErrorKind::Environment,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_like_docker() {
        let t = Target::parse("debian:bookworm-slim").unwrap();
        assert_eq!(
            t.manifest_url(),
            "https://registry-1.docker.io/v2/library/debian/manifests/bookworm-slim"
        );
        assert_eq!(t.pinned("sha256:ab"), "debian:bookworm-slim@sha256:ab");
        let pinned = format!(
            "docker.io/library/debian:trixie-slim@sha256:{}",
            "0".repeat(64)
        );
        let t = Target::parse(&pinned).unwrap();
        assert_eq!(t.host, "registry-1.docker.io");
        assert_eq!(t.repository, "library/debian");
        assert_eq!(t.name, "docker.io/library/debian");
        let t = Target::parse("bitnami/redis:7.2").unwrap();
        assert_eq!(t.repository, "bitnami/redis");
        let t = Target::parse("ghcr.io/o/r:1").unwrap();
        assert_eq!(t.manifest_url(), "https://ghcr.io/v2/o/r/manifests/1");
        for (r, url) in [
            (
                "127.0.0.1:5000/x/y:t",
                "http://127.0.0.1:5000/v2/x/y/manifests/t",
            ),
            (
                "localhost:5000/y:t",
                "http://localhost:5000/v2/y/manifests/t",
            ),
            ("[::1]:5000/y:t", "http://[::1]:5000/v2/y/manifests/t"),
            ("localhost/y:t", "http://localhost/v2/y/manifests/t"),
            (
                "registry:5000/y:t",
                "https://registry:5000/v2/y/manifests/t",
            ),
        ] {
            assert_eq!(Target::parse(r).unwrap().manifest_url(), url, "{r}");
        }
    }

    #[test]
    fn bad_references_are_user_errors() {
        for r in [
            "debian",
            "debian@sha256:00",
            "127.0.0.1:5000/x",
            "Debian:1",
            "a//b:1",
            "a:b c",
            ":tag",
            "debian:bookworm@sha256:abc",
            "a/b/c:d@e",
            "not a ref",
        ] {
            let e = Target::parse(r).unwrap_err();
            assert_eq!(e.kind(), aibox_config::ErrorKind::User, "{r}: {e}");
        }
        assert!(matches!(
            Target::parse("debian").unwrap_err(),
            RegistryError::NoTag { .. }
        ));
        // QA28: text that is no reference, and a malformed digest, are bad references.
        for r in ["not a ref", "debian:bookworm@sha256:abc", "a/b/c:d@e"] {
            assert!(
                matches!(
                    Target::parse(r).unwrap_err(),
                    RegistryError::BadReference { .. }
                ),
                "{r}"
            );
        }
        let pinned = format!("debian:bookworm@sha256:{}", "a".repeat(64));
        assert!(Target::parse(&pinned).is_ok());
    }

    #[test]
    fn challenges_parse() {
        let c = Challenge::parse(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/debian:pull""#,
        )
        .unwrap();
        assert_eq!(c.realm, "https://auth.docker.io/token");
        assert_eq!(c.service.as_deref(), Some("registry.docker.io"));
        assert_eq!(
            c.token_url("x"),
            "https://auth.docker.io/token?scope=repository%3Alibrary%2Fdebian%3Apull&service=registry.docker.io"
        );
        let c = Challenge::parse("bearer realm=http://127.0.0.1:1/t?a=b").unwrap();
        assert_eq!(
            c.token_url("x/y"),
            "http://127.0.0.1:1/t?a=b&scope=repository%3Ax%2Fy%3Apull"
        );
        assert!(Challenge::parse(r#"Basic realm="x""#).is_none());
        assert!(Challenge::parse(r#"Bearer service="x""#).is_none());
        assert!(Challenge::parse(r#"Bearer realm="unterminated"#).is_none());
    }

    #[test]
    fn body_digest_checks_the_header() {
        let body = b"{}";
        let d = format!("sha256:{}", Sha256::of(body));
        assert_eq!(body_digest("u", None, body).unwrap(), d);
        assert_eq!(body_digest("u", Some(&d), body).unwrap(), d);
        let e = body_digest("u", Some("sha256:00"), body).unwrap_err();
        assert!(matches!(e, RegistryError::DigestMismatch { .. }));
        assert_eq!(e.kind(), aibox_config::ErrorKind::Environment);
    }
}
