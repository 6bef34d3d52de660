//! Test helpers: a bounded loopback HTTP server with fault injection, plus (in
//! [`release`]) a generator of realistic synthetic processkit releases and hostile
//! archives.
//!
//! The server listens on `127.0.0.1:0`, serves one connection at a time on one thread
//! (`Connection: close`), and records every request path so tests can assert that
//! nothing was fetched. Faults: any status, redirects (loops included), slow responses
//! and truncated bodies.

pub mod release;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// One route's behaviour.
#[derive(Debug, Clone, Default)]
pub struct Route {
    /// Status code (200 when zero).
    pub status: u16,
    /// Body bytes.
    pub body: Vec<u8>,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Wait this long before answering (a slow server).
    pub delay: Duration,
    /// Announce the full length but send only this many body bytes, then close.
    pub truncate_at: Option<usize>,
    /// Send no `Content-Length`: the body ends when the connection closes.
    pub unannounced: bool,
    /// Served instead when the request's `Authorization` header is exactly this value.
    pub authorized: Option<(String, Box<Route>)>,
}

impl Route {
    /// 200 with a body.
    pub fn ok(body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            body: body.into(),
            ..Self::default()
        }
    }
    /// An error status with a short text body.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            body: format!("status {status}\n").into_bytes(),
            ..Self::default()
        }
    }
    /// A 302 redirect to `location` (absolute URL or absolute path).
    pub fn redirect(location: &str) -> Self {
        Self {
            status: 302,
            headers: vec![("Location".into(), location.into())],
            ..Self::default()
        }
    }
    /// Delays the answer.
    #[must_use]
    pub fn slow(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
    /// Serves `route` instead to requests whose `Authorization` header is `authorization`
    /// (a registry's 401-then-token flow).
    #[must_use]
    pub fn when_authorized(mut self, authorization: &str, route: Route) -> Self {
        self.authorized = Some((authorization.to_owned(), Box::new(route)));
        self
    }
    /// Sends the body without announcing its length (it ends when the connection closes),
    /// so a client's size cap must hold while it streams.
    #[must_use]
    pub fn unannounced(mut self) -> Self {
        self.unannounced = true;
        self
    }
    /// Truncates the body after `n` bytes while announcing the full length.
    #[must_use]
    pub fn truncated(mut self, n: usize) -> Self {
        self.truncate_at = Some(n);
        self
    }
}

type Routes = Arc<Mutex<HashMap<String, Route>>>;

/// A loopback HTTP/1.1 server for tests; stops when dropped.
pub struct Server {
    addr: SocketAddr,
    /// The private CA's certificate (PEM) of an HTTPS server.
    ca_pem: Option<String>,
    routes: Routes,
    hits: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts a server on `127.0.0.1:0`.
    pub fn start() -> std::io::Result<Self> {
        Self::listen(None)
    }

    /// Starts an HTTPS server on `127.0.0.1:0` whose certificate (for `localhost` and
    /// `127.0.0.1`) is signed by a CA generated here, trusted by no system: a client
    /// reaches it only by trusting [`Server::ca_pem`].
    pub fn start_tls() -> std::io::Result<Self> {
        let (tls, ca_pem) = private_ca_tls().map_err(std::io::Error::other)?;
        let mut server = Self::listen(Some(Arc::new(tls)))?;
        server.ca_pem = Some(ca_pem);
        Ok(server)
    }

