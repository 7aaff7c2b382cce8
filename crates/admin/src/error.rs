//! [`AdminError`]: why an admin request was not done, as one [`Code`] from
//! a closed list, the [`Field`] it concerns, and words each [`Surface`]
//! says in its own terms (`--count` on the command line, `count` in the
//! API, the form's label in the console).
//!
//! Invariants: the code decides the status, the log level and whether a
//! retry helps ([`Code::status`], [`Code::retry_after`]): a request the
//! schema could refuse is 400, one the state refuses 422 (never 409), a
//! state that cannot be told or written now 503 with `Retry-After`, our
//! fault 500 with its cause logged, never said; no word a program or a
//! browser reads names a command-line flag or command ([`Hint`] says the
//! way out in each surface's terms).

use std::fmt;

use janus_store::{Refusal, StoreError};

/// Who reads an answer: each says a field and a way out in its own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// The command line (`nodes`, `tokens` on the state directory).
    Command,
    /// The admin API (`/v1/…`), read by programs.
    Api,
    /// The admin console (`/console/…`), read by people in a browser.
    Console,
}

impl Surface {
    /// How the audit trail names it, before the admin's name.
    pub fn word(self) -> &'static str {
        match self {
            Surface::Command => "command",
            Surface::Api => "api",
            Surface::Console => "console",
        }
    }
}

/// Every way an admin request fails, as programs read it (`code`): the
/// list is closed, and docs/orchestrating.md says what a client does for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// A body, query or path the route does not take (malformed, an
    /// unknown field, fields that exclude each other).
    InvalidRequest,
    /// A field out of its bounds: `field` names it.
    InvalidField,
    /// An approval that names no check of the node's CA.
    CheckRequired,
    /// A file the command was given cannot be read.
    FileUnreadable,
    /// A request that changes something, not declared JSON.
    NotJson,
    /// A body larger than the listener takes.
    BodyTooLarge,
    /// A method the route does not take (`Allow` lists those it does).
    MethodNotAllowed,
    /// No such route.
    RouteNotFound,
    /// No node is named so.
    NodeNotFound,
    /// No token is named so.
    TokenNotFound,
    /// The audit trail has no events of that node.
    NoHistory,
    /// No client certificate, or one that names no admin.
    CredentialInvalid,
    /// The credential lacks the route's scope.
    ScopeMissing,
    /// A browser sent the request on another site's behalf.
    CrossSite,
    /// A console form without its valid form token (reload the page).
    FormInvalid,
    /// A console mint form sent a second time: nothing was minted again.
    FormResent,
    /// A name several nodes carry: name one by its id.
    AmbiguousName,
    /// A prefix several tokens share: give more of it.
    AmbiguousToken,
    /// The node's CA is not the one the request expects: not that node.
    FingerprintMismatch,
    /// The node was rejected: it is not approved while the rejection stands.
    NodeRejected,
    /// The node's CA was rejected: `force` approves it anyway.
    CaRejected,
    /// The console forgets only a rejected record.
    NotRejected,
    /// The console log holds no line with the node's CA yet.
    NoConsoleLine,
    /// The token given is listed already.
    TokenExists,
    /// The token given admitted a node before.
    TokenSpent,
    /// The token given was revoked before.
    TokenRevoked,
    /// The tokens file would grow past its bound.
    TokensFileFull,
    /// A file the decision depends on cannot be read or told now.
    StateUnreadable,
    /// The state's file system is full.
    DiskFull,
    /// A lock on the state was held too long by another writer.
    LockTimeout,
    /// The state did not answer within the request's deadline: what was
    /// asked may still be done.
    DeadlineExceeded,
    /// Every event-stream slot (or the credential's) is taken.
    StreamsFull,
    /// Our fault: its cause is in the server's log.
    Internal,
}

/// What a client does with a refusal: the third column of
/// docs/orchestrating.md's code table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Change the request; the same one is refused again.
    Fix,
    /// Do not retry: the state says no until an admin changes it.
    Stop,
    /// Retry the same request after `Retry-After` seconds.
    Retry,
}

