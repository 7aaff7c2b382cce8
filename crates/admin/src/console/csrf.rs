//! The console's defence against requests another site makes the browser
//! send (the browser offers the admin's certificate to any page that asks,
//! so the handshake alone proves nothing about who wrote a form).
//!
//! Invariants: every `POST` under `/console` passes [`check`] before its
//! handler runs (the console adds a form route only through its `form`
//! builder, which layers the check); a form's token is
//! HMAC-SHA-256(this process's key, the credential's certificate SHA-256,
//! the browser's cookie), compared in constant time, so it is neither
//! another credential's nor another browser's; the cookie is `Secure;
//! HttpOnly; SameSite=Strict`, so a cross-site request does not carry it;
//! a request whose `Origin` is not the console's own, or whose
//! `Sec-Fetch-Site` is not `same-origin`, is refused before its token is
//! looked at. The key lives in memory only: a restart, or another replica
//! behind a balancer, makes open forms stale (refused; the page says to
//! reload), never accepted.

use axum::http::{HeaderMap, HeaderValue, header};
use hmac::{Hmac, KeyInit, Mac as _};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::credential::Caller;
use crate::error::{AdminError, Code};

/// The cookie naming this browser.
pub const COOKIE: &str = "janus_console";
/// The form field carrying the token.
pub const FIELD: &str = "csrf";

/// This process's key for form tokens.
pub struct Key([u8; 32]);

impl Key {
    /// A new random key.
    pub fn new() -> Self {
        Key(rand::random())
    }

    /// The token `caller`'s forms carry in the browser `browser` names.
    pub fn token(&self, caller: &Caller, browser: &str) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(b"janus-registration console form\0");
        mac.update(caller.certificate_sha256.as_bytes());
        mac.update(b"\0");
        mac.update(browser.as_bytes());
        janus_core::pki::hex(&mac.finalize().into_bytes())
    }
}

impl Default for Key {
    fn default() -> Self {
        Key::new()
    }
}

/// The browser's name from its cookie, when it sent a well-formed one.
pub fn browser(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, value)| *name == COOKIE && janus_core::pki::is_hex(value, 32))
        .map(|(_, value)| value.to_string())
}

/// A new browser name, and the `Set-Cookie` that gives it.
pub fn new_browser() -> (String, HeaderValue) {
    let name = janus_core::pki::hex(&rand::random::<[u8; 16]>());
    let cookie = format!("{COOKIE}={name}; Path=/console; Secure; HttpOnly; SameSite=Strict");
    let value = HeaderValue::from_str(&cookie).expect("hex and ASCII");
    (name, value)
}

/// Whether a request came from the console's own pages: its `Origin` (when
/// sent) is the console's, `Sec-Fetch-Site` (when sent) says `same-origin`,
/// and it carries the browser's cookie, which another site's request does
/// not (`SameSite=Strict`). What the event stream asks: another site must
/// not hold the credential's stream slots open through the admin's browser.
pub fn same_origin(headers: &HeaderMap) -> Result<String, AdminError> {
    origin_check(headers)?;
    browser(headers).ok_or_else(|| {
        AdminError::new(
            Code::FormInvalid,
            "the browser sent no console cookie: reload the page and try again",
        )
    })
}

/// Whether a form post may be done: `Err` says why not, for the page.
pub fn check(key: &Key, headers: &HeaderMap, caller: &Caller, token: Option<&str>) -> Result<(), AdminError> {
    let browser = same_origin(headers)?;
    let Some(token) = token else {
        return Err(AdminError::new(
            Code::FormInvalid,
            "the form carries no CSRF token: send it from the console's own page",
        ));
    };
    let expected = key.token(caller, &browser);
    if bool::from(expected.as_bytes().ct_eq(token.as_bytes())) {
        Ok(())
    } else {
        Err(AdminError::new(
            Code::FormInvalid,
            "the form's token is stale (the server restarted, or another replica answered) or not \
             this credential's: reload the page and send it again",
        ))
    }
}

fn origin_check(headers: &HeaderMap) -> Result<(), AdminError> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("(not text)");
        if origin != format!("https://{host}") {
            return Err(AdminError::new(
                Code::CrossSite,
                format!(
                    "the request was sent from another origin ({}), not this console's: refused",
                    janus_core::terminal::escape(origin)
                ),
            ));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site")
        && site.as_bytes() != b"same-origin"
    {
        return Err(AdminError::new(
            Code::CrossSite,
            "the browser says the request was sent from another site: refused",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(sha: &str) -> Caller {
        Caller { name: "alice".into(), scopes: vec![], certificate_sha256: sha.into() }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_token_is_bound_to_its_credential_and_its_browser() {
        let key = Key::new();
        let b = "ab".repeat(16);
        let token = key.token(&caller("1"), &b);
        let ok = headers(&[
            ("host", "console.example:8443"),
            ("origin", "https://console.example:8443"),
            ("sec-fetch-site", "same-origin"),
            ("cookie", &format!("other=1; {COOKIE}={b}")),
        ]);
        assert!(check(&key, &ok, &caller("1"), Some(&token)).is_ok());
        assert!(check(&key, &ok, &caller("2"), Some(&token)).is_err(), "another credential");
        assert!(check(&Key::new(), &ok, &caller("1"), Some(&token)).is_err(), "another process");
        assert!(check(&key, &ok, &caller("1"), None).is_err(), "no token");
        let other_browser = headers(&[("host", "h"), ("cookie", &format!("{COOKIE}={}", "cd".repeat(16)))]);
        assert!(check(&key, &other_browser, &caller("1"), Some(&token)).is_err(), "another browser");
    }

    #[test]
    fn another_origin_or_site_is_refused_whatever_the_token() {
        let key = Key::new();
        let b = "ab".repeat(16);
        let token = key.token(&caller("1"), &b);
        let cookie = format!("{COOKIE}={b}");
        for bad in [
            headers(&[("host", "h"), ("origin", "https://evil.example"), ("cookie", &cookie)]),
            headers(&[("host", "h"), ("origin", "null"), ("cookie", &cookie)]),
            headers(&[("host", "h"), ("origin", "http://h"), ("cookie", &cookie)]),
            headers(&[("host", "h"), ("sec-fetch-site", "cross-site"), ("cookie", &cookie)]),
            headers(&[("host", "h"), ("sec-fetch-site", "same-site"), ("cookie", &cookie)]),
            headers(&[("host", "h")]),
        ] {
            assert!(check(&key, &bad, &caller("1"), Some(&token)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_well_formed_cookie_names_a_browser() {
        assert_eq!(browser(&headers(&[("cookie", "janus_console=xyz")])), None);
        let b = "0f".repeat(16);
        assert_eq!(browser(&headers(&[("cookie", &format!("a=b;janus_console={b}"))])), Some(b));
        let (name, set) = new_browser();
        assert!(set.to_str().unwrap().contains("SameSite=Strict") && set.to_str().unwrap().contains(&name));
    }
}
