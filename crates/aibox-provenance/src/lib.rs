//! `aibox-provenance`: lock file, digests, verified downloads, safe extraction, processkit content.
