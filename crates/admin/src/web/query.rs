//! The one query parser of the admin listener: a query string's pairs,
//! each key one the route takes, else refused naming those it does.
//!
//! Invariants: an unknown key is refused (`invalid_request`), never
//! ignored: a misspelt filter must not widen a listing.

use crate::error::{AdminError, Code};

/// The pairs of `raw` (a query string, `None` for none), each key among `known`.
pub(crate) fn pairs(raw: Option<&str>, known: &[&str]) -> Result<Vec<(String, String)>, AdminError> {
    let mut out = Vec::new();
    for (key, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if !known.contains(&key.as_ref()) {
            let takes = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            return Err(AdminError::new(
                Code::InvalidRequest,
                format!(
                    "{:?} is not a parameter of this route: it takes {takes}",
                    janus_core::terminal::escape(&key)
                ),
            ));
        }
        out.push((key.into_owned(), value.into_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_refused_and_known_ones_kept_in_order() {
        let got = pairs(Some("state=pending&label=a%3Db&state=rejected"), &["state", "label"]).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[1], ("label".into(), "a=b".into()));
        let refused = pairs(Some("stat=pending"), &["state"]).unwrap_err();
        assert_eq!(refused.code, Code::InvalidRequest);
        assert!(pairs(None, &[]).unwrap().is_empty());
    }
}
