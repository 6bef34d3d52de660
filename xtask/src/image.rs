//! `cargo xtask image build|publish|verify|release`: aibox's base image.
//!
//! - `build`: per architecture (amd64, arm64), a Debian root file system made by
//!   `debootstrap` (foreign architectures run through Debian's `qemu-user-static` and
//!   `binfmt_misc`, mounted here when missing), imported with `podman import`, then
//!   `images/base/Containerfile` on top: the catalog's checked tool downloads, the
//!   non-root user, `/etc/aibox-version` and the OCI labels. The architectures are joined
//!   in one manifest list. Only release-specific tags (`X.Y.Z-bookworm`), never `latest`.
//! - `publish`: pushes the manifest list and every image to a registry.
//! - `verify`: reads the manifest list back from the registry, pulls every architecture
//!   by digest, checks labels, marker and the tools, and (for the host architecture)
//!   runs the downstream smoke: `aibox up` of a generated project on the pulled image,
//!   then `aibox exec` of python3, uv and git.
//! - `release`: all three against Debian's `docker-registry` started on loopback, then
//!   `image-evidence.json` under the output folder. [`release`] is what the release gate
//!   calls.
//!
//! The build machine reaches the Debian mirror and `PyPI` through a TLS-inspecting proxy:
//! its CA bundle is bind-mounted over the image's bundle for the `RUN` steps only, so it
//! never lands in a layer.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use aibox_test_support::podman::{HOST_CA_BUNDLE, local_toml_with_host_ca};

use crate::say;

/// The recipe folder.
const RECIPE_DIR: &str = "images/base";
/// The committed data file naming the default base image (name, tag, digest).
pub(crate) const DATA_FILE: &str = "crates/aibox-config/data/base-image.toml";
/// Media types of a manifest list.
const LIST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
                           application/vnd.docker.distribution.manifest.list.v2+json";

/// What `images/base/recipe.toml` picks.
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    pub(crate) suite: String,
    pub(crate) mirror: String,
    architectures: Vec<String>,
    pub(crate) tools: Vec<String>,
    user: String,
    uid: u32,
    profile: String,
}

/// Everything a build, publication and verification need to agree on.
#[derive(Debug, Clone)]
pub(crate) struct Release {
    /// The aibox version (`X.Y.Z`, from the tag `vX.Y.Z`).
    pub version: String,
    /// The image tag: `X.Y.Z-<suite>`.
    pub tag: String,
    /// Published name from the data file, such as `ghcr.io/projectious-work/aibox-base`.
    pub name: String,
    /// Local name of the built images and the manifest list.
    pub local_name: String,
    /// Architectures to build (Debian names).
    pub arches: Vec<String>,
    /// `org.opencontainers.image.source`: the workspace manifest's `repository`.
    pub source: String,
    /// `org.opencontainers.image.revision`: the commit.
    pub revision: String,
    recipe: Recipe,
}

/// Label name and value pairs.
type Labels = Vec<(String, String)>;

/// Per-architecture result of a verification.
#[derive(Debug, Clone)]
pub struct ArchEvidence {
    /// Debian architecture.
    pub arch: String,
    /// Digest of the architecture's image manifest in the registry.
    pub digest: String,
    /// Seconds the build of this architecture took (0 when not built in this run).
    pub build_secs: f64,
    /// `python3 --version`, `uv --version`, `git --version` run in the pulled image.
    pub tools: Vec<String>,
    /// Whether the downstream `aibox up` smoke ran on this architecture.
    pub smoke: bool,
}

/// What [`release`] proved, written as `image-evidence.json`.
#[derive(Debug, Clone)]
pub struct ImageEvidence {
    /// The registry the image was published to (loopback).
    pub registry: String,
    /// Repository path in that registry.
    pub repository: String,
    /// The release tag of the image.
    pub tag: String,
    /// Digest of the manifest list.
    pub manifest_digest: String,
    /// The reference the committed data file names.
    pub committed_reference: String,
    /// Per architecture.
    pub arches: Vec<ArchEvidence>,
    /// The checked labels (the same on every architecture).
    pub labels: Vec<(String, String)>,
    /// Path of the written evidence file.
    pub file: PathBuf,
}

impl ImageEvidence {
    /// The evidence as JSON (the gate's `images` entry and `image-evidence.json`).
    pub fn json(&self) -> Value {
        json!({
            "registry": self.registry,
            "repository": self.repository,
            "tag": self.tag,
            "manifest_digest": self.manifest_digest,
            "reference": format!("{}/{}:{}@{}", self.registry, self.repository, self.tag, self.manifest_digest),
            "committed_reference": self.committed_reference,
            "committed_digest_matches": self.committed_reference.ends_with(&format!("@{}", self.manifest_digest)),
            "labels": self.labels.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "architectures": self.arches.iter().map(|a| json!({
                "arch": a.arch,
                "digest": a.digest,
                "build_seconds": (a.build_secs * 10.0).round() / 10.0,
                "tools": a.tools,
                "aibox_up_smoke": a.smoke,
            })).collect::<Vec<_>>(),
            "not_proven": [
                "publication to the public registry named in the data file (only a loopback docker-registry is reachable here)",
                "reproducible image bytes: a rebuild gives new digests (timestamps in debootstrap and layers)",
                "the aibox up smoke on architectures other than the host's (their tools run under qemu)",
            ],
        })
    }
}

