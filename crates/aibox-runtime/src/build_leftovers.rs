//! The working containers an interrupted Podman build leaves behind, told apart from
//! everyone else's.
//!
//! Podman (Buildah) runs each step of a build in a working container made from the
//! previous step's image and removes them all at the end; when Ctrl-C ends `podman build`
//! they stay, one per step, in the `storage` state, listed only by `podman ps -a
//! --external`. Which are this build's is read from what it printed, and when: the `FROM`
//! image, then each step's image (`--> 751868356d7`, after `--> Using cache 7518…`), the
//! next step's container being made from it before that step's `STEP` line or just after
//! (rootless Podman took 6 to 12 s between the two for a cached step). Another build beside
//! this one (another project's `up`) runs from the same cached images, but makes its
//! containers when it reaches those steps: for each image it printed this build claims one
//! container made from it in that span, the one nearest its start.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::build_log::BuildStep;

/// Seconds of slack around the span in which the build made a container: the engine
/// dates containers to the second, and a line reaches aibox through a pipe (and
/// podman-compose) a moment after it was printed.
const SLACK: i64 = 2;

/// An image a build ran a step from, and when: from the line naming it until the next
/// `STEP` line (the build's end when none came).
#[derive(Debug)]
struct Seen {
    /// An image ID (short or long), or a `FROM` reference until it is resolved.
    image: Image,
    /// Seconds since the epoch.
    at: i64,
    /// Seconds since the epoch; `None` while no later `STEP` line came.
    until: Option<i64>,
}

#[derive(Debug, PartialEq, Eq)]
enum Image {
    Id(String),
    Base(String),
}

/// What a build printed about the images its steps run from.
#[derive(Debug, Default)]
pub(crate) struct BuildTrace {
    seen: Vec<Seen>,
}

impl BuildTrace {
    /// Reads one line of the build's output, read at `now` (seconds since the epoch);
    /// `step` is the step header it is, as [`crate::build_log::BuildLog`] parsed it.
    pub(crate) fn line(&mut self, line: &str, step: Option<&BuildStep>, now: impl Fn() -> i64) {
        if let Some(step) = step {
            let at = now();
            for open in self.seen.iter_mut().filter(|s| s.until.is_none()) {
                open.until = Some(at);
            }
            let instruction = &step.instruction;
            if let Some(from) = instruction
                .strip_prefix("FROM ")
                .or_else(|| instruction.strip_prefix("from "))
                && let Some(image) = from.split_whitespace().next()
            {
                self.seen.push(Seen {
                    image: Image::Base(image.to_owned()),
                    at,
                    until: None,
                });
            }
        } else if let Some(id) = line.trim().strip_prefix("--> ")
            // Not a cache hit's long ID (`--> Using cache …`): the short one follows on a
            // line of its own. Shorter than Podman's 11 characters would match too much.
            && id.len() >= 11
            && id.bytes().all(|b| b.is_ascii_hexdigit())
        {
            self.seen.push(Seen {
                image: Image::Id(id.to_ascii_lowercase()),
                at: now(),
                until: None,
            });
        }
    }

    /// The `FROM` references not resolved yet (see [`Self::resolve`]).
    pub(crate) fn bases(&self) -> BTreeSet<String> {
        self.seen
            .iter()
            .filter_map(|s| match &s.image {
                Image::Base(r) => Some(r.clone()),
                Image::Id(_) => None,
            })
            .collect()
    }

    /// Gives the `FROM` reference `base` its image ID (from `podman image inspect`).
    pub(crate) fn resolve(&mut self, base: &str, id: &str) {
        let id = id.trim().trim_start_matches("sha256:").to_ascii_lowercase();
        for s in &mut self.seen {
            if s.image == Image::Base(base.to_owned()) {
                s.image = Image::Id(id.clone());
            }
        }
    }

    /// Whether the build printed nothing that names an image (nothing to look for).
    pub(crate) fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// One entry of `podman ps -a --external --format json`, the fields read here.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Listed {
    id: String,
    #[serde(default, rename = "ImageID")]
    image_id: String,
    #[serde(default)]
    created: i64,
    #[serde(default)]
    state: String,
    #[serde(default)]
    command: Option<Vec<String>>,
}