impl Code {
    /// Every code, in the documentation's order.
    pub const ALL: [Code; 33] = [
        Code::InvalidRequest,
        Code::InvalidField,
        Code::CheckRequired,
        Code::FileUnreadable,
        Code::NotJson,
        Code::BodyTooLarge,
        Code::MethodNotAllowed,
        Code::RouteNotFound,
        Code::NodeNotFound,
        Code::TokenNotFound,
        Code::NoHistory,
        Code::CredentialInvalid,
        Code::ScopeMissing,
        Code::CrossSite,
        Code::FormInvalid,
        Code::FormResent,
        Code::AmbiguousName,
        Code::AmbiguousToken,
        Code::FingerprintMismatch,
        Code::NodeRejected,
        Code::CaRejected,
        Code::NotRejected,
        Code::NoConsoleLine,
        Code::TokenExists,
        Code::TokenSpent,
        Code::TokenRevoked,
        Code::TokensFileFull,
        Code::StateUnreadable,
        Code::DiskFull,
        Code::LockTimeout,
        Code::DeadlineExceeded,
        Code::StreamsFull,
        Code::Internal,
    ];

    /// Its name on the wire (`"fingerprint_mismatch"`).
    pub fn name(self) -> &'static str {
        match self {
            Code::InvalidRequest => "invalid_request",
            Code::InvalidField => "invalid_field",
            Code::CheckRequired => "check_required",
            Code::FileUnreadable => "file_unreadable",
            Code::NotJson => "not_json",
            Code::BodyTooLarge => "body_too_large",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::RouteNotFound => "route_not_found",
            Code::NodeNotFound => "node_not_found",
            Code::TokenNotFound => "token_not_found",
            Code::NoHistory => "no_history",
            Code::CredentialInvalid => "credential_invalid",
            Code::ScopeMissing => "scope_missing",
            Code::CrossSite => "cross_site",
            Code::FormInvalid => "form_invalid",
            Code::FormResent => "form_resent",
            Code::AmbiguousName => "ambiguous_name",
            Code::AmbiguousToken => "ambiguous_token",
            Code::FingerprintMismatch => "fingerprint_mismatch",
            Code::NodeRejected => "node_rejected",
            Code::CaRejected => "ca_rejected",
            Code::NotRejected => "not_rejected",
            Code::NoConsoleLine => "no_console_line",
            Code::TokenExists => "token_exists",
            Code::TokenSpent => "token_spent",
            Code::TokenRevoked => "token_revoked",
            Code::TokensFileFull => "tokens_file_full",
            Code::StateUnreadable => "state_unreadable",
            Code::DiskFull => "disk_full",
            Code::LockTimeout => "lock_timeout",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::StreamsFull => "streams_full",
            Code::Internal => "internal",
        }
    }

    /// The HTTP status it is answered with (never 409).
    pub fn status(self) -> u16 {
        match self {
            Code::InvalidRequest | Code::InvalidField | Code::CheckRequired | Code::FileUnreadable => 400,
            Code::NotJson => 415,
            Code::BodyTooLarge => 413,
            Code::MethodNotAllowed => 405,
            Code::RouteNotFound | Code::NodeNotFound | Code::TokenNotFound | Code::NoHistory => 404,
            Code::CredentialInvalid | Code::ScopeMissing | Code::CrossSite | Code::FormInvalid => 403,
            Code::FormResent
            | Code::AmbiguousName
            | Code::AmbiguousToken
            | Code::FingerprintMismatch
            | Code::NodeRejected
            | Code::CaRejected
            | Code::NotRejected
            | Code::NoConsoleLine
            | Code::TokenExists
            | Code::TokenSpent
            | Code::TokenRevoked
            | Code::TokensFileFull => 422,
            Code::StateUnreadable
            | Code::DiskFull
            | Code::LockTimeout
            | Code::DeadlineExceeded
            | Code::StreamsFull => 503,
            Code::Internal => 500,
        }
    }

    /// The seconds a client waits before the same request, where a retry helps.
    pub fn retry_after(self) -> Option<u64> {
        match self {
            Code::StateUnreadable | Code::LockTimeout | Code::DeadlineExceeded => Some(5),
            Code::StreamsFull => Some(15),
            Code::DiskFull => Some(60),
            _ => None,
        }
    }

    /// What a client does with it.
    pub fn then(self) -> Then {
        match self.status() {
            503 => Then::Retry,
            400 | 405 | 413 | 415 => Then::Fix,
            _ if matches!(
                self,
                Code::FormInvalid
                    | Code::FormResent
                    | Code::AmbiguousName
                    | Code::AmbiguousToken
                    | Code::CaRejected
                    | Code::NoConsoleLine
                    | Code::TokensFileFull
            ) =>
            {
                Then::Fix
            }
            _ => Then::Stop,
        }
    }

    /// Its title: the same for every refusal of the code (RFC 9457).
    pub fn title(self) -> &'static str {
        match self {
            Code::InvalidRequest => "The request is not what the route takes",
            Code::InvalidField => "A field is out of its bounds",
            Code::CheckRequired => "An approval needs a check of the node's CA",
            Code::FileUnreadable => "A file given cannot be read",
            Code::NotJson => "The body is not declared JSON",
            Code::BodyTooLarge => "The body is too large",
            Code::MethodNotAllowed => "The route does not take this method",
            Code::RouteNotFound => "No such route",
            Code::NodeNotFound => "No such node",
            Code::TokenNotFound => "No such token",
            Code::NoHistory => "No events of that node",
            Code::CredentialInvalid => "No valid credential",
            Code::ScopeMissing => "The credential lacks the scope",
            Code::CrossSite => "Sent on another site's behalf",
            Code::FormInvalid => "The form is not this page's",
            Code::FormResent => "The form was sent already",
            Code::AmbiguousName => "Several nodes carry that name",
            Code::AmbiguousToken => "Several tokens share that prefix",
            Code::FingerprintMismatch => "Not that node: its CA differs",
            Code::NodeRejected => "The node was rejected",
            Code::CaRejected => "The node's CA was rejected",
            Code::NotRejected => "The node is not rejected",
            Code::NoConsoleLine => "The console log names no CA yet",
            Code::TokenExists => "The token is listed already",
            Code::TokenSpent => "The token admitted a node before",
            Code::TokenRevoked => "The token was revoked",
            Code::TokensFileFull => "The tokens file is full",
            Code::StateUnreadable => "The state cannot be read now",
            Code::DiskFull => "The state's disk is full",
            Code::LockTimeout => "The state is locked by another writer",
            Code::DeadlineExceeded => "The state did not answer in time",
            Code::StreamsFull => "Every event stream is taken",
            Code::Internal => "Internal error",
        }
    }

    /// How loud its request's log line is: our fault an error, a state
    /// the admin must look at (or a refused credential) a warning.
    pub fn log_level(self) -> tracing::Level {
        match self.status() {
            500 => tracing::Level::ERROR,
            503 | 403 => tracing::Level::WARN,
            _ => tracing::Level::INFO,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field of a request, named as each surface names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The node: id, id prefix or name.
    Node,
    /// How many tokens to make.
    Count,
    /// How many nodes each token admits.
    Uses,
    /// How long the tokens admit.
    ExpiresIn,
    /// What the tokens are for.
    Description,
    /// The tokens' labels.
    Labels,
    /// A token given to register.
    Token,
    /// The token a revoke names.
    Revoked,
    /// The CA fingerprint the admin expects.
    ExpectedFingerprint,
    /// The CA fingerprint whose pending nodes an approval takes.
    CaFingerprint,
    /// A listing's state filter.
    State,
    /// A listing's label filter.
    LabelFilter,
    /// A listing's admission time filter.
    AdmittedSince,
    /// An event stream's start.
    Since,
    /// A console search.
    Search,
}

impl Field {
    /// Its name on `surface`.
    pub fn name(self, surface: Surface) -> &'static str {
        match surface {
            Surface::Command => match self {
                Field::Node => "the node (ID)",
                Field::Count => "--count",
                Field::Uses => "--uses",
                Field::ExpiresIn => "--expires-in",
                Field::Description => "--description",
                Field::Labels | Field::LabelFilter => "--label",
                Field::Token => "--token",
                Field::Revoked => "the token (TOKEN)",
                Field::ExpectedFingerprint => "--expect-ca-sha256",
                Field::CaFingerprint => "--ca-sha256",
                Field::State => "the state filter",
                Field::AdmittedSince => "--admitted-since",
                Field::Since => "--since",
                Field::Search => "the search",
            },
            Surface::Api => match self {
                Field::Node => "id",
                Field::Count => "count",
                Field::Uses => "uses",
                Field::ExpiresIn => "expires_in_seconds",
                Field::Description => "description",
                Field::Labels => "labels",
                Field::LabelFilter => "label",
                Field::Token => "token",
                Field::Revoked => "sha256_prefix",
                Field::ExpectedFingerprint => "expect_ca_sha256",
                Field::CaFingerprint => "ca_sha256",
                Field::State => "state",
                Field::AdmittedSince => "admitted_since",
                Field::Since => "since",
                Field::Search => "q",
            },
            Surface::Console => match self {
                Field::Node => "the node",
                Field::Count => "How many",
                Field::Uses => "Uses each",
                Field::ExpiresIn => "Expires in",
                Field::Description => "Description",
                Field::Labels | Field::LabelFilter => "Labels",
                Field::Token => "Token",
                Field::Revoked => "the token",
                Field::ExpectedFingerprint | Field::CaFingerprint => "CA SHA-256",
                Field::State => "State",
                Field::AdmittedSince => "Admitted since",
                Field::Since => "Since",
                Field::Search => "Search",
            },
        }
    }
}