/// `cargo xtask image ...`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let sub = args.first().map_or("", String::as_str);
    let opt = |name: &str| -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if sub == "state" {
        for line in state_lines()? {
            say(&line);
        }
        return Ok(());
    }
    let tag = opt("--tag").ok_or("--tag vX.Y.Z is required")?;
    let mut release = Release::new(&tag)?;
    if let Some(list) = opt("--arch") {
        release.arches = list.split(',').map(str::to_owned).collect();
    }
    let out_dir = PathBuf::from(opt("--out").unwrap_or_else(|| "target/image".to_owned()));
    match sub {
        "build" => build(&release).map(|_| ()),
        "publish" | "verify" => {
            let registry = opt("--registry").ok_or("--registry HOST:PORT is required")?;
            let conf = RegistriesConf::write(&out_dir, &registry)?;
            if sub == "publish" {
                let digest = publish(&release, &registry, &conf)?;
                say(&format!(
                    "published {} ({digest})",
                    release.remote(&registry)
                ));
                Ok(())
            } else {
                let ev = verify(&release, &registry, &conf, &[], true, &out_dir)?;
                say(&format!("verified; evidence in {}", ev.file.display()));
                Ok(())
            }
        }
        "release" => {
            let skip_build = args.iter().any(|a| a == "--skip-build");
            let ev = if opt("--arch").is_some() || skip_build {
                run_release(&release, &out_dir, skip_build)?
            } else {
                self::release(&tag, &out_dir)?
            };
            say(&format!(
                "image release done; evidence in {}",
                ev.file.display()
            ));
            Ok(())
        }
        _ => Err(
            "usage: cargo xtask image <build|publish|verify|release|state> --tag vX.Y.Z \
                  [--arch amd64,arm64] [--registry HOST:PORT] [--out DIR] [--skip-build]"
                .to_owned(),
        ),
    }
}

/// The base image's rows for `cargo xtask release-state`: the committed default reference
/// (pinned when it carries a digest) and the recipe's floating input (the Debian suite's
/// packages at build time). Also printed by `cargo xtask image state`.
pub fn state_lines() -> Result<Vec<String>, String> {
    let data = read_toml(&root().join(DATA_FILE))?;
    let BaseImageRef { name, tag, digest } = BaseImageRef::from_table(&data, "aibox")?;
    let default = BaseImageRef::from_table(&data, "default")?;
    let recipe = Recipe::load()?;
    let source = |k: &str| str_key(&data["default"], k, DATA_FILE);
    let mut lines = vec![
        format!(
            "pinned: default base image {}:{}@{} ({DATA_FILE}; digest from {}, pinned on {})",
            default.name,
            default.tag,
            default.digest.as_deref().unwrap_or("(none)"),
            source("digest_source")?,
            source("pinned_on")?,
        ),
        match digest {
            Some(d) => format!(
                "pinned: aibox's own base image {name}:{tag}@{d} ({DATA_FILE}; not published \
                 to a public registry, see docs-site/src/base-image.md)"
            ),
            None => {
                format!("floating: aibox's own base image {name}:{tag} has no digest ({DATA_FILE})")
            }
        },
    ];
    lines.push(format!(
        "floating: the base image recipe installs catalog tools {}; their Debian {} packages \
         come from {} as of the build (signed apt repository, versions not pinned); downloads \
         are pinned by the catalog",
        recipe.tools.join(", "),
        recipe.suite,
        recipe.mirror
    ));
    Ok(lines)
}

/// The release gate's entry: builds amd64 and arm64, publishes them to a loopback
/// `docker-registry`, verifies by pull (labels, marker, tools, `aibox up` smoke) and writes
/// `image-evidence.json` into `out_dir`.
pub fn release(tag: &str, out_dir: &Path) -> Result<ImageEvidence, String> {
    run_release(&Release::new(tag)?, out_dir, false)
}

/// `skip_build` publishes the images an earlier `build` left (a maintainer re-running the
/// publication and verification).
fn run_release(
    release: &Release,
    out_dir: &Path,
    skip_build: bool,
) -> Result<ImageEvidence, String> {
    fs_err::create_dir_all(out_dir).map_err(|e| e.to_string())?;
    let times = if skip_build {
        make_list(release)?;
        Vec::new()
    } else {
        build(release)?
    };
    let registry = LoopbackRegistry::start(out_dir)?;
    let conf = RegistriesConf::write(out_dir, &registry.address)?;
    publish(release, &registry.address, &conf)?;
    let evidence = verify(release, &registry.address, &conf, &times, true, out_dir)?;
    // The registry's storage is only a stand-in for the public one; the evidence stays.
    drop(registry);
    let _ = fs_err::remove_dir_all(out_dir.join("registry"));
    Ok(evidence)
}