/// The IDs of the working containers of `trace`'s build in `listing` (the JSON of
/// `podman ps -a --external --format json`), the build having ended at `ended` (seconds
/// since the epoch): made by Buildah, in the `storage` state, for each image the build
/// printed the one made from it in the span it was at that step (with [`SLACK`]), the
/// nearest the span's start.
///
/// # Errors
/// The listing is not that JSON.
pub(crate) fn leftovers(
    listing: &str,
    trace: &BuildTrace,
    ended: i64,
) -> Result<Vec<String>, String> {
    let listed: Vec<Listed> = serde_json::from_str(listing).map_err(|e| e.to_string())?;
    let mut candidates: Vec<Listed> = listed
        .into_iter()
        .filter(|c| {
            c.state.eq_ignore_ascii_case("storage")
                && c.command.as_deref() == Some(&["buildah".to_owned()][..])
        })
        .map(|mut c| {
            c.image_id = c
                .image_id
                .trim_start_matches("sha256:")
                .to_ascii_lowercase();
            c
        })
        .collect();
    let mut claimed = Vec::new();
    for seen in &trace.seen {
        let Image::Id(id) = &seen.image else {
            continue;
        };
        let span = seen.at - SLACK..=seen.until.unwrap_or(ended) + SLACK;
        let nearest = candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                !c.image_id.is_empty()
                    && c.image_id.starts_with(id.as_str())
                    && span.contains(&c.created)
            })
            .min_by_key(|(_, c)| (c.created - seen.at).abs())
            .map(|(i, _)| i);
        if let Some(i) = nearest {
            claimed.push(candidates.swap_remove(i).id);
        }
    }
    Ok(claimed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Podman 4.3's output of a build interrupted in its fourth step, as aibox reads it,
    /// with the second (since the epoch) each line came.
    const OUTPUT: &[(i64, &str)] = &[
        (1000, "STEP 1/4: FROM localhost/aibox-test-base:bookworm"),
        (1007, "STEP 2/4: USER root"),
        (
            1007,
            "--> Using cache 751868356d7d7e890f771fca9901015a272735e6d7e89472c446efa811d50a2e",
        ),
        (1007, "--> 751868356d7"),
        // Rootless Podman: the next step's container done seconds after the ID came.
        (1015, "STEP 3/4: RUN echo hi > /x"),
        (1030, "--> 7e871f6e657"),
        (1031, "STEP 4/4: RUN sleep 20"),
    ];
    /// Ctrl-C came then.
    const ENDED: i64 = 1060;
    const BASE: &str = "sha256:018796c7673b95a7b7e4ad665e2a0028dc33057016283bb744445e94b8825f19";
    const USER_ROOT: &str = "751868356d7d7e890f771fca9901015a272735e6d7e89472c446efa811d50a2e";

    fn entry(id: &str, image_id: &str, created: i64, state: &str, command: &str) -> String {
        format!(
            r#"{{"Id":"{id}","ImageID":"{image_id}","Created":{created},"State":"{state}",
            "Command":["{command}"],"Names":["{id}-working-container"]}}"#
        )
    }

    /// `lines` read as the build loop reads them: each through the build log first.
    fn read(lines: &[(i64, &str)]) -> BuildTrace {
        let mut log = crate::build_log::BuildLog::default();
        let mut trace = BuildTrace::default();
        for (at, line) in lines {
            trace.line(line, log.line(line).as_ref(), || *at);
        }
        trace
    }

    fn trace() -> BuildTrace {
        let mut trace = read(OUTPUT);
        assert_eq!(
            trace.bases().into_iter().collect::<Vec<_>>(),
            ["localhost/aibox-test-base:bookworm"]
        );
        trace.resolve("localhost/aibox-test-base:bookworm", BASE);
        trace
    }

    #[test]
    fn one_container_per_step_made_when_the_build_reached_it() {
        let base = BASE.trim_start_matches("sha256:");
        let listing = format!(
            "[{}]",
            [
                // Another build from the same cached images, 20 s later.
                entry("b0", base, 1020, "storage", "buildah"),
                entry("b1", USER_ROOT, 1021, "storage", "buildah"),
                // This build's: from the base, from step 2's image (just before its next
                // step's line), from step 3's.
                entry("a1", base, 1001, "storage", "buildah"),
                entry("a2", USER_ROOT, 1014, "storage", "buildah"),
                entry("a3", "7e871f6e6579aa", 1031, "Storage", "buildah"),
                // One of the same image left by an earlier build.
                entry("c1", USER_ROOT, 900, "storage", "buildah"),
                // A container of the engine's own, not Buildah's.
                entry("d1", USER_ROOT, 1008, "running", "sleep"),
            ]
            .join(",")
        );
        assert_eq!(
            leftovers(&listing, &trace(), ENDED).unwrap(),
            ["a1", "a2", "a3"]
        );
        assert!(leftovers("[]", &trace(), ENDED).unwrap().is_empty());
        assert!(leftovers("not json", &trace(), ENDED).is_err());
    }

    #[test]
    fn two_builds_in_the_same_second_each_claim_one() {
        // Another build made a container from the base in the same second: one each.
        let base = BASE.trim_start_matches("sha256:");
        let listing = format!(
            "[{},{}]",
            entry("a1", base, 1000, "storage", "buildah"),
            entry("b1", base, 1000, "storage", "buildah")
        );
        let claimed = leftovers(&listing, &trace(), ENDED).unwrap();
        assert_eq!(claimed.len(), 1, "{claimed:?}");
    }

    #[test]
    fn a_stage_header_names_its_base() {
        let trace = read(&[(0, "[1/2] STEP 1/3: FROM localhost/builder:1 AS build")]);
        assert_eq!(
            trace.bases().into_iter().collect::<Vec<_>>(),
            ["localhost/builder:1"]
        );
    }

    #[test]
    fn a_build_that_printed_no_image_claims_nothing() {
        let trace = read(&[
            (0, "--> abc"),
            (0, "--> Using cache 751868356d7d7e890f771fca9901015a"),
            (0, "STEP 1/1: RUN true"),
        ]);
        assert!(trace.is_empty());
        let listing = format!("[{}]", entry("a1", USER_ROOT, 0, "storage", "buildah"));
        assert!(leftovers(&listing, &trace, 0).unwrap().is_empty());
    }
}
