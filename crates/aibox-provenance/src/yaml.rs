//! Reading YAML the way processkit writes it.
//!
//! Real tier files open with `---` and close with another `---` line, so a strict
//! single-document reader sees two documents (the second empty) and refuses them. We read
//! the first non-empty document, refuse a file with two non-empty documents (we would be
//! guessing which one the author meant), and otherwise stay lenient: comments, block
//! scalars, unknown keys and `\r\n` line ends are all fine.

use serde::Deserialize as _;
use serde::de::DeserializeOwned;

/// Deserialises the first non-empty YAML document of `text`. `Ok(None)` when every
/// document is empty (or there is none). The error is a readable reason; the caller names
/// the file.
pub fn first_document<T: DeserializeOwned>(text: &str) -> Result<Option<T>, String> {
    let mut non_empty = Vec::new();
    for (index, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = serde_norway::Value::deserialize(doc).map_err(|e| e.to_string())?;
        if !value.is_null() {
            non_empty.push(index);
        }
    }
    match non_empty.as_slice() {
        [] => Ok(None),
        [index] => {
            // Deserialise the chosen document again, straight into `T`, so type errors
            // keep their line and column.
            let doc = serde_norway::Deserializer::from_str(text)
                .nth(*index)
                .ok_or_else(|| "document vanished on the second read".to_owned())?;
            T::deserialize(doc).map(Some).map_err(|e| e.to_string())
        }
        [_, second, ..] => Err(format!(
            "holds more than one non-empty YAML document (document {} is not empty); \
             processkit files carry exactly one",
            second + 1
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::first_document;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Doc {
        name: String,
        #[serde(default)]
        note: String,
    }

    #[test]
    fn framed_commented_block_scalars_crlf_and_unknown_keys() {
        let text = "---\r\n# a comment\r\nname: x   # trailing comment\r\nextra: {a: 1}\r\nnote: >\r\n  folded\r\n  text\r\n---\r\n";
        let doc: Doc = first_document(text).unwrap().unwrap();
        assert_eq!(doc.name, "x");
        assert_eq!(doc.note, "folded text\n");
        let doc: Doc = first_document("---\n---\nname: y\nnote: |\n  a\n  b\n")
            .unwrap()
            .unwrap();
        assert_eq!(doc.note, "a\nb\n");
    }

    #[test]
    fn empty_and_two_documents() {
        assert_eq!(first_document::<Doc>("").unwrap(), None);
        assert_eq!(first_document::<Doc>("---\n---\n").unwrap(), None);
        let err = first_document::<Doc>("---\nname: a\n---\nname: b\n").unwrap_err();
        assert!(
            err.contains("more than one non-empty YAML document"),
            "{err}"
        );
        let err = first_document::<Doc>("---\nname: [\n").unwrap_err();
        assert!(err.contains("line"), "{err}");
    }
}
