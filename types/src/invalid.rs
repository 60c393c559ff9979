//! A failed check, keyed by the field it is about, so a form shows each message beside its field
//! and the REST API returns `{field → message}` (no one guesses the field from the wording).

use serde::{Deserialize, Serialize};
use std::fmt;

/// One problem with the input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FieldError {
    /// The input field, as named in the input type (`subject`, `from_email`, `recurrence`…);
    /// `None` when the problem is with the whole request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Safe to show to the user.
    pub message: String,
}

/// Input that failed validation: at least one [`FieldError`]. Its `Display` is every message,
/// for surfaces that show one line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invalid {
    pub errors: Vec<FieldError>,
}

impl Invalid {
    /// A problem with the request as a whole.
    pub fn new(message: impl Into<String>) -> Self {
        Self { errors: vec![FieldError { field: None, message: message.into() }] }
    }

    /// A problem with one field.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        Self { errors: vec![FieldError { field: Some(field.to_string()), message: message.into() }] }
    }

    /// Files messages that name no field under `field` (a value parsed for that field).
    pub fn at(mut self, field: &str) -> Self {
        for e in &mut self.errors {
            e.field.get_or_insert_with(|| field.to_string());
        }
        self
    }

    /// The message for `field`, if any.
    pub fn message_for(&self, field: &str) -> Option<&str> {
        self.errors.iter().find(|e| e.field.as_deref() == Some(field)).map(|e| e.message.as_str())
    }
}

/// One item of a bulk request that was not taken, by its position in the request (the rest
/// were).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Rejected {
    /// Position in the request's array.
    pub index: usize,
    pub reason: String,
}

/// Collects the problems of several checks, so a form learns about every field at once.
#[derive(Default)]
pub struct Problems(Vec<FieldError>);

impl Problems {
    pub fn check(&mut self, result: Result<(), Invalid>) {
        self.take(result);
    }

    /// The value, or `None` with its problems recorded.
    pub fn take<T>(&mut self, result: Result<T, Invalid>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.extend(e.errors);
                None
            }
        }
    }

    /// Records a problem with `field`.
    pub fn add(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(FieldError { field: Some(field.to_string()), message: message.into() });
    }

    pub fn into_result(self) -> Result<(), Invalid> {
        if self.0.is_empty() { Ok(()) } else { Err(Invalid { errors: self.0 }) }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for e in &self.errors {
            if !first {
                f.write_str(" ")?;
            }
            f.write_str(&e.message)?;
            first = false;
        }
        Ok(())
    }
}

impl std::error::Error for Invalid {}
