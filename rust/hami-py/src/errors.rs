//! The one error policy at the boundary: every engine error raised as `EngineError` with `.kind`,
//! `.object`, `.field` and `.message`; a panic never crosses the FFI.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

create_exception!(
    hami_fast._native,
    EngineError,
    PyValueError,
    "Bad input: the message names the object and the field."
);

/// An `EngineError` carrying the typed error's parts: `.kind`, `.object`, `.field`, and `.message`
/// without the other two (str each).
pub(crate) fn engine_error(error: hami_core::Error) -> PyErr {
    Python::attach(|py| {
        let err = EngineError::new_err(error.to_string());
        let value = err.value(py);
        let parts = [
            ("kind", error.kind.as_str()),
            ("object", &error.object),
            ("field", &error.field),
            ("message", &error.message),
        ];
        for (name, text) in parts {
            if let Err(e) = value.setattr(name, text) {
                return e;
            }
        }
        err
    })
}

/// Runs engine code without the GIL; a panic becomes an EngineError instead of crossing the FFI boundary.
pub(crate) fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, hami_core::Error> + Send) -> PyResult<T> {
    py.detach(|| {
        catch_unwind(AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(hami_core::Error::internal("internal error in hami-core (panic); input rejected")))
    })
    .map_err(engine_error)
}

/// Runs short engine code with the GIL held (see [`DECIDE_WITH_GIL_MAX`]); a panic becomes an EngineError.
/// Only with the engine already locked: waiting for the lock with the GIL held would stall every thread.
pub(crate) fn keep_gil<T>(f: impl FnOnce() -> Result<T, hami_core::Error>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(hami_core::Error::internal("internal error in hami-core (panic); input rejected")))
        .map_err(engine_error)
}

/// A wire document as JSON bytes (see `hami_core::wire`).
pub(crate) fn to_json(value: &impl serde::Serialize, what: &str) -> Result<Vec<u8>, hami_core::Error> {
    serde_json::to_vec(value).map_err(|e| hami_core::Error::internal(format!("encode {what}: {e}")))
}

/// A malformed HAMi annotation value: the codec's error, its field prefixed with the annotation's key.
pub(crate) fn annotation_error(key: &str, error: hami_core::Error) -> PyErr {
    engine_error(error.in_field(format_args!("annotation {key}")))
}
