//! Bounded HTTP(S) downloads with `ureq`: timeouts, a size cap, redirects followed by hand
//! (so every hop is checked for HTTPS and counted), streaming hash, progress callback.
//! Nothing is printed here; the CLI renders progress from the callback.

use std::io::Read;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ureq::tls::{Certificate, RootCerts, TlsConfig};

use crate::digest::{Counter, Sha256};
use crate::error::{ProvenanceError, Result};

/// Limits of one download.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Longest silence while reading the body.
    pub read_timeout: Duration,
    /// Whole request, redirects included.
    pub overall_timeout: Duration,
    /// Largest accepted body in bytes.
    pub max_bytes: u64,
    /// Most redirects followed before giving up.
    pub max_redirects: u32,
    /// PEM text of CA certificates trusted on top of the system's and Mozilla's: the
    /// personal `container.extra_ca_certificates`, typically a TLS-inspecting proxy's CA.
    pub extra_ca_pem: Option<Arc<str>>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(15),
            read_timeout: Duration::from_secs(30),
            overall_timeout: Duration::from_mins(5),
            max_bytes: 64 * 1024 * 1024,
            max_redirects: 5,
            extra_ca_pem: None,
        }
    }
}

/// Progress of a running download, handed to the caller's callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes received so far.
    pub received: u64,
    /// Total size when the server announced it.
    pub total: Option<u64>,
}

/// A download callback; the CLI draws a progress bar from it on a TTY.
pub type ProgressFn<'a> = &'a mut dyn FnMut(Progress);

/// A completed download.
#[derive(Debug, Clone)]
pub struct Downloaded {
    /// The body.
    pub bytes: Vec<u8>,
    /// Its SHA-256.
    pub digest: Sha256,
    /// The URL that finally answered (after redirects).
    pub final_url: String,
}

/// Accepts `https://` always and `http://` only for loopback hosts.
pub fn check_url(url: &str) -> Result<()> {
    let insecure = || ProvenanceError::InsecureUrl {
        url: url.to_owned(),
    };
    if url.starts_with("https://") {
        return Ok(());
    }
    let rest = url.strip_prefix("http://").ok_or_else(insecure)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    let loopback_ip = host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback());
    if !authority.contains('@') && (host == "localhost" || loopback_ip) {
        Ok(())
    } else {
        Err(insecure())
    }
}

fn resolve_location(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    if location.starts_with('/') {
        format!("{}{location}", &base[..authority_end])
    } else {
        let dir_end = base
            .rfind('/')
            .filter(|&i| i >= authority_end)
            .map_or(authority_end, |i| i);
        format!("{}/{location}", &base[..dir_end])
    }
}

/// What to do when a server's certificate chains to no trusted CA: on a company network
/// the usual cause is a TLS-inspecting proxy whose CA this machine does not trust yet.
pub const UNTRUSTED_CA_HINT: &str = "the certificate is signed by a CA aibox does not trust; \
     behind a TLS-inspecting proxy, name its CA's PEM file in .aibox-local.toml \
     `container.extra_ca_certificates`, or add it to the system's store (or point \
     SSL_CERT_FILE at a bundle holding it)";

/// An HTTP error in words; a timeout names the limit that was reached and its duration
/// (ureq alone says only "timeout: global").
pub(crate) fn describe(e: &ureq::Error, opts: &HttpOptions) -> String {
    use ureq::Timeout as T;
    let ureq::Error::Timeout(kind) = e else {
        let text = e.to_string();
        if text.contains("UnknownIssuer") {
            let unread = &base().unread;
            let store = if unread.is_empty() {
                String::new()
            } else {
                format!(
                    " (part of the system's store could not be read: {}; check SSL_CERT_FILE \
                     and SSL_CERT_DIR)",
                    unread.join("; ")
                )
            };
            return format!("{text}: {UNTRUSTED_CA_HINT}{store}");
        }
        return text;
    };
    let (what, limit) = match kind {
        T::Resolve | T::Connect => ("connecting", opts.connect_timeout),
        T::PerRead | T::RecvResponse | T::PerWrite | T::SendRequest | T::SendBody => {
            ("waiting for data", opts.read_timeout)
        }
        _ => ("the whole download", opts.overall_timeout),
    };
    format!(
        "timed out: {what} took longer than {:.1} s ({kind})",
        limit.as_secs_f64()
    )
}

