//! `docker run` / `podman run` arguments (`devcontainer.json` `runArgs`) read the way the
//! engines' command lines read them. Both parse with pflag: `--long=value`, `--long value`,
//! `-xVALUE`, `-x=VALUE`, `-x VALUE`, and boolean short flags bundled in front of one
//! that takes a value (`-itv/:/h` is `-i -t -v /:/h`). The Dev Containers CLI hands
//! `runArgs` to the engine unchanged, so the gate must see what the engine sees: every
//! form of an option is judged as its separated form is.
//!
//! A long option this module does not know may or may not take a value; both readings
//! are followed (the next argument is read as its value and as an option of its own), so
//! an unknown flag cannot hide the option after it.

use std::collections::BTreeSet;

/// One option as the engine reads it: its long name (`volume` for `-v`, `network` for
/// `--net`) and its value (`None` for a boolean flag given without one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunOpt {
    pub(crate) name: String,
    pub(crate) value: Option<String>,
}

impl RunOpt {
    /// The value, or `""` for a flag given without one.
    pub(crate) fn value(&self) -> &str {
        self.value.as_deref().unwrap_or("")
    }
}

/// The short options of `docker run` and `podman run`: letter, long name, takes a value.
const SHORT: &[(char, &str, bool)] = &[
    ('a', "attach", true),
    ('c', "cpu-shares", true),
    ('d', "detach", false),
    ('e', "env", true),
    ('h', "hostname", true),
    ('i', "interactive", false),
    ('l', "label", true),
    ('m', "memory", true),
    ('p', "publish", true),
    ('P', "publish-all", false),
    ('q', "quiet", false),
    ('t', "tty", false),
    ('u', "user", true),
    ('v', "volume", true),
    ('w', "workdir", true),
];

/// Long options that always take a value (no optional-value flags: reading one of those
/// as taking the next argument would hide that argument from the gate).
const VALUED: &[&str] = &[
    "add-host",
    "annotation",
    "attach",
    "authfile",
    "cap-add",
    "cap-drop",
    "cgroup-parent",
    "cert-dir",
    "cgroupns",
    "cidfile",
    "conmon-pidfile",
    "cpu-shares",
    "cpus",
    "cpuset-cpus",
    "creds",
    "decryption-key",
    "device",
    "device-cgroup-rule",
    "dns",
    "dns-option",
    "dns-search",
    "entrypoint",
    "env",
    "env-file",
    "expose",
    "gidmap",
    "group-add",
    "health-cmd",
    "health-log-destination",
    "hostname",
    "init-path",
    "ip",
    "ip6",
    "ipc",
    "label",
    "label-file",
    "log-driver",
    "log-opt",
    "mac-address",
    "memory",
    "memory-swap",
    "mount",
    "name",
    "network",
    "network-alias",
    "pid",
    "pidfile",
    "platform",
    "pod",
    "pod-id-file",
    "publish",
    "restart",
    "runtime",
    "seccomp-policy",
    "security-opt",
    "shm-size",
    "signature-policy",
    "stop-signal",
    "stop-timeout",
    "sysctl",
    "tmpfs",
    "uidmap",
    "ulimit",
    "user",
    "userns",
    "uts",
    "volume",
    "volumes-from",
    "workdir",
];

/// Long boolean options (a value only as `--flag=value`).
const BOOLEAN: &[&str] = &[
    "detach",
    "env-host",
    "init",
    "interactive",
    "no-healthcheck",
    "no-hosts",
    "oom-kill-disable",
    "privileged",
    "publish-all",
    "quiet",
    "read-only",
    "read-only-tmpfs",
    "replace",
    "rm",
    "rootfs",
    "sig-proxy",
    "tty",
];

/// What the engine does with the host file an option names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostFile {
    /// Reads it: its content goes into the container (`--env-file`, `--label-file`,
    /// `--init-path`) or is used with the engine's rights (`--authfile`,
    /// `--decryption-key`, `--pod-id-file`, `--cert-dir`, `--signature-policy`).
    Read,
    /// Writes it, with the engine's rights (`--cidfile`, `--pidfile`,
    /// `--conmon-pidfile`, Podman's `--health-log-destination` folder).
    Write,
}

/// The host file or folder `opt` makes the engine read or write, as written (`None`
/// for every other option). One table for the judge and the gate's traversal.
pub(crate) fn host_file(opt: &RunOpt) -> Option<(HostFile, &str)> {
    let value = opt.value().trim();
    let kind = match opt.name.as_str() {
        "env-file" | "label-file" | "authfile" | "init-path" | "pod-id-file" | "cert-dir"
        | "signature-policy" => HostFile::Read,
        // `key[:passphrase]`: the path ends at the first `:` outside a `${…}`.
        "decryption-key" => return Some((HostFile::Read, before_colon(value))),
        "cidfile" | "pidfile" | "conmon-pidfile" => HostFile::Write,
        // `local` and `events_logger` keep the log in the engine; anything else is a
        // folder on the host.
        "health-log-destination" if !matches!(value, "local" | "events_logger") => HostFile::Write,
        _ => return None,
    };
    Some((kind, value))
}

/// `value` up to its first `:` that is not inside a `${…}` variable.
fn before_colon(value: &str) -> &str {
    let mut depth = 0usize;
    let mut prev = '\0';
    for (pos, c) in value.char_indices() {
        match c {
            '{' if prev == '$' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            ':' if depth == 0 => return &value[..pos],
            _ => {}
        }
        prev = c;
    }
    value
}

