//! The default base image comes from the committed data file, pinned by tag and digest.

use aibox_config::{ImageRef, default_base_image, default_base_image_ref, validate};

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
