//! An admin API credential: a client certificate signed by the admin CA,
//! whose common name names the admin (as the audit trail will) and whose
//! URI subject alternative names say what it may do, one
//! `urn:janus-registration:scope:<scope>` each.
//!
//! Invariants: the certificate's chain and validity were checked by the
//! TLS handshake (rustls' WebPKI verifier, against the admin CA alone);
//! what is read here only narrows it: a name the audit trail cannot carry
//! or an unknown scope gives no power, and a credential without a scope
//! may do nothing but say who it is.

/// What a credential may do.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// Make and revoke registration tokens.
    Tokens,
    /// List and show nodes, follow the event stream.
    Read,
    /// Approve a pending node (its CA's SHA-256 given).
    Approve,
    /// Reject a node.
    Reject,
}

const SCOPE_URI: &str = "urn:janus-registration:scope:";

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 4] = [Scope::Tokens, Scope::Read, Scope::Approve, Scope::Reject];

    /// Its name, as `certs admin --scope` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Tokens => "tokens",
            Scope::Read => "read",
            Scope::Approve => "approve",
            Scope::Reject => "reject",
        }
    }

    /// The URI SAN that grants it.
    pub fn uri(self) -> String {
        format!("{SCOPE_URI}{}", self.name())
    }

    fn from_uri(uri: &str) -> Option<Scope> {
        let name = uri.strip_prefix(SCOPE_URI)?;
        Scope::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Why a certificate the handshake took gives no admin power.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoPower(pub String);

/// Who called, or why their certificate gives no power: in each request's extensions.
pub type Authenticated = std::sync::Arc<Result<Caller, NoPower>>;

/// Who called, as their verified certificate says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Caller {
    /// The certificate's common name: the admin the audit trail names.
    pub name: String,
    /// What it may do.
    pub scopes: Vec<Scope>,
    /// The SHA-256 of its certificate (DER): what the console's forms are
    /// bound to, so one credential's form cannot be posted with another's.
    #[serde(skip)]
    #[schema(ignore)]
    pub certificate_sha256: String,
}

impl Caller {
    /// Reads a verified client certificate (DER); `Err` says why it gives no power.
    pub fn from_der(der: &[u8]) -> Result<Caller, NoPower> {
        let names = janus_core::pki::names_of(der, "the credential").map_err(|e| NoPower(e.to_string()))?;
        let name = names.common_name.ok_or_else(|| NoPower("the credential has no common name".into()))?;
        if !janus_store::is_admin_name(&name) {
            return Err(NoPower(
                "the credential's common name cannot name an admin (1 to 64 letters, digits, '.', '_', '-' or '@')"
                    .into(),
            ));
        }
        let mut scopes: Vec<Scope> = names.uris.iter().filter_map(|uri| Scope::from_uri(uri)).collect();
        scopes.sort();
        scopes.dedup();
        Ok(Caller { name, scopes, certificate_sha256: janus_core::pki::sha256_hex(der) })
    }

    /// Who acts when this credential calls through `surface`.
    pub fn actor(&self, surface: crate::error::Surface) -> crate::model::Actor {
        crate::model::Actor::new(surface, self.name.clone())
    }

    /// Whether it may do what `scope` allows.
    pub fn may(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}
