//! Manifest files as `kubectl get -o yaml` writes them: YAML documents to JSON, in one native pass.
//!
//! PyYAML, even with libyaml's C parser, builds Python objects node by node and loads a 1,213-node
//! snapshot about 50x slower than the same snapshot as JSON; this reads the YAML in Rust and hands
//! Python one JSON array of the documents.

use crate::error::{Error, Result};
use serde::Deserialize;

/// Every non-empty YAML document of `text`, as one JSON array. `file` names the input in errors:
/// a malformed document is a decode [`Error`] whose object is `file:line:column` (where the
/// parser stopped, when it says) and whose field is the document (`document 1`, 0-based).
pub fn yaml_documents_to_json(file: &str, text: &[u8]) -> Result<Vec<u8>> {
    let mut documents = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_slice(text).enumerate() {
        let value = serde_json::Value::deserialize(document).map_err(|e| yaml_error(file, i, &e))?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    serde_json::to_vec(&documents).map_err(|e| Error::internal(format!("encode {file} as JSON: {e}")))
}

/// The position moves into the object (`file:line:column`, as the trace CSV errors); the parser's
/// own " at line L column C" for that same position is dropped from the message.
fn yaml_error(file: &str, document: usize, e: &serde_yaml::Error) -> Error {
    let message = e.to_string();
    let (object, message) = match e.location() {
        Some(at) => {
            let own = format!(" at line {} column {}", at.line(), at.column());
            (format!("{file}:{}:{}", at.line(), at.column()), message.replacen(&own, "", 1))
        }
        None => (file.to_owned(), message),
    };
    Error::decode(object, message).field(format!("document {document}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> serde_json::Value {
        serde_json::from_slice(&yaml_documents_to_json("m.yaml", text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn multi_document_yaml_becomes_an_array_without_empty_documents() {
        let out = json("---\nkind: Node\nmetadata: {name: a}\n---\n---\nkind: Pod\nspec:\n  containers: [{name: c}]\n");
        assert_eq!(
            out,
            serde_json::json!([{"kind": "Node", "metadata": {"name": "a"}}, {"kind": "Pod", "spec": {"containers": [{"name": "c"}]}}])
        );
    }

    #[test]
    fn scalars_keep_kubectl_types() {
        let out = json("a: \"2024-01-01T00:00:00Z\"\nb: 3\nc: \"3\"\nd: true\ne: 1.5\nf: null\n");
        assert_eq!(
            out[0],
            serde_json::json!({"a": "2024-01-01T00:00:00Z", "b": 3, "c": "3", "d": true, "e": 1.5, "f": null})
        );
    }

    #[test]
    fn bad_yaml_is_a_decode_error_naming_file_position_and_document() {
        let err = yaml_documents_to_json("snap.yaml", b"kind: Node\n---\nmetadata: [unclosed\n").unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Decode);
        assert_eq!((err.object.as_str(), err.field.as_str()), ("snap.yaml:4:1", "document 1"));
        assert!(!err.message.contains("line 4 column 1"), "position said twice: {err}");
        assert!(err.message.contains("flow sequence"), "{err}");
        assert!(err.to_string().starts_with("decode snap.yaml:4:1: document 1: did not find expected"), "{err}");
    }

    #[test]
    fn every_malformed_input_is_one_line_naming_the_file() {
        let cases: [&[u8]; 5] =
            [b"\xff\xfe\x00\x01", b"? [a, b]\n: 1\n", b"- &a [*a]\n", b"key: \"unterminated\n", b"\t- tab indented\n"];
        for text in cases {
            let err = yaml_documents_to_json("in.yaml", text).unwrap_err();
            let line = err.to_string();
            assert!(line.starts_with("decode in.yaml"), "{line}");
            assert!(!line.contains('\n'), "{line:?}");
            assert_eq!(err.field, "document 0", "{line}");
        }
    }
}