/// Whether `url` names something the server has (a `HEAD` request; redirects count as
/// present). `false` only for 404 and 410; anything unclear counts as present.
pub fn exists(url: &str, opts: &HttpOptions) -> bool {
    if check_url(url).is_err() {
        return true;
    }
    agent(opts, url)
        .head(url)
        .call()
        .map_or(true, |r| !matches!(r.status().as_u16(), 404 | 410))
}

/// The agent every download and registry question uses: `opts`' timeouts, no automatic
/// redirects (callers check each hop), statuses returned rather than raised, no
/// compression (digests are of the bytes served). An `https` URL is checked against
/// [`trusted_roots`]; any other needs no TLS, so the certificate stores are not read.
pub(crate) fn agent(opts: &HttpOptions, url: &str) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .accept_encoding("identity")
        .timeout_connect(Some(opts.connect_timeout))
        .timeout_recv_response(Some(opts.read_timeout))
        .timeout_recv_body(Some(opts.overall_timeout))
        .timeout_global(Some(opts.overall_timeout))
        .timeout_per_read(Some(opts.read_timeout))
        .user_agent(concat!("aibox/", env!("CARGO_PKG_VERSION")));
    let config = if url.starts_with("https://") {
        config.tls_config(
            TlsConfig::builder()
                .root_certs(trusted_roots(opts.extra_ca_pem.as_deref()))
                .build(),
        )
    } else {
        config
    };
    config.build().into()
}

/// The agents one download needs across its redirects, each made at its first use: one
/// for plain-HTTP loopback hops (no certificate store read) and one for HTTPS hops (the
/// trusted roots, with the extra CA, gathered once rather than at every hop).
struct Agents<'a> {
    opts: &'a HttpOptions,
    plain: Option<ureq::Agent>,
    tls: Option<ureq::Agent>,
}

impl<'a> Agents<'a> {
    fn new(opts: &'a HttpOptions) -> Self {
        Self {
            opts,
            plain: None,
            tls: None,
        }
    }

    /// The agent for `url`.
    fn get(&mut self, url: &str) -> &ureq::Agent {
        let slot = if url.starts_with("https://") {
            &mut self.tls
        } else {
            &mut self.plain
        };
        slot.get_or_insert_with(|| agent(self.opts, url))
    }
}

/// Mozilla's roots and the system's store, read once per process, and why any part of
/// the store could not be read (an `SSL_CERT_FILE` naming a missing file replaces the
/// store with nothing, silently otherwise).
struct Base {
    roots: Arc<Vec<Certificate<'static>>>,
    unread: Vec<String>,
}

fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let mut roots: Vec<Certificate<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS
            .iter()
            .map(|c| Certificate::from_der(c.as_ref()))
            .collect();
        // Unreadable entries of the store are skipped, as curl skips them; the errors
        // are kept for the message of a refused certificate.
        let system = rustls_native_certs::load_native_certs();
        roots.extend(
            system
                .certs
                .iter()
                .map(|c| Certificate::from_der(c.as_ref()).to_owned()),
        );
        roots.sort_unstable_by(|a, b| a.der().cmp(b.der()));
        roots.dedup_by(|a, b| a.der() == b.der());
        Base {
            roots: Arc::new(roots),
            unread: system.errors.iter().map(ToString::to_string).collect(),
        }
    })
}

/// The certificates of PEM text (anything else in it is skipped).
fn pem_certificates(pem: &str) -> impl Iterator<Item = Certificate<'static>> + '_ {
    ureq::tls::parse_pem(pem.as_bytes()).filter_map(|item| match item {
        Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
        _ => None,
    })
}

/// The CA certificates aibox's downloads trust: Mozilla's set, the system's store (where
/// a company's TLS-inspecting proxy puts its CA, so aibox reaches what curl and git
/// reach; `SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured) and `extra_pem`'s
/// certificates. ureq alone trusts Mozilla's set only, which fails behind such a proxy.
/// Anything in `extra_pem` that is not a certificate is ignored (the engine refuses a
/// file holding a key, or no usable certificate, before it gets here).
pub fn trusted_roots(extra_pem: Option<&str>) -> RootCerts {
    let base = &base().roots;
    match extra_pem {
        None => RootCerts::Specific(Arc::clone(base)),
        Some(extra) => base.iter().cloned().chain(pem_certificates(extra)).into(),
    }
}

