//! A real OCI registry on loopback for tests: Debian's `docker-registry` (the
//! `docker-registry` apt package, installed by `scripts/setup-test-deps.sh`) serving a
//! temporary folder, plus a push of a tiny image through the distribution API, so a
//! tag exists without a container engine.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::Digest as _;

/// The OCI manifest media type of the pushed images.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// A running `docker-registry`; killed when dropped.
pub struct LoopbackRegistry {
    child: Child,
    _dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub address: String,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into()
}

fn header<'a>(r: &'a ureq::http::Response<ureq::Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

impl LoopbackRegistry {
    /// Starts the registry on a free loopback port and waits until `/v2/` answers.
    pub fn start() -> Result<Self, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let address = format!("127.0.0.1:{port}");
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let config = dir.path().join("config.yml");
        fs_err::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
                dir.path().join("data").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot start docker-registry ({e}); run scripts/setup-test-deps.sh")
            })?;
        let mut reg = Self {
            child,
            _dir: dir,
            address,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while agent()
            .get(&format!("http://{}/v2/", reg.address))
            .call()
            .is_err()
        {
            if let Ok(Some(status)) = reg.child.try_wait() {
                return Err(format!("docker-registry exited ({status})"));
            }
            if Instant::now() > deadline {
                return Err("docker-registry did not answer within 30 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(reg)
    }

    /// Pushes a one-layer image whose layer holds `content` as `repo:tag` (moving the tag
    /// when it exists) and returns the manifest digest the registry reports.
    pub fn push(&self, repo: &str, tag: &str, content: &str) -> Result<String, String> {
        let layer = content.as_bytes().to_vec();
        let config = format!(
            r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":["{}"]}}}}"#,
            sha256(&layer)
        )
        .into_bytes();
        for blob in [&layer, &config] {
            // Two steps (start an upload, then PUT its bytes): the monolithic POST is not
            // in every registry version.
            let r = agent()
                .post(&format!("http://{}/v2/{repo}/blobs/uploads/", self.address))
                .send_empty()
                .map_err(|e| e.to_string())?;
            let location = header(&r, "location")
                .ok_or_else(|| format!("upload start answered {} without Location", r.status()))?;
            let location = if location.starts_with('/') {
                format!("http://{}{location}", self.address)
            } else {
                location.to_owned()
            };
            let sep = if location.contains('?') { '&' } else { '?' };
            let r = agent()
                .put(&format!("{location}{sep}digest={}", sha256(blob)))
                .header("Content-Type", "application/octet-stream")
                .send(&blob[..])
                .map_err(|e| e.to_string())?;
            if r.status().as_u16() != 201 {
                return Err(format!("blob upload answered {}", r.status()));
            }
        }
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{}","size":{}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{}","size":{}}}]}}"#,
            sha256(&config),
            config.len(),
            sha256(&layer),
            layer.len()
        );
        let r = agent()
            .put(&format!(
                "http://{}/v2/{repo}/manifests/{tag}",
                self.address
            ))
            .header("Content-Type", OCI_MANIFEST)
            .send(manifest.as_bytes())
            .map_err(|e| e.to_string())?;
        if r.status().as_u16() != 201 {
            return Err(format!("manifest upload answered {}", r.status()));
        }
        Ok(sha256(manifest.as_bytes()))
    }

    /// What the registry serves for `repo:tag` on `GET`: its `Docker-Content-Digest` and
    /// the SHA-256 of the body.
    pub fn served_digest(&self, repo: &str, tag: &str) -> Result<(String, String), String> {
        let r = agent()
            .get(&format!(
                "http://{}/v2/{repo}/manifests/{tag}",
                self.address
            ))
            .header("Accept", OCI_MANIFEST)
            .call()
            .map_err(|e| e.to_string())?;
        let digest = header(&r, "docker-content-digest")
            .unwrap_or_default()
            .to_owned();
        let body = r.into_body().read_to_vec().map_err(|e| e.to_string())?;
        Ok((digest, sha256(&body)))
    }

    /// Stops the registry (its port is then closed).
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for LoopbackRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