    /// The PEM certificate of the CA an HTTPS server's certificate is signed by.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    fn listen(tls: Option<Arc<rustls::ServerConfig>>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let routes: Routes = Arc::default();
        let hits: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (routes, hits, stop) = (routes.clone(), hits.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(mut stream) = stream else { continue };
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
                    match &tls {
                        None => serve(&mut stream, &routes, &hits),
                        Some(config) => {
                            let Ok(conn) = rustls::ServerConnection::new(Arc::clone(config)) else {
                                continue;
                            };
                            let mut tls = rustls::StreamOwned::new(conn, stream);
                            serve(&mut tls, &routes, &hits);
                            tls.conn.send_close_notify();
                            let _ = tls.flush();
                            stream = tls.sock;
                        }
                    }
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                }
            })
        };
        Ok(Self {
            addr,
            ca_pem: None,
            routes,
            hits,
            stop,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:<port>` + `path` (`https://` for an HTTPS server).
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// Sets the route for an exact path.
    pub fn route(&self, path: &str, route: Route) {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.to_owned(), route);
    }

    /// Every requested path, in order.
    pub fn hits(&self) -> Vec<String> {
        self.hits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How often `path` was requested.
    pub fn hit_count(&self, path: &str) -> usize {
        self.hits().iter().filter(|h| *h == path).count()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A real CA certificate (PEM) made for tests, the same for the whole test process: what
/// a `container.extra_ca_certificates` file holds (aibox refuses one whose blocks are not
/// certificates).
#[allow(clippy::expect_used)] // a test helper: failing to make a certificate fails the test
pub fn test_ca_pem() -> &'static str {
    static PEM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PEM.get_or_init(|| {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "aibox test proxy CA");
        let key = rcgen::KeyPair::generate().expect("a key pair");
        ca.self_signed(&key).expect("a self-signed CA").pem()
    })
}

/// A CA made for this server and a server configuration whose certificate it signed;
/// the CA's certificate as PEM.
fn private_ca_tls()
-> Result<(rustls::ServerConfig, String), Box<dyn std::error::Error + Send + Sync>> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name
        .push(DnType::CommonName, "aibox test inspecting proxy CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?
        .signed_by(&key, &ca)?;
    let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())?;
    // ring: the provider this workspace builds rustls with (ureq's default too). rustls
    // 0.23.48 deprecates it for its lack of post-quantum key exchange, which a loopback
    // test server does not need.
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key)?;
    Ok((config, ca.pem()))
}

fn serve(stream: &mut (impl Read + std::io::Write), routes: &Routes, hits: &Mutex<Vec<String>>) {
    // Read the request head, bounded to 16 KiB.
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buf) {
            // Linux does not restart a socket read that has a timeout when a signal
            // reaches this thread, even one ignored by default: another test's child
            // exiting (SIGCHLD) made the request look refused ("Peer disconnected").
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
    hits.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(path.clone());
    // An exact path first, then the path without its query (token endpoints).
    let route = {
        let routes = routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes
            .get(&path)
            .or_else(|| routes.get(path.split('?').next().unwrap_or_default()))
            .cloned()
            .unwrap_or_else(|| Route::status(404))
    };
    let auth = text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("authorization")
            .then(|| v.trim().to_owned())
    });
    let route = match route.authorized {
        Some((want, inner)) if auth.as_deref() == Some(want.as_str()) => *inner,
        _ => route,
    };
    std::thread::sleep(route.delay);
    let status = if route.status == 0 { 200 } else { route.status };
    let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
    if !route.unannounced {
        let _ = write!(out, "Content-Length: {}\r\n", route.body.len());
    }
    for (k, v) in &route.headers {
        let _ = write!(out, "{k}: {v}\r\n");
    }
    out.push_str("\r\n");
    let body = &route.body[..route
        .truncate_at
        .unwrap_or(route.body.len())
        .min(route.body.len())];
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(server: &Server, path: &str) -> Vec<u8> {
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    }

    #[test]
    fn serves_routes_and_faults_and_records_hits() {
        let server = Server::start().unwrap();
        server.route("/ok", Route::ok("hello"));
        server.route("/moved", Route::redirect("/ok"));
        server.route("/cut", Route::ok("0123456789").truncated(3));
        server.route("/open", Route::ok("until closed").unannounced());
        let ok = String::from_utf8(get(&server, "/ok")).unwrap();
        assert!(
            ok.starts_with("HTTP/1.1 200") && ok.ends_with("\r\n\r\nhello"),
            "{ok}"
        );
        let missing = String::from_utf8(get(&server, "/nope")).unwrap();
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let moved = String::from_utf8(get(&server, "/moved")).unwrap();
        assert!(moved.starts_with("HTTP/1.1 302") && moved.contains("Location: /ok\r\n"));
        let cut = String::from_utf8(get(&server, "/cut")).unwrap();
        assert!(
            cut.contains("Content-Length: 10\r\n") && cut.ends_with("\r\n\r\n012"),
            "{cut}"
        );
        let open = String::from_utf8(get(&server, "/open")).unwrap();
        assert!(
            !open.contains("Content-Length") && open.ends_with("\r\n\r\nuntil closed"),
            "{open}"
        );
        assert_eq!(server.hits(), ["/ok", "/nope", "/moved", "/cut", "/open"]);
        assert_eq!(server.hit_count("/ok"), 1);
    }

    #[test]
    fn slow_routes_wait_before_answering() {
        let server = Server::start().unwrap();
        server.route("/slow", Route::ok("late").slow(Duration::from_millis(300)));
        let start = std::time::Instant::now();
        let body = get(&server, "/slow");
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert!(body.ends_with(b"late"));
    }
}