impl Release {
    /// The release for tag `vX.Y.Z`, with the recipe, the data file and the workspace's
    /// repository and commit.
    pub(crate) fn new(tag: &str) -> Result<Self, String> {
        let version = tag
            .strip_prefix('v')
            .filter(|v| {
                !v.is_empty()
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".-+_".contains(c))
            })
            .ok_or_else(|| format!("release tag `{tag}` is not of the form vX.Y.Z"))?
            .to_owned();
        let recipe = Recipe::load()?;
        let name = BaseImageRef::read(&root())?.name;
        let manifest = read_toml(&root().join("Cargo.toml"))?;
        let source = manifest
            .get("workspace")
            .and_then(|w| w.get("package"))
            .and_then(|p| p.get("repository"))
            .and_then(toml::Value::as_str)
            .ok_or("Cargo.toml has no [workspace.package] repository")?
            .to_owned();
        let revision = capture(
            Command::new("git")
                .current_dir(root())
                .args(["rev-parse", "HEAD"]),
        )?
        .trim()
        .to_owned();
        Ok(Self {
            tag: format!("{version}-{}", recipe.suite),
            version,
            local_name: "localhost/aibox-base".to_owned(),
            arches: recipe.architectures.clone(),
            name,
            source,
            revision,
            recipe,
        })
    }

    /// Repository path inside a registry: the published name without its registry host.
    fn repository(&self) -> &str {
        self.name.split_once('/').map_or(&*self.name, |(_, r)| r)
    }

    fn remote(&self, registry: &str) -> String {
        format!("{registry}/{}:{}", self.repository(), self.tag)
    }

    fn local_list(&self) -> String {
        format!("{}:{}", self.local_name, self.tag)
    }

    fn local_arch(&self, arch: &str) -> String {
        format!("{}:{}-{arch}", self.local_name, self.tag)
    }

    /// The labels every architecture carries.
    pub(crate) fn labels(&self, created: &str) -> Vec<(String, String)> {
        vec![
            (
                "org.opencontainers.image.source".into(),
                self.source.clone(),
            ),
            (
                "org.opencontainers.image.revision".into(),
                self.revision.clone(),
            ),
            (
                "org.opencontainers.image.version".into(),
                self.version.clone(),
            ),
            (
                "org.opencontainers.image.created".into(),
                created.to_owned(),
            ),
            ("org.opencontainers.image.title".into(), "aibox-base".into()),
            ("aibox.version".into(), self.version.clone()),
            ("aibox.profile".into(), self.recipe.profile.clone()),
        ]
    }
}

/// The recipe file, below the repository root.
pub(crate) const RECIPE_FILE: &str = "images/base/recipe.toml";

/// One table of [`DATA_FILE`]: `[aibox]` is aibox's own base image, the one this module
/// builds and publishes; `[default]` is the default of generated Dockerfiles.
pub(crate) struct BaseImageRef {
    pub(crate) name: String,
    pub(crate) tag: String,
    pub(crate) digest: Option<String>,
}

impl BaseImageRef {
    /// Reads the `[aibox]` table of [`DATA_FILE`] below `root`.
    pub(crate) fn read(root: &Path) -> Result<Self, String> {
        Self::from_table(&read_toml(&root.join(DATA_FILE))?, "aibox")
    }

    /// The table `table` of the parsed [`DATA_FILE`].
    fn from_table(data: &toml::Value, table: &str) -> Result<Self, String> {
        let data = data
            .get(table)
            .filter(|t| t.is_table())
            .ok_or_else(|| format!("{DATA_FILE}: no [{table}] table"))?;
        Ok(Self {
            name: str_key(data, "name", DATA_FILE)?,
            tag: str_key(data, "tag", DATA_FILE)?,
            digest: data
                .get("digest")
                .and_then(toml::Value::as_str)
                .map(str::to_owned),
        })
    }
}

impl Recipe {
    fn load() -> Result<Self, String> {
        Self::load_from(&root())
    }

