//! The fields of a request to Nacelle's own API that takes them either way: as an
//! `application/json` object body, or as query and form parameters with the same names.

use serde_json::{Map, Value};

use crate::params::Params;
use crate::v3::V3Error;

/// The request's fields: the JSON body's when one was sent, else query and form fields.
pub(super) struct Fields<'p> {
    params: &'p Params,
    body: Option<Map<String, Value>>,
}

impl<'p> Fields<'p> {
    /// A blank body is no body; a body that is not a JSON object is a 400.
    pub(super) fn of(p: &'p Params) -> Result<Self, V3Error> {
        let body = match &p.json_body {
            None => None,
            Some(raw) if raw.iter().all(u8::is_ascii_whitespace) => None,
            Some(raw) => match serde_json::from_slice::<Value>(raw) {
                Ok(Value::Object(map)) => Some(map),
                Ok(_) => return Err(V3Error::invalid("the JSON body is not an object")),
                Err(e) => {
                    return Err(V3Error::invalid(format!(
                        "the JSON body does not parse: {e}"
                    )))
                }
            },
        };
        Ok(Fields { params: p, body })
    }

    /// A text field: from the body (a string; a JSON value of another kind as its JSON
    /// text), else a parameter.
    pub(super) fn get(&self, name: &str) -> Option<String> {
        self.body_text(name, |v| v.to_string())
    }

    /// As [`Fields::get`], but a JSON array of strings in the body is joined with commas
    /// (the form a list takes as a parameter: `events=publish,remove`).
    pub(super) fn list(&self, name: &str) -> Option<String> {
        self.body_text(name, |v| match v {
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        })
    }

    fn body_text(&self, name: &str, other: impl Fn(&Value) -> String) -> Option<String> {
        if let Some(v) = self.body.as_ref().and_then(|b| b.get(name)) {
            return match v {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                v => Some(other(v)),
            };
        }
        self.params.get(name).map(str::to_string)
    }
}
