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

/// One position, in the object (`file:line:column`, as the trace CSV errors). When the parser
/// names the construct it was in (", while parsing a flow mapping at line 4 column 13"), that
/// construct's start is the position, since an unclosed bracket or quote is found only where the
/// parser gave up (often the end of the file); otherwise where it stopped.
fn yaml_error(file: &str, document: usize, e: &serde_yaml::Error) -> Error {
    let message = e.to_string();
    let Some(at) = e.location() else {
        return Error::decode(file, message).field(format!("document {document}"));
    };
    let message = message.replacen(&format!(" at line {} column {}", at.line(), at.column()), "", 1);
    let (position, message) = match within_construct(&message) {
        Some((problem, construct, line, column)) => {
            (format!("{line}:{column}"), format!("{problem} in the {construct} that starts here"))
        }
        None => (format!("{}:{}", at.line(), at.column()), message),
    };
    Error::decode(format!("{file}:{position}"), message).field(format!("document {document}"))
}

/// `"<problem>, while parsing a <construct> at line L column C"` -> (problem, construct, L, C).
fn within_construct(message: &str) -> Option<(&str, &str, &str, &str)> {
    let (problem, context) = message.split_once(", while ")?;
    let (what, position) = context.rsplit_once(" at line ")?;
    let (line, column) = position.split_once(" column ")?;
    let construct = what.split_once(' ')?.1;
    let construct = construct.strip_prefix("a ").or_else(|| construct.strip_prefix("an ")).unwrap_or(construct);
    Some((problem, construct, line, column))
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
        assert_eq!((err.object.as_str(), err.field.as_str()), ("snap.yaml:3:11", "document 1"));
        assert!(!err.message.contains("line "), "one position only: {err}");
        assert_eq!(
            err.to_string(),
            "decode snap.yaml:3:11: document 1: did not find expected ',' or ']' in the flow sequence that starts here"
        );
        let err = yaml_documents_to_json("s.yaml", b"a: 1\nb: [1, 2\n").unwrap_err();
        assert!(!err.to_string().contains("line "), "{err}");
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