/// [`trusted_roots`] as one PEM bundle, for a program aibox starts that reads
/// `SSL_CERT_FILE` in place of its own roots (uv): it then trusts what aibox trusts.
pub fn trusted_bundle_pem(extra_pem: Option<&str>) -> String {
    use base64::Engine as _;
    let extra: Vec<Certificate<'static>> = extra_pem
        .map(|p| pem_certificates(p).collect())
        .unwrap_or_default();
    let mut out = String::new();
    for cert in base().roots.iter().chain(&extra) {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let text = base64::engine::general_purpose::STANDARD.encode(cert.der());
        for line in text.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

/// How many of `pem`'s certificate blocks are certificates a TLS client can trust, and
/// how many are not (a damaged block, a body that is not X.509): a CA file whose every
/// block is damaged would otherwise be accepted and silently trusted for nothing.
pub fn usable_certificates(pem: &str) -> (usize, usize) {
    let mut store = rustls::RootCertStore::empty();
    let blocks: Vec<rustls::pki_types::CertificateDer<'static>> = pem_certificates(pem)
        .map(|c| rustls::pki_types::CertificateDer::from(c.der().to_vec()))
        .collect();
    let bad_blocks = pem
        .matches("-----BEGIN CERTIFICATE-----")
        .count()
        .saturating_sub(blocks.len());
    let (added, ignored) = store.add_parsable_certificates(blocks);
    (added, ignored + bad_blocks)
}

/// Downloads `url` into memory, hashing while streaming (small files: sidecars).
pub fn download(
    url: &str,
    opts: &HttpOptions,
    progress: Option<ProgressFn<'_>>,
) -> Result<Downloaded> {
    into_memory(url, opts, None, progress)
}

/// Downloads `url` into memory asking for the media type `accept` (an index's JSON API).
pub fn download_accepting(url: &str, accept: &str, opts: &HttpOptions) -> Result<Downloaded> {
    into_memory(url, opts, Some(accept), None)
}

fn into_memory(
    url: &str,
    opts: &HttpOptions,
    accept: Option<&str>,
    progress: Option<ProgressFn<'_>>,
) -> Result<Downloaded> {
    let mut bytes = Vec::new();
    let (digest, final_url) = fetch_into(url, opts, accept, progress, &mut bytes)?;
    Ok(Downloaded {
        bytes,
        digest,
        final_url,
    })
}

/// Downloads `url` into `sink` (a file, for release archives), hashing while streaming.
/// Returns the digest and the URL that finally answered.
pub fn download_to(
    url: &str,
    opts: &HttpOptions,
    progress: Option<ProgressFn<'_>>,
    sink: &mut dyn std::io::Write,
) -> Result<(Sha256, String)> {
    fetch_into(url, opts, None, progress, sink)
}

fn fetch_into(
    url: &str,
    opts: &HttpOptions,
    accept: Option<&str>,
    mut progress: Option<ProgressFn<'_>>,
    sink: &mut dyn std::io::Write,
) -> Result<(Sha256, String)> {
    check_url(url)?;
    let mut agents = Agents::new(opts);
    let mut current = url.to_owned();
    let mut hops = 0u32;
    loop {
        let http_err = |u: &str, e: &dyn std::fmt::Display| ProvenanceError::Http {
            url: u.to_owned(),
            reason: e.to_string(),
        };
        let mut request = agents.get(&current).get(&current);
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        let response = request
            .call()
            .map_err(|e| http_err(&current, &describe(&e, opts)))?;
        let status = response.status().as_u16();
        if (300..400).contains(&status) {
            let location = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| http_err(&current, &"redirect without a Location header"))?;
            hops += 1;
            if hops > opts.max_redirects {
                return Err(ProvenanceError::Redirects {
                    url: url.to_owned(),
                    limit: opts.max_redirects,
                });
            }
            let next = resolve_location(&current, location);
            check_url(&next)?;
            current = next;
            continue;
        }
        if status != 200 {
            return Err(ProvenanceError::http_status(current, status));
        }
        let total = response.body().content_length();
        if total.is_some_and(|t| t > opts.max_bytes) {
            return Err(ProvenanceError::TooLarge {
                url: current,
                limit: opts.max_bytes,
            });
        }
        let mut reader = response.into_body().into_reader();
        let mut progress = progress.as_mut();
        let counter = receive(&mut reader, sink, |received| {
            if received > opts.max_bytes {
                return Err(ProvenanceError::TooLarge {
                    url: current.clone(),
                    limit: opts.max_bytes,
                });
            }
            if let Some(cb) = progress.as_mut() {
                cb(Progress { received, total });
            }
            Ok(())
        })
        .map_err(|e| match e {
            Received::Read(e) => http_err(&current, &describe(&ureq::Error::from(e), opts)),
            Received::Write(source) => ProvenanceError::Io {
                action: "save the download of",
                path: current.clone(),
                source,
            },
            Received::Stopped(e) => e,
        })?;
        if total.is_some_and(|t| t != counter.bytes) {
            return Err(http_err(
                &current,
                &"the response ended before the announced length",
            ));
        }
        return Ok((counter.finish(), current));
    }
}

/// Bytes read per chunk of a body, and how many chunks may wait for the hasher.
const CHUNK: usize = 64 * 1024;
const WAITING: usize = 4;

/// Why [`receive`] stopped early.
enum Received {
    Read(std::io::Error),
    Write(std::io::Error),
    Stopped(ProvenanceError),
}

/// Copies `body` into `sink` and returns the body's hash and length, calling `after` with
/// the running byte count as each chunk arrives, before it is saved (its error stops the
/// copy: the size cap).
///
/// The hash runs on a helper thread fed the saved chunks in order, so it overlaps the
/// receiving and saving of the next ones: SHA-256 is the slowest of the three (about half
/// of a 16 MB archive's download from loopback). Without the thread (it could not be
/// started), the chunks are hashed here.
fn receive(
    body: &mut dyn Read,
    sink: &mut dyn std::io::Write,
    mut after: impl FnMut(u64) -> Result<()>,
) -> std::result::Result<Counter, Received> {
    std::thread::scope(|scope| {
        let (to_hasher, chunks) = std::sync::mpsc::sync_channel::<(Vec<u8>, usize)>(WAITING);
        let (give_back, returned) = std::sync::mpsc::channel::<Vec<u8>>();
        let hasher = std::thread::Builder::new()
            .name("aibox-hash".to_owned())
            .spawn_scoped(scope, move || {
                let mut counter = Counter::default();
                for (chunk, n) in chunks {
                    counter.update(&chunk[..n]);
                    // The receiver is gone only once the copy stopped: nothing to reuse.
                    let _ = give_back.send(chunk);
                }
                counter
            })
            .ok();
        let mut here = Counter::default();
        let to_hasher = hasher.is_some().then_some(to_hasher);
        let mut received = 0u64;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = body.read(&mut buf).map_err(Received::Read)?;
            if n == 0 {
                break;
            }
            received += n as u64;
            after(received).map_err(Received::Stopped)?;
            sink.write_all(&buf[..n]).map_err(Received::Write)?;
            match &to_hasher {
                Some(tx) => {
                    let next = returned.try_recv().unwrap_or_else(|_| vec![0u8; CHUNK]);
                    // Refused only by a hasher that died: its join below is the error.
                    if tx.send((std::mem::replace(&mut buf, next), n)).is_err() {
                        break;
                    }
                }
                None => here.update(&buf[..n]),
            }
        }
        drop(to_hasher);
        match hasher {
            None => Ok(here),
            Some(h) => h.join().map_err(|_| {
                Received::Read(std::io::Error::other("the download's hashing thread died"))
            }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_policy() {
        for ok in [
            "https://example.invalid/x",
            "http://127.0.0.1:8080/x",
            "http://localhost/x",
            "http://[::1]:9/x",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://example.invalid/x",
            "ftp://x/y",
            "file:///etc/passwd",
            "http://127.evil.invalid@10.0.0.1/",
            "http://127.0.0.1.evil.invalid/",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resolves_locations() {
        assert_eq!(resolve_location("http://h:1/a/b", "/c"), "http://h:1/c");
        assert_eq!(resolve_location("http://h:1/a/b", "c"), "http://h:1/a/c");
        assert_eq!(
            resolve_location("http://h:1/a/b", "https://x/y"),
            "https://x/y"
        );
    }
}