/// Every option in `args`, in order. Arguments are trimmed (a padded flag is judged as a
/// flag; the engine would not take it as one, so this only judges more).
pub(crate) fn parse(args: &[String]) -> Vec<RunOpt> {
    let args: Vec<&str> = args.iter().map(|a| a.trim()).collect();
    // Where an option may start; an unknown long flag adds two (see the module docs).
    // Each position is read once, so the work stays linear.
    let mut starts = BTreeSet::from([0]);
    let mut out = Vec::new();
    while let Some(i) = starts.pop_first() {
        let Some(arg) = args.get(i) else {
            continue;
        };
        if let Some(long) = arg.strip_prefix("--").filter(|l| !l.is_empty()) {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let name = if name == "net" { "network" } else { name };
            if inline.is_some() || BOOLEAN.contains(&name) {
                starts.insert(i + 1);
                out.push(opt(name, inline));
            } else if VALUED.contains(&name) {
                starts.insert(i + 2);
                out.push(opt(name, args.get(i + 1).map(|v| (*v).to_owned())));
            } else {
                starts.extend([i + 1, i + 2]);
                out.push(opt(name, None));
            }
        } else if let Some(shorts) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            let (opts, used) = short_bundle(shorts, args.get(i + 1).copied());
            out.extend(opts);
            starts.insert(i + 1 + usize::from(used));
        } else {
            // `--`, `-` and words: the engine would stop reading options (or fail);
            // reading on only judges more.
            starts.insert(i + 1);
        }
    }
    out
}

fn opt(name: &str, value: Option<String>) -> RunOpt {
    RunOpt {
        name: name.to_owned(),
        value,
    }
}

/// The options of one `-xyz…` argument, and whether the last one took `next` as its
/// value. As pflag reads it: `=` after a letter starts its value; a letter that takes a
/// value takes the rest of the argument, or the next argument when nothing is left. An
/// unknown letter makes the engine refuse the command, so it is skipped.
fn short_bundle(shorts: &str, next: Option<&str>) -> (Vec<RunOpt>, bool) {
    let mut out = Vec::new();
    for (pos, c) in shorts.char_indices() {
        let rest = &shorts[pos + c.len_utf8()..];
        let known = SHORT.iter().find(|(letter, _, _)| *letter == c);
        if let Some(value) = rest.strip_prefix('=') {
            if let Some((_, name, _)) = known {
                out.push(opt(name, Some(value.to_owned())));
            }
            return (out, false);
        }
        let Some((_, name, valued)) = known else {
            continue;
        };
        if !valued {
            out.push(opt(name, None));
        } else if rest.is_empty() {
            out.push(opt(name, next.map(str::to_owned)));
            return (out, true);
        } else {
            out.push(opt(name, Some(rest.to_owned())));
            return (out, false);
        }
    }
    (out, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(args: &[&str]) -> Vec<(String, String)> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        parse(&args)
            .into_iter()
            .map(|o| (o.name.clone(), o.value().to_owned()))
            .collect()
    }

    fn p(name: &str, value: &str) -> (String, String) {
        (name.to_owned(), value.to_owned())
    }

    #[test]
    fn every_form_reads_as_the_separated_one() {
        for args in [
            &["-v", "/:/h"][..],
            &["-v/:/h"],
            &["-v=/:/h"],
            &["--volume", "/:/h"],
            &["--volume=/:/h"],
        ] {
            assert_eq!(pairs(args), [p("volume", "/:/h")], "{args:?}");
        }
        assert_eq!(pairs(&["-u0"]), [p("user", "0")]);
        assert_eq!(
            pairs(&["-iv", "/:/h"]),
            [p("interactive", ""), p("volume", "/:/h")]
        );
        assert_eq!(
            pairs(&["-itv/:/h", "--net", "host"]),
            [
                p("interactive", ""),
                p("tty", ""),
                p("volume", "/:/h"),
                p("network", "host")
            ]
        );
        assert_eq!(pairs(&["-i=false"]), [p("interactive", "false")]);
    }

    #[test]
    fn values_are_not_read_as_options() {
        assert_eq!(pairs(&["-e", "-v/:/h"]), [p("env", "-v/:/h")]);
        assert_eq!(
            pairs(&["--name", "-v/:/h", "--rm"]),
            [p("name", "-v/:/h"), p("rm", "")]
        );
    }

    #[test]
    fn decryption_keys_lose_their_passphrase() {
        assert_eq!(before_colon("/k.pem:pw"), "/k.pem");
        assert_eq!(before_colon("${localEnv:HOME}/k:pw"), "${localEnv:HOME}/k");
        assert_eq!(before_colon("/k.pem"), "/k.pem");
    }

    #[test]
    fn an_unknown_flag_hides_nothing() {
        // `--future` may take `-e` as its value (then `-v` mounts) or be a boolean
        // (then `-e` takes `-v/:/h`): both readings are judged.
        let read = pairs(&["--future", "-e", "-v/:/h"]);
        assert!(read.contains(&p("volume", "/:/h")), "{read:?}");
        assert!(read.contains(&p("env", "-v/:/h")), "{read:?}");
    }
}
