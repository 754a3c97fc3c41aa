//! The engine's one error type: what went wrong (`kind`), in which object, in which field.
//!
//! Its `Display` is the one line a user sees: `[decode ]<object>: <field>: <message>`, empty parts
//! left out.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The bytes are not the JSON (or CSV) they should be.
    Decode,
    /// Well-formed input with a value the engine cannot use (an annotation, a quantity, a policy).
    Invalid,
    /// The engine's own configuration or an option is wrong.
    Config,
    /// A named object is not there.
    NotFound,
    /// A bug in the engine (a caught panic); the input was rejected, nothing was changed.
    Internal,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Decode => "decode",
            Self::Invalid => "invalid",
            Self::Config => "config",
            Self::NotFound => "not_found",
            Self::Internal => "internal",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    /// The object, as a user names it: `Pod default/p`, `Node n1`, `ExtenderArgs`, `nodes.csv:3`.
    pub object: String,
    /// The field inside it: `spec`, `annotation hami.io/vgpu-devices-allocated`, `NodeNames`.
    pub field: String,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, object: impl Into<String>, message: impl fmt::Display) -> Self {
        Self { kind, object: object.into(), field: String::new(), message: message.to_string() }
    }

    /// `decode <object>: <message>`.
    pub fn decode(object: impl Into<String>, message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Decode, object, message)
    }

    pub fn invalid(object: impl Into<String>, message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Invalid, object, message)
    }

    pub fn config(object: impl Into<String>, message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Config, object, message)
    }

    pub fn not_found(object: impl Into<String>, message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::NotFound, object, message)
    }

    pub fn internal(message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Internal, "", message)
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = field.into();
        self
    }

    /// Names the field an inner error (raised inside a value, e.g. a codec's `container slot 0`)
    /// sits in: `annotation hami.io/x` + `container slot 0` -> `annotation hami.io/x, container slot 0`.
    pub fn in_field(mut self, outer: impl fmt::Display) -> Self {
        self.field = if self.field.is_empty() { outer.to_string() } else { format!("{outer}, {}", self.field) };
        self
    }

    /// Names the object an inner error (raised without knowing it) belongs to, keeping its field.
    pub fn in_object(mut self, object: impl fmt::Display) -> Self {
        self.object = if self.object.is_empty() { object.to_string() } else { format!("{object}: {}", self.object) };
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut sep = "";
        if self.kind == ErrorKind::Decode {
            f.write_str("decode ")?;
        }
        for part in [&self.object, &self.field, &self.message] {
            if !part.is_empty() {
                write!(f, "{sep}{part}")?;
                sep = ": ";
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_joins_the_parts_that_are_set() {
        let e = Error::invalid("Pod ns/p", "not an integer").field("annotation hami.io/x");
        assert_eq!(e.to_string(), "Pod ns/p: annotation hami.io/x: not an integer");
        assert_eq!(Error::decode("ExtenderArgs", "EOF").to_string(), "decode ExtenderArgs: EOF");
        assert_eq!(
            Error::decode("Node", "bad").field("field metadata.name").to_string(),
            "decode Node: field metadata.name: bad"
        );
        assert_eq!(Error::invalid("", "x").in_object("Pod a/b").to_string(), "Pod a/b: x");
        assert_eq!(Error::internal("panic").kind.as_str(), "internal");
        let inner = Error::invalid("", "bad").field("container slot 0");
        assert_eq!(inner.in_field("annotation hami.io/x").to_string(), "annotation hami.io/x, container slot 0: bad");
        assert_eq!(Error::invalid("", "bad").in_field("annotation hami.io/x").field, "annotation hami.io/x");
    }
}
