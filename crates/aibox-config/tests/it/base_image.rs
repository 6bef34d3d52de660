//! The default base image comes from the committed data file, pinned by tag and digest.

use aibox_config::{ImageRef, base_images, default_base_image, default_base_image_ref, validate};

#[test]
fn the_data_file_names_a_tag_and_a_digest() {
    let r = default_base_image_ref().expect("data/base-image.toml parses");
    assert!(r.name.contains('/'), "{r:?}");
    let tag = r.tag.as_deref().expect("a tag");
    assert!(!tag.is_empty() && tag != "latest", "{tag}");
    let digest = r.digest.as_deref().expect("a digest");
    assert!(
        validate::image_pin_problem(&format!("x@{digest}")).is_none(),
        "{digest}"
    );
    assert_eq!(default_base_image(), format!("{}:{tag}@{digest}", r.name));
    assert!(validate::image_pin_problem(&default_base_image()).is_none());
}

/// The default is an image a user can pull today (Debian's official one, not aibox's own
/// unpublished image), and the file says where its digest was read.
#[test]
fn the_default_is_published_and_its_digest_source_is_recorded() {
    let images = base_images().expect("data/base-image.toml parses");
    assert_eq!(images.default.name, "docker.io/library/debian");
    assert!(
        images.default.tag.starts_with("bookworm"),
        "{:?}",
        images.default
    );
    let source = images
        .default
        .digest_source
        .as_deref()
        .expect("digest_source");
    assert!(source.contains("repo-info"), "{source}");
    assert!(images.default.pinned_on.is_some());
    assert_ne!(images.aibox.name, images.default.name);
    assert!(
        validate::image_pin_problem(&images.aibox.image_ref().reference()).is_none(),
        "{:?}",
        images.aibox
    );
}

#[test]
fn references_split_into_name_tag_and_digest() {
    let d = format!("sha256:{}", "a".repeat(64));
    for (text, name, tag, digest) in [
        ("debian:bookworm", "debian", Some("bookworm"), None),
        ("host:5000/a/b", "host:5000/a/b", None, None),
        ("host:5000/a/b:1.0", "host:5000/a/b", Some("1.0"), None),
        (
            &*format!("host:5000/a/b:1.0@{d}"),
            "host:5000/a/b",
            Some("1.0"),
            Some(d.as_str()),
        ),
        (&*format!("a/b@{d}"), "a/b", None, Some(d.as_str())),
    ] {
        let r = ImageRef::parse(text);
        assert_eq!(r.name, name, "{text}");
        assert_eq!(r.tag.as_deref(), tag, "{text}");
        assert_eq!(r.digest.as_deref(), digest, "{text}");
        assert_eq!(r.reference(), text);
    }
}
