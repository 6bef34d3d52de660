//! `aibox-runtime`: container engine detection and the Compose lifecycle.