/// The way out of a refusal, said in each surface's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    /// Approving anyway over the CA's rejection.
    Force,
    /// Forgetting the record `0` (a node id), or the one rejected, lifts the rejection.
    ForgetLifts(Option<String>),
    /// Naming the node by its id.
    NameById,
    /// Running it where the state directory is: the API does not offer it.
    OnTheStateDirectory,
}

impl Hint {
    /// The way out as `surface` says it.
    pub fn say(&self, surface: Surface) -> String {
        match (self, surface) {
            (Hint::Force, Surface::Command) => "approve it anyway with --force".into(),
            (Hint::Force, Surface::Api) => "approve it anyway with \"force\": true".into(),
            (Hint::Force, Surface::Console) => {
                "the console does not approve over a rejected CA: an admin forces it through the API or the \
                 command line"
                    .into()
            }
            (Hint::ForgetLifts(Some(id)), Surface::Command) => {
                format!("`nodes forget {id}` lifts the rejection")
            }
            (Hint::ForgetLifts(None), Surface::Command) => {
                "`nodes forget` of the record you rejected lifts the rejection".into()
            }
            (Hint::ForgetLifts(_), Surface::Api) => {
                "forgetting the record that was rejected lifts the rejection (the console's Forget, or an \
                 admin on the state directory)"
                    .into()
            }
            (Hint::ForgetLifts(_), Surface::Console) => {
                "Forget, on the page of the record that was rejected, lifts the rejection".into()
            }
            (Hint::NameById, _) => "name one by its id".into(),
            (Hint::OnTheStateDirectory, Surface::Command) => {
                "run it where the state directory is (--state)".into()
            }
            (Hint::OnTheStateDirectory, _) => "an admin does it where the state directory is".into(),
        }
    }
}