    /// Reads [`RECIPE_FILE`] below `root`.
    pub(crate) fn load_from(root: &Path) -> Result<Self, String> {
        let path = root.join(RECIPE_FILE);
        let v = read_toml(&path)?;
        let where_ = path.display().to_string();
        let list = |key: &str| -> Result<Vec<String>, String> {
            v.get(key)
                .and_then(toml::Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
                .ok_or_else(|| format!("{where_}: `{key}` must be a list of strings"))
        };
        Ok(Self {
            suite: str_key(&v, "suite", &where_)?,
            mirror: str_key(&v, "mirror", &where_)?,
            architectures: list("architectures")?,
            tools: list("tools")?,
            user: str_key(&v, "user", &where_)?,
            uid: v
                .get("uid")
                .and_then(toml::Value::as_integer)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{where_}: `uid` must be a number"))?,
            profile: str_key(&v, "profile", &where_)?,
        })
    }
}

/// Builds every architecture and the manifest list; returns the build time per arch.
pub(crate) fn build(release: &Release) -> Result<Vec<(String, f64)>, String> {
    let catalog = aibox_devcontainer::catalog::Catalog::builtin().map_err(|e| e.to_string())?;
    let tools = catalog.resolve(
        &release
            .recipe
            .tools
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )?;
    let apt: Vec<&str> = tools
        .iter()
        .flat_map(|t| t.apt.iter().map(String::as_str))
        .collect();
    let template = fs_err::read_to_string(root().join(RECIPE_DIR).join("Containerfile"))
        .map_err(|e| e.to_string())?;
    let containerfile = template.replace(
        "@CATALOG_DOWNLOADS@",
        aibox_devcontainer::tools::render_downloads(&tools).trim_end(),
    );
    // One folder per local name and tag, so a test build and a release build never share.
    let work = root().join("target/aibox-image").join(format!(
        "{}-{}",
        release.local_name.replace(['/', ':'], "_"),
        release.tag
    ));
    fs_err::create_dir_all(&work).map_err(|e| e.to_string())?;
    let context = work.join("context");
    fs_err::create_dir_all(&context).map_err(|e| e.to_string())?;
    fs_err::write(context.join("Containerfile"), containerfile).map_err(|e| e.to_string())?;
    let created = capture(Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%SZ"]))?
        .trim()
        .to_owned();
    let mut times = Vec::new();
    for arch in &release.arches {
        let started = Instant::now();
        say(&format!(
            "==> image {arch}: debootstrap {}",
            release.recipe.suite
        ));
        if arch != host_arch()? {
            ensure_binfmt(arch)?;
        }
        let rootfs = work.join(format!("rootfs-{arch}"));
        clear_rootfs(&rootfs)?;
        let include = format!("--include={}", apt.join(","));
        checked(
            Command::new("timeout")
                .args(["1800", "debootstrap", "--variant=minbase"])
                .arg(format!("--arch={arch}"))
                .arg(&include)
                .arg(&release.recipe.suite)
                .arg(&rootfs)
                .arg(&release.recipe.mirror),
            "debootstrap (needs root, debootstrap, and qemu-user-static for foreign arches)",
        )?;
        trim_rootfs(&rootfs)?;
        let rootfs_image = format!("{}-rootfs:{}-{arch}", release.local_name, release.tag);
        import(&rootfs, arch, &rootfs_image)?;
        clear_rootfs(&rootfs)?;
        say(&format!("==> image {arch}: podman build"));
        let mut cmd = podman();
        cmd.args(["build", "--pull=never", "--no-cache"])
            .arg(format!("--platform=linux/{arch}"))
            .arg(format!("--volume={HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro"))
            .arg(format!("--build-arg=ROOTFS={rootfs_image}"))
            .arg(format!("--build-arg=AIBOX_USER={}", release.recipe.user))
            .arg(format!("--build-arg=AIBOX_UID={}", release.recipe.uid))
            .arg(format!("--build-arg=AIBOX_VERSION={}", release.version));
        for (k, v) in release.labels(&created) {
            cmd.arg(format!("--label={k}={v}"));
        }
        cmd.arg(format!("--tag={}", release.local_arch(arch)))
            .arg("--file")
            .arg(context.join("Containerfile"))
            .arg(&context);
        checked(&mut cmd, "podman build of the base image")?;
        let _ = podman().args(["rmi", &rootfs_image]).output();
        let secs = started.elapsed().as_secs_f64();
        say(&format!("<== image {arch}: {secs:.0}s"));
        times.push((arch.clone(), secs));
    }
    make_list(release)?;
    Ok(times)
}

/// (Re)creates the local manifest list from the per-architecture images.
fn make_list(release: &Release) -> Result<(), String> {
    let list = release.local_list();
    let _ = podman().args(["manifest", "rm", &list]).output();
    let _ = podman().args(["rmi", "-f", &list]).output();
    checked(
        podman().args(["manifest", "create", &list]),
        "podman manifest create",
    )?;
    for arch in &release.arches {
        checked(
            podman().args([
                "manifest",
                "add",
                &list,
                &format!("containers-storage:{}", release.local_arch(arch)),
            ]),
            "podman manifest add",
        )?;
    }
    Ok(())
}

/// Removes a root file system left by an earlier run; an interrupted debootstrap may have
/// left the host's `/proc` or `/sys` mounted inside it, so those are unmounted first.
fn clear_rootfs(rootfs: &Path) -> Result<(), String> {
    if !rootfs.exists() {
        return Ok(());
    }
    for mount in ["dev/pts", "proc", "sys"] {
        let _ = Command::new("umount")
            .arg("--lazy")
            .arg(rootfs.join(mount))
            .output();
    }
    fs_err::remove_dir_all(rootfs).map_err(|e| e.to_string())
}

/// Removes what debootstrap leaves behind but the image does not need (the downloaded
/// packages and apt's lists) before the import: a later `RUN rm` could not shrink the
/// imported layer.
fn trim_rootfs(rootfs: &Path) -> Result<(), String> {
    for dir in ["var/cache/apt/archives", "var/lib/apt/lists"] {
        let dir = rootfs.join(dir);
        let Ok(entries) = fs_err::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_file() && path.file_name().is_some_and(|n| n != "lock") {
                fs_err::remove_file(&path).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

fn import(rootfs: &Path, arch: &str, image: &str) -> Result<(), String> {
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(rootfs)
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    let stdin = tar.stdout.take().ok_or("tar has no stdout")?;
    let out = podman()
        .args(["import", "--arch", arch, "-", image])
        .stdin(stdin)
        .output()
        .map_err(|e| format!("cannot run podman import: {e}"))?;
    let status = tar.wait().map_err(|e| e.to_string())?;
    if status.success() && out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "importing {image} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Pushes the manifest list (and with it every architecture) to `registry`; returns the
/// list's digest.
pub(crate) fn publish(
    release: &Release,
    registry: &str,
    conf: &RegistriesConf,
) -> Result<String, String> {
    if release.tag == "latest" || release.tag.is_empty() {
        return Err("only release-specific tags are published".to_owned());
    }
    let digest_file = conf.dir.join("manifest.digest");
    checked(
        conf.podman()
            .args(["manifest", "push", "--all", "--digestfile"])
            .arg(&digest_file)
            .arg(release.local_list())
            .arg(format!("docker://{}", release.remote(registry))),
        "podman manifest push",
    )?;
    let digest = fs_err::read_to_string(&digest_file).map_err(|e| e.to_string())?;
    Ok(digest.trim().to_owned())
}

/// Verifies what `registry` serves under the release tag; writes `image-evidence.json`
/// into `out_dir`. `smoke` runs `aibox up` on the host architecture.
pub(crate) fn verify(
    release: &Release,
    registry: &str,
    conf: &RegistriesConf,
    times: &[(String, f64)],
    smoke: bool,
    out_dir: &Path,
) -> Result<ImageEvidence, String> {
    let repo = release.repository();
    let tags = http_get(&format!("http://{registry}/v2/{repo}/tags/list"), None)?;
    let tags: Value = serde_json::from_slice(&tags).map_err(|e| e.to_string())?;
    let tags: Vec<&str> = tags["tags"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if tags.contains(&"latest") {
        return Err(format!("{registry}/{repo} carries a `latest` tag"));
    }
    if !tags.contains(&release.tag.as_str()) {
        return Err(format!("{registry}/{repo} has no tag {}", release.tag));
    }
    let raw = http_get(
        &format!("http://{registry}/v2/{repo}/manifests/{}", release.tag),
        Some(LIST_ACCEPT),
    )?;
    let manifest_digest = format!(
        "sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&raw))
    );
    let list: Value = serde_json::from_slice(&raw).map_err(|e| e.to_string())?;
    let entries = list["manifests"]
        .as_array()
        .ok_or("the tag is not a manifest list")?;
    let host = host_arch()?;
    let mut arches = Vec::new();
    let mut checked_labels = Vec::new();
    for arch in &release.arches {
        let entry = entries
            .iter()
            .find(|m| m["platform"]["architecture"] == arch.as_str())
            .ok_or_else(|| format!("the manifest list has no {arch} image"))?;
        let digest = entry["digest"]
            .as_str()
            .ok_or("manifest entry without digest")?
            .to_owned();
        let (labels, tools) = verify_arch(release, registry, conf, arch, &digest)?;
        checked_labels = labels;
        let smoked = smoke && arch == host;
        if smoked {
            smoke_up(
                &format!("{}@{manifest_digest}", release.remote(registry)),
                conf,
                release,
            )?;
        }
        let build_secs = times
            .iter()
            .find(|(a, _)| a == arch)
            .map_or(0.0, |(_, s)| *s);
        arches.push(ArchEvidence {
            arch: arch.clone(),
            digest,
            build_secs,
            tools,
            smoke: smoked,
        });
    }
    let own = BaseImageRef::read(&root())?;
    let committed = format!(
        "{}:{}@{}",
        own.name,
        own.tag,
        own.digest
            .ok_or_else(|| format!("{DATA_FILE}: [aibox] has no `digest`"))?
    );
    let ev = ImageEvidence {
        registry: registry.to_owned(),
        repository: repo.to_owned(),
        tag: release.tag.clone(),
        manifest_digest,
        committed_reference: committed,
        arches,
        labels: checked_labels,
        file: out_dir.join("image-evidence.json"),
    };
    fs_err::create_dir_all(out_dir).map_err(|e| e.to_string())?;
    let text = serde_json::to_string_pretty(&ev.json()).map_err(|e| e.to_string())? + "\n";
    fs_err::write(&ev.file, text).map_err(|e| e.to_string())?;
    Ok(ev)
}

/// A verification pull, removed again when the check ends (passed or not), so repeated
/// gates do not pile up copies of the image under each loopback registry's address.
struct Pulled<'a> {
    conf: &'a RegistriesConf,
    image: &'a str,
}

impl Drop for Pulled<'_> {
    fn drop(&mut self) {
        let _ = self.conf.podman().args(["rmi", "-f", self.image]).output();
    }
}

/// Pulls one architecture by digest and checks its labels, marker, user and tools;
/// returns the checked labels and the tools' version lines.
fn verify_arch(
    release: &Release,
    registry: &str,
    conf: &RegistriesConf,
    arch: &str,
    digest: &str,
) -> Result<(Labels, Vec<String>), String> {
    let repo = release.repository();
    let by_digest = format!("{registry}/{repo}@{digest}");
    say(&format!("==> verify {arch}: pull {by_digest}"));
    if arch != host_arch()? {
        ensure_binfmt(arch)?;
    }
    checked(
        conf.podman()
            .args(["pull", "--quiet", "--arch", arch, &by_digest]),
        "podman pull by digest",
    )?;
    let _pulled = Pulled {
        conf,
        image: &by_digest,
    };
    let inspect = capture(conf.podman().args(["image", "inspect", &by_digest]))?;
    let inspect: Value = serde_json::from_str(&inspect).map_err(|e| e.to_string())?;
    let image = &inspect[0];
    if image["Architecture"] != arch {
        return Err(format!(
            "{by_digest} is {} but listed as {arch}",
            image["Architecture"]
        ));
    }
    let labels = &image["Labels"];
    let created = labels["org.opencontainers.image.created"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if created.len() != 20 || !created.ends_with('Z') {
        return Err(format!(
            "{arch}: label org.opencontainers.image.created is `{created}`, not a UTC time"
        ));
    }
    let expected = release.labels(&created);
    for (k, v) in &expected {
        let got = labels[k.as_str()].as_str().unwrap_or("<missing>");
        if got != v {
            return Err(format!("{arch}: label {k} is `{got}`, expected `{v}`"));
        }
    }
    let run = |cmd: &[&str]| -> Result<String, String> {
        let mut c = conf.podman();
        c.args(["run", "--rm", "--pull=never", "--arch", arch, &by_digest])
            .args(cmd);
        capture(&mut c).map(|s| s.trim().to_owned())
    };
    let marker = run(&["cat", "/etc/aibox-version"])?;
    if marker != release.version {
        return Err(format!(
            "{arch}: /etc/aibox-version says `{marker}`, expected `{}`",
            release.version
        ));
    }
    let user = run(&["id", "-un"])?;
    if user != release.recipe.user {
        return Err(format!(
            "{arch}: the image runs as `{user}`, expected `{}`",
            release.recipe.user
        ));
    }
    let mut tools = Vec::new();
    for tool in [
        ["python3", "--version"],
        ["uv", "--version"],
        ["git", "--version"],
    ] {
        tools.push(run(&tool)?);
    }
    Ok((expected, tools))
}

/// `aibox init` + `up` of a project whose base image is the published `reference`, then
/// `aibox exec` of python3, uv and git inside it; `down` and cleanup at the end.
fn smoke_up(reference: &str, conf: &RegistriesConf, release: &Release) -> Result<(), String> {
    say(&format!("==> smoke: aibox up on {reference}"));
    // The test build CI has just made (`aibox` among its binaries): nothing to compile
    // there. `build --package aibox-cli` has another feature set, so it recompiled about
    // 20 crates and rewrote the `aibox` the end-to-end tests run.
    crate::step("build aibox (the tests' build)", crate::ci::BUILD)?;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
    let bin = target.join("debug/aibox");
    let name = format!("aibox-image-smoke-{}", std::process::id());
    let root = conf.dir.join(&name);
    if root.exists() {
        fs_err::remove_dir_all(&root).map_err(|e| e.to_string())?;
    }
    fs_err::create_dir_all(&root).map_err(|e| e.to_string())?;
    let root = root.canonicalize().map_err(|e| e.to_string())?;
    let containers_conf = camino::Utf8PathBuf::from_path_buf(containers_conf())
        .map_err(|p| format!("{} is not UTF-8", p.display()))?;
    let aibox = |args: &[&str]| -> Command {
        let root = camino::Utf8Path::from_path(&root).unwrap_or(camino::Utf8Path::new("."));
        let mut cmd = aibox_test_support::podman::aibox_command(
            bin.to_str().unwrap_or("aibox"),
            &containers_conf,
            root,
        );
        with_storage(&mut cmd)
            .env("CONTAINERS_REGISTRIES_CONF", &conf.file)
            .args(args);
        cmd
    };
    let result = (|| -> Result<(), String> {
        capture(&mut aibox(&[
            "init",
            &name,
            "--harness",
            "vscode",
            "--context-mode",
            "harness-only",
            "--base-image",
            reference,
            "--yes",
        ]))?;
        fs_err::write(root.join(".aibox-local.toml"), local_toml_with_host_ca())
            .map_err(|e| e.to_string())?;
        capture(&mut aibox(&["up"]))?;
        let dockerfile = fs_err::read_to_string(root.join(".devcontainer/Dockerfile"))
            .map_err(|e| e.to_string())?;
        if !dockerfile.contains(&format!("FROM {reference}\n")) {
            return Err(format!(
                "the generated Dockerfile does not start FROM {reference}"
            ));
        }
        let marker = capture(&mut aibox(&["exec", "--", "cat", "/etc/aibox-version"]))?;
        if marker.trim() != release.version {
            return Err(format!("smoke: marker `{}`", marker.trim()));
        }
        for tool in ["python3", "uv", "git"] {
            let out = capture(&mut aibox(&["exec", "--", tool, "--version"]))?;
            say(&format!("smoke: {}", out.trim()));
        }
        Ok(())
    })();
    let _ = aibox(&["down"]).output();
    let _ = podman().args(["rm", "-f", "-t", "0", &name]).output();
    let _ = podman()
        .args(["network", "rm", "-f", &format!("{name}_default")])
        .output();
    let _ = podman()
        .args(["rmi", "-f", &format!("localhost/{name}-aibox:local")])
        .output();
    let _ = fs_err::remove_dir_all(&root);
    result
}

/// A `registries.conf` that lets Podman talk plain HTTP to the loopback registry.
#[derive(Debug)]
pub(crate) struct RegistriesConf {
    dir: PathBuf,
    file: PathBuf,
}

impl RegistriesConf {
    pub(crate) fn write(out_dir: &Path, registry: &str) -> Result<Self, String> {
        let dir = out_dir.join("registry-client");
        fs_err::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let file = dir.join("registries.conf");
        fs_err::write(
            &file,
            format!(
                "# Written by `cargo xtask image`: the loopback registry speaks plain HTTP.\n\
                 [[registry]]\nlocation = \"{registry}\"\ninsecure = true\n"
            ),
        )
        .map_err(|e| e.to_string())?;
        let dir = dir.canonicalize().map_err(|e| e.to_string())?;
        let file = dir.join("registries.conf");
        Ok(Self { dir, file })
    }

    pub(crate) fn podman(&self) -> Command {
        let mut cmd = podman();
        cmd.env("CONTAINERS_REGISTRIES_CONF", &self.file);
        cmd
    }
}

/// Debian's `docker-registry` on a free loopback port with a temporary configuration and
/// storage; stopped when dropped.
#[derive(Debug)]
pub(crate) struct LoopbackRegistry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
}

impl LoopbackRegistry {
    pub(crate) fn start(out_dir: &Path) -> Result<Self, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let address = format!("127.0.0.1:{port}");
        let dir = out_dir.join("registry");
        if dir.exists() {
            fs_err::remove_dir_all(&dir).map_err(|e| e.to_string())?;
        }
        fs_err::create_dir_all(dir.join("data")).map_err(|e| e.to_string())?;
        let dir = dir.canonicalize().map_err(|e| e.to_string())?;
        let config = dir.join("config.yml");
        fs_err::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\n",
                dir.join("data").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let log = fs_err::File::create(dir.join("registry.log")).map_err(|e| e.to_string())?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.into_parts().0)
            .spawn()
            .map_err(|e| {
                format!("cannot start docker-registry ({e}); `apt-get install docker-registry`")
            })?;
        let mut reg = Self { child, address };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_get(&format!("http://{}/v2/", reg.address), None).is_err() {
            if let Ok(Some(status)) = reg.child.try_wait() {
                return Err(format!(
                    "docker-registry exited ({status}): {}",
                    fs_err::read_to_string(dir.join("registry.log")).unwrap_or_default()
                ));
            }
            if Instant::now() > deadline {
                return Err("docker-registry did not answer within 30 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        say(&format!("==> loopback registry on {}", reg.address));
        Ok(reg)
    }
}

impl Drop for LoopbackRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_pulled_from(&self.address);
    }
}

/// Removes every local name below `registry` (`HOST:PORT/...`): what verification and the
/// smoke's `FROM` pulled stays in Podman's storage under the loopback address, which
/// nothing can pull from again once the registry is stopped. Tags and digest references
/// alike, read from every image (`podman images` hides a digest reference behind a local
/// build's tag on the same image); by name, not by image, so a local build keeps its own.
fn remove_pulled_from(registry: &str) {
    let Ok(ids) = podman().args(["images", "--quiet", "--no-trunc"]).output() else {
        return;
    };
    let mut ids: Vec<String> = String::from_utf8_lossy(&ids.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    ids.dedup();
    if ids.is_empty() {
        return;
    }
    let Ok(names) = podman()
        .args([
            "image",
            "inspect",
            "--format",
            "{{range .RepoTags}}{{println .}}{{end}}{{range .RepoDigests}}{{println .}}{{end}}",
        ])
        .args(&ids)
        .output()
    else {
        return;
    };
    let prefix = format!("{registry}/");
    for name in String::from_utf8_lossy(&names.stdout).lines() {
        if name.starts_with(&prefix) {
            let _ = podman().args(["rmi", name]).output();
        }
    }
}

/// Makes sure a foreign architecture's binaries run: `binfmt_misc` mounted and Debian's
/// qemu-user-static interpreter registered.
fn ensure_binfmt(arch: &str) -> Result<(), String> {
    let qemu = match arch {
        "arm64" => "qemu-aarch64",
        "amd64" => "qemu-x86_64",
        other => return Err(format!("no qemu mapping for architecture {other}")),
    };
    let fs = Path::new("/proc/sys/fs/binfmt_misc");
    if !fs.join("status").exists() {
        checked(
            Command::new("mount")
                .args(["-t", "binfmt_misc", "binfmt_misc"])
                .arg(fs),
            "mounting binfmt_misc (needs root)",
        )?;
    }
    if !fs.join(qemu).exists() {
        checked(
            Command::new("update-binfmts").args(["--enable", qemu]),
            "update-binfmts (`apt-get install qemu-user-static binfmt-support`)",
        )?;
    }
    Ok(())
}

/// Debian name of the host architecture.
fn host_arch() -> Result<&'static str, String> {
    match std::env::consts::ARCH {
        "x86_64" => Ok("amd64"),
        "aarch64" => Ok("arm64"),
        other => Err(format!("unsupported host architecture {other}")),
    }
}

/// The workspace root (xtask's parent folder), whatever the current directory.
pub(crate) fn root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// `podman` with the test harness's `containers.conf` (runc and lowered ulimits, which
/// machines of this kind need; see aibox-test-support), and the storage of
/// the base image test's own store once chosen.
fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.env("CONTAINERS_CONF", containers_conf())
        .stdin(Stdio::null());
    with_storage(&mut cmd);
    cmd
}

/// The `storage.conf` of the base image test's own image store (`tests::own_storage`),
/// once chosen.
static STORAGE_CONF: OnceLock<PathBuf> = OnceLock::new();

/// Points `cmd` at the base image test's own store, once chosen.
fn with_storage(cmd: &mut Command) -> &mut Command {
    if let Some(conf) = STORAGE_CONF.get() {
        cmd.env("CONTAINERS_STORAGE_CONF", conf);
    }
    cmd
}

/// Writes the harness's `containers.conf` (only when different, so concurrent writers
/// never expose a half-written file) and returns its path. Checked once per process, not
/// on every `podman` command.
fn containers_conf() -> PathBuf {
    static CONF: OnceLock<PathBuf> = OnceLock::new();
    CONF.get_or_init(|| {
        let dir = aibox_test_support::podman::harness_dir();
        let conf = dir.join("containers.conf");
        let text = aibox_test_support::podman::CONTAINERS_CONF;
        if fs_err::read_to_string(&conf).ok().as_deref() != Some(text) {
            let tmp = dir.join(format!("containers.conf.xtask.{}", std::process::id()));
            let _ = fs_err::create_dir_all(&dir)
                .and_then(|()| fs_err::write(&tmp, text))
                .and_then(|()| fs_err::rename(&tmp, &conf));
        }
        conf.into_std_path_buf()
    })
    .clone()
}

/// GET over loopback with curl (the registry's HTTP API).
fn http_get(url: &str, accept: Option<&str>) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new("curl");
    cmd.args(["-fsS", "--noproxy", "*", "--max-time", "30"]);
    if let Some(a) = accept {
        cmd.arg("-H").arg(format!("Accept: {a}"));
    }
    crate::release::output_of(cmd.arg(url), &format!("curl GET {url}"))
}

fn checked(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = run_output(cmd)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(failure(what, &out))
    }
}

fn capture(cmd: &mut Command) -> Result<String, String> {
    let out = run_output(cmd)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(failure(&format!("{cmd:?}"), &out))
    }
}