/// Why an admin request was not done; it changed nothing, unless it says so.
#[derive(Debug)]
pub struct AdminError {
    /// What programs act on.
    pub code: Code,
    /// The request's field it concerns, if one.
    pub field: Option<Field>,
    /// What went wrong, in words every surface shares (escaped; after the
    /// field's name when there is one: "must be between 1 and 100000").
    detail: String,
    /// The ways out, in each surface's terms.
    hints: Vec<Hint>,
    /// Our fault's, or the file system's, own words: logged, never said.
    cause: Option<String>,
}

impl AdminError {
    /// A refusal with `code`, said in `detail`.
    pub fn new(code: Code, detail: impl Into<String>) -> Self {
        AdminError { code, field: None, detail: detail.into(), hints: Vec::new(), cause: None }
    }

    /// A refusal of `field`: `detail` follows its name ("must be …").
    pub fn field(field: Field, detail: impl Into<String>) -> Self {
        AdminError { field: Some(field), ..AdminError::new(Code::InvalidField, detail) }
    }

    /// The same, with a way out.
    pub fn with_hint(mut self, hint: Hint) -> Self {
        self.hints.push(hint);
        self
    }

    /// The same, concerning `field`.
    pub fn on(mut self, field: Field) -> Self {
        self.field = Some(field);
        self
    }

    /// Our fault: `cause` logged, never said.
    pub fn internal(cause: impl Into<String>) -> Self {
        AdminError {
            cause: Some(cause.into()),
            ..AdminError::new(Code::Internal, "internal error: see the server's log")
        }
    }

    /// What `surface` says: the field's name, the detail, the way out.
    pub fn said(&self, surface: Surface) -> String {
        let mut said = match self.field {
            // "--count must be …", "--label: a label key must be …".
            Some(field) if self.code == Code::InvalidField && self.detail.starts_with(':') => {
                format!("{}{}", field.name(surface), self.detail)
            }
            Some(field) if self.code == Code::InvalidField => {
                format!("{} {}", field.name(surface), self.detail)
            }
            _ => self.detail.clone(),
        };
        for hint in &self.hints {
            said.push_str("; ");
            said.push_str(&hint.say(surface));
        }
        said
    }

    /// The cause withheld from the client, for the log.
    pub fn cause(&self) -> Option<&str> {
        self.cause.as_deref()
    }

    /// Whether it is about the state, not the request (503, 500): such a
    /// refusal is a page of its own in the console, not a note on a form.
    pub fn is_the_states(&self) -> bool {
        matches!(self.code.status(), 500 | 503)
    }
}