fn run_output(cmd: &mut Command) -> Result<Output, String> {
    cmd.output()
        .map_err(|e| format!("cannot run {}: {e}", cmd.get_program().to_string_lossy()))
}

fn failure(what: &str, out: &Output) -> String {
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    };
    let mut msg = format!("{what} failed ({})", out.status);
    let _ = write!(
        msg,
        "\nstdout:\n{}\nstderr:\n{}",
        tail(&out.stdout),
        tail(&out.stderr)
    );
    msg
}

fn read_toml(path: &Path) -> Result<toml::Value, String> {
    let text = fs_err::read_to_string(path).map_err(|e| e.to_string())?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn str_key(v: &toml::Value, key: &str, file: &str) -> Result<String, String> {
    v.get(key)
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{file}: `{key}` must be a string"))
}

#[cfg(test)]
pub(crate) mod tests {
    //! The real thing: debootstrap, Podman, Debian's `docker-registry` on loopback and the
    //! aibox binary. amd64 only (arm64 adds minutes under qemu; `cargo xtask image release`
    //! builds both).
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    /// Gives every Podman this process starts (directly, or through `aibox` and
    /// podman-compose, which pass their environment on) its own image store under `dir`:
    /// `graph` for images and layers, `run` for their runtime state. The base image test
    /// runs beside the end-to-end tests (`cargo xtask ci`): in one store, one suite's image
    /// removals failed the other's builds with "layer not known" (Podman 4.3); in two, no
    /// layer is shared.
    fn own_storage(dir: &Path) -> Result<(), String> {
        let conf = dir.join("storage.conf");
        let text = format!(
            "# Written by xtask's base image test: its own Podman image store.\n[storage]\n\
             driver = \"overlay\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            dir.join("graph").display(),
            dir.join("run").display()
        );
        fs_err::create_dir_all(dir)
            .and_then(|()| fs_err::write(&conf, text))
            .map_err(|e| e.to_string())?;
        let _ = STORAGE_CONF.set(conf);
        Ok(())
    }

    /// An image derived from the built amd64 image by `lines`, published under `tag`.
    fn publish_tampered(
        base: &Release,
        tag: &str,
        lines: &str,
        registry: &str,
        conf: &RegistriesConf,
    ) -> Release {
        let mut bad = base.clone();
        bad.tag = tag.to_owned();
        let dir = conf.dir.join(tag);
        fs_err::create_dir_all(&dir).unwrap();
        fs_err::write(
            dir.join("Containerfile"),
            format!("FROM {}\n{lines}", base.local_arch("amd64")),
        )
        .unwrap();
        checked(
            podman()
                .args(["build", "--pull=never", "--platform=linux/amd64", "--tag"])
                .arg(bad.local_arch("amd64"))
                .arg(&dir),
            "tampered build",
        )
        .unwrap();
        make_list(&bad).unwrap();
        publish(&bad, registry, conf).unwrap();
        bad
    }

    /// Removes the local manifest lists and images of `release` under `tags` when
    /// dropped, so a failing test leaves nothing behind either.
    struct LocalImages<'a> {
        release: &'a Release,
        tags: [&'a str; 3],
    }

    impl Drop for LocalImages<'_> {
        fn drop(&mut self) {
            for tag in self.tags {
                let mut r = self.release.clone();
                r.tag = tag.to_owned();
                let _ = podman().args(["manifest", "rm", &r.local_list()]).output();
                let _ = podman()
                    .args(["rmi", "-f", &r.local_arch("amd64")])
                    .output();
            }
        }
    }

    #[test]
    pub(crate) fn amd64_build_publish_verify_and_tampering_fails() {
        // Before any Podman runs: its own image store (see `own_storage`).
        own_storage(&root().join("target/aibox-image-test/storage")).unwrap();
        let mut release = Release::new("v0.1.0").unwrap();
        release.arches = vec!["amd64".to_owned()];
        release.local_name = format!("localhost/aibox-base-test-{}", std::process::id());
        // Declared before the registry, so dropped after it: the registry's pulls go first.
        let _local = LocalImages {
            release: &release,
            tags: [
                release.tag.as_str(),
                "0.1.0-bookworm-tampered-marker",
                "0.1.0-bookworm-tampered-label",
            ],
        };
        let out = root().join("target/aibox-image-test");
        let started = Instant::now();
        let times = build(&release).unwrap();
        let registry = LoopbackRegistry::start(&out).unwrap();
        let conf = RegistriesConf::write(&out, &registry.address).unwrap();
        let digest = publish(&release, &registry.address, &conf).unwrap();
        let ev = verify(&release, &registry.address, &conf, &times, true, &out).unwrap();
        say(&format!(
            "image test: build {:.0}s, total {:.0}s",
            times[0].1,
            started.elapsed().as_secs_f64()
        ));
        assert_eq!(ev.manifest_digest, digest);
        assert!(ev.arches[0].smoke);
        assert!(ev.arches[0].tools.iter().any(|t| t.starts_with("uv ")));
        let written: Value =
            serde_json::from_str(&fs_err::read_to_string(&ev.file).unwrap()).unwrap();
        assert_eq!(written["manifest_digest"], digest.as_str());
        assert_eq!(
            written["architectures"][0]["digest"],
            ev.arches[0].digest.as_str()
        );

        // A wrong marker and a wrong label are both caught.
        let bad = publish_tampered(
            &release,
            "0.1.0-bookworm-tampered-marker",
            "USER root\nRUN echo 9.9.9 > /etc/aibox-version\nUSER aibox\n",
            &registry.address,
            &conf,
        );
        let err = verify(&bad, &registry.address, &conf, &[], false, &out).unwrap_err();
        assert!(err.contains("/etc/aibox-version says `9.9.9`"), "{err}");
        let bad = publish_tampered(
            &release,
            "0.1.0-bookworm-tampered-label",
            "LABEL org.opencontainers.image.revision=0000000\n",
            &registry.address,
            &conf,
        );
        let err = verify(&bad, &registry.address, &conf, &[], false, &out).unwrap_err();
        assert!(
            err.contains("label org.opencontainers.image.revision is `0000000`"),
            "{err}"
        );

        // `latest` is refused.
        let mut latest = release.clone();
        latest.tag = "latest".to_owned();
        assert!(publish(&latest, &registry.address, &conf).is_err());
    }
}