impl fmt::Display for AdminError {
    /// As the command line says it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.said(Surface::Command))?;
        match &self.cause {
            Some(cause) if self.code != Code::Internal => write!(f, " ({cause})"),
            Some(cause) => write!(f, ": {cause}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for AdminError {}

impl From<StoreError> for AdminError {
    fn from(error: StoreError) -> Self {
        let code = match &error {
            StoreError::Refused(refusal) => match refusal {
                Refusal::TokenListed => Code::TokenExists,
                Refusal::TokenRevoked => Code::TokenRevoked,
                Refusal::TokenSpent => Code::TokenSpent,
                Refusal::TooLarge { .. } => Code::TokensFileFull,
                Refusal::PrefixTooShort(_) => {
                    return AdminError::field(Field::Revoked, format!("is too short: {error}"));
                }
                Refusal::NoSuchToken => Code::TokenNotFound,
                Refusal::AmbiguousToken(_) => Code::AmbiguousToken,
            },
            StoreError::Undecidable(_) | StoreError::TokenMeta(_) | StoreError::Format(_) => {
                Code::StateUnreadable
            }
            StoreError::Io(cause) => return io_error(cause),
        };
        // Said as it is: each surface escapes what it shows.
        AdminError::new(code, error.to_string())
    }
}

impl From<std::io::Error> for AdminError {
    fn from(error: std::io::Error) -> Self {
        io_error(&error)
    }
}

/// A file system's failure: its kind said (no path, no text: they stay in
/// the log), its code by what a retry can do.
fn io_error(error: &std::io::Error) -> AdminError {
    let os = janus_core::durable::os_error(error);
    let code = match (error.kind(), os) {
        (_, Some(28 | 122)) => Code::DiskFull, // ENOSPC, EDQUOT
        (std::io::ErrorKind::TimedOut, _) => Code::LockTimeout,
        _ => Code::StateUnreadable,
    };
    let kind = match os {
        Some(os) => format!("{}, OS error {os}", error.kind()),
        None => error.kind().to_string(),
    };
    AdminError {
        cause: Some(error.to_string()),
        ..AdminError::new(code, format!("the state cannot be read or written now ({kind})"))
    }
}

/// What the admin commands return.
pub(crate) type Result<T> = std::result::Result<T, AdminError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_list_is_closed_and_never_409() {
        let names: std::collections::BTreeSet<_> = Code::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), Code::ALL.len(), "each code once");
        for code in Code::ALL {
            assert_ne!(code.status(), 409, "{code}");
            assert_eq!(serde_json::to_value(code).unwrap(), code.name());
            assert_eq!(
                code.retry_after().is_some(),
                code.status() == 503,
                "{code}: Retry-After exactly on 503"
            );
        }
    }

    /// docs/orchestrating.md's code table has a row for each code, with
    /// its status, and no code the list does not have.
    #[test]
    fn the_guide_documents_every_code_with_its_status() {
        #[allow(clippy::disallowed_methods, reason = "a test reads the guide it checks")]
        let guide =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/orchestrating.md"))
                .unwrap();
        let rows: Vec<&str> = guide.lines().filter(|l| l.starts_with("| `")).collect();
        for code in Code::ALL {
            let row = format!("| `{}` | {} |", code.name(), code.status());
            assert!(rows.iter().any(|r| r.starts_with(&row)), "docs/orchestrating.md has no row {row}");
        }
        let documented =
            rows.iter().filter(|r| r.split('|').nth(2).is_some_and(|s| s.trim().parse::<u16>().is_ok()));
        assert_eq!(documented.count(), Code::ALL.len(), "a documented code the list does not have");
    }

    #[test]
    fn a_field_is_said_in_each_surfaces_words_and_a_fault_keeps_its_path() {
        let refused = AdminError::field(Field::Count, "must be between 1 and 100000");
        assert_eq!(refused.said(Surface::Command), "--count must be between 1 and 100000");
        assert_eq!(refused.said(Surface::Api), "count must be between 1 and 100000");
        assert_eq!(refused.said(Surface::Console), "How many must be between 1 and 100000");
        let rejected = AdminError::new(Code::CaRejected, "the CA was rejected").with_hint(Hint::Force);
        for surface in [Surface::Api, Surface::Console] {
            assert!(!rejected.said(surface).contains("--"), "{}", rejected.said(surface));
        }
        let io = janus_core::durable::with_path(
            std::io::Error::from_raw_os_error(28),
            std::path::Path::new("/s/t"),
        );
        let full = AdminError::from(StoreError::Io(io));
        assert_eq!(full.code, Code::DiskFull);
        assert!(!full.said(Surface::Api).contains("/s/t") && full.said(Surface::Api).contains("OS error 28"));
        assert!(full.cause().unwrap().contains("/s/t"), "the path stays for the log");
    }
}
