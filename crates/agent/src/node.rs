//! The node's own files, as janusd keeps them in its controller directory:
//! `address`, `ca.crt`, `fleet-root.crt`, `token`, `enrollment.json`,
//! `registered`, the node CA under `pki/`, and the applied trust under `fleet/`.
//!
//! Invariants: every write is durable ([`write_atomic`]); the enrollment and
//! the node CA's key are 0600; user-data is validated as the node validates
//! its NoCloud volume, and provisions the directory only once (first boot),
//! so a token the node dropped never comes back.

use std::io;
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use janus_core::durable::{ensure_private_dir, remove_durably, with_path, write_atomic};
use janus_core::pki::mint;

/// What went wrong with the node's own files.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A file could not be read or written.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The user-data is not what a node accepts.
    #[error("user-data: {0}")]
    UserData(String),
    /// The node CA could not be minted.
    #[error(transparent)]
    Mint(#[from] mint::MintError),
    /// A file holds something the node refuses.
    #[error("{0}")]
    Invalid(String),
}

/// The saved enrollment: `{"id","secret"}`, kept while waiting for approval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Enrollment {
    /// The id the endpoint gave.
    pub id: String,
    /// The poll secret sent with the announcement.
    #[serde(serialize_with = "janus_core::protocol::expose")]
    pub secret: SecretString,
}

/// The node's directory (janusd's `/etc/janus/controller`, plus `pki/` and `fleet/`).
#[derive(Debug, Clone)]
pub struct NodeDir {
    /// The directory.
    pub dir: PathBuf,
}

/// What a node is provisioned with.
#[derive(Clone)]
pub struct Provisioning {
    /// The endpoint's `host:port`.
    pub address: String,
    /// `ca.crt`: the endpoint's CA in certificate mode (PEM, may be empty).
    pub controller_ca: Vec<u8>,
    /// `fleet-root.crt`: the fleet root in fleet mode (PEM, may be empty).
    pub fleet_root: Vec<u8>,
    /// The registration token (empty when none, or once spent).
    pub token: SecretString,
}

impl std::fmt::Debug for Provisioning {
    // The certificates' bytes would fill a screen: left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provisioning")
            .field("address", &self.address)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl NodeDir {
    /// Opens (and makes) the node's directory.
    pub fn open(dir: &Path) -> Result<Self, NodeError> {
        ensure_private_dir(dir)?;
        Ok(NodeDir { dir: dir.to_path_buf() })
    }

    /// A file in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Whether the node finished registering (the `registered` mark); a
    /// mark that cannot be looked at counts as made (janusd never registers twice).
    pub fn is_registered(&self) -> bool {
        janus_core::durable::present(&self.path("registered")).unwrap_or(true)
    }

    /// The provisioned settings; `None` when there is no `address` (no registration at all).
    pub fn provisioning(&self) -> Result<Option<Provisioning>, NodeError> {
        let Some(address) = read_optional(&self.path("address"))? else { return Ok(None) };
        let address = String::from_utf8_lossy(&address).trim().to_string();
        if address.is_empty() {
            return Err(NodeError::Invalid(format!("{} is empty", self.path("address").display())));
        }
        let controller_ca = read_optional(&self.path("ca.crt"))?.unwrap_or_default();
        let fleet_root = read_optional(&self.path("fleet-root.crt"))?.unwrap_or_default();
        let token = read_optional(&self.path("token"))?
            .map(|t| String::from_utf8_lossy(&t).trim().to_string())
            .unwrap_or_default();
        Ok(Some(Provisioning { address, controller_ca, fleet_root, token: token.into() }))
    }

    /// The saved enrollment, if any.
    pub fn enrollment(&self) -> Result<Option<Enrollment>, NodeError> {
        let path = self.path("enrollment.json");
        match read_optional(&path)? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| NodeError::Invalid(format!("{}: {e}", path.display()))),
        }
    }

    /// Saves the enrollment, 0600.
    pub fn save_enrollment(&self, enrollment: &Enrollment) -> Result<(), NodeError> {
        let json = serde_json::to_vec(enrollment).expect("strings serialise");
        Ok(write_atomic(&self.path("enrollment.json"), &json, 0o600)?)
    }

    /// Drops the enrollment (admitted, or forgotten by the endpoint).
    pub fn remove_enrollment(&self) -> Result<(), NodeError> {
        Ok(remove_durably(&self.path("enrollment.json"))?)
    }

    /// Drops the token: it was spent, or an enrollment holds it.
    pub fn remove_token(&self) -> Result<(), NodeError> {
        Ok(remove_durably(&self.path("token"))?)
    }

    /// The mark: RFC 3339 UTC time and a newline.
    pub fn mark_registered(&self) -> Result<(), NodeError> {
        let now = janus_core::clock::now_rfc3339();
        Ok(write_atomic(&self.path("registered"), format!("{now}\n").as_bytes(), 0o644)?)
    }

    /// The node CA: from `--node-ca PREFIX`, else `pki/ca.crt`, minted with
    /// the real node's profile on first run. Returns its PEM.
    pub fn node_ca(&self, given: Option<&Path>, hostname: &str) -> Result<String, NodeError> {
        if let Some(prefix) = given {
            let path = janus_core::pki::pair::with_suffix(prefix, "crt");
            return std::fs::read_to_string(&path).map_err(|e| NodeError::Io(with_path(e, &path)));
        }
        let pki = self.path("pki");
        let crt = pki.join("ca.crt");
        if let Some(pem) = read_optional(&crt)? {
            return Ok(String::from_utf8_lossy(&pem).to_string());
        }
        ensure_private_dir(&pki)?;
        let minted = mint::mint_node_ca(hostname)?;
        janus_core::pki::pair::write_pair(&pki.join("ca"), &minted, false)?;
        Ok(minted.cert_pem)
    }

    /// Provisions the directory from a NoCloud user-data JSON, on first boot only.
    pub fn provision_from_user_data(&self, user_data: &[u8]) -> Result<Option<String>, NodeError> {
        let data = UserData::parse(user_data)?;
        // Provisioned already, or that cannot be told: never provisioned twice.
        if janus_core::durable::present(&self.path("address")).unwrap_or(true) || self.is_registered() {
            return Ok(data.hostname);
        }
        let Some(address) = data.controller_address else { return Ok(data.hostname) };
        write_atomic(&self.path("ca.crt"), data.controller_ca_cert.unwrap_or_default().as_bytes(), 0o644)?;
        if let Some(root) = data.controller_fleet_root_cert {
            write_atomic(&self.path("fleet-root.crt"), root.as_bytes(), 0o644)?;
        }
        if let Some(token) = data.registration_token.filter(|t| !t.expose_secret().trim().is_empty()) {
            write_atomic(&self.path("token"), token.expose_secret().trim().as_bytes(), 0o600)?;
        }
        // The address last: it is what says "provisioned".
        write_atomic(&self.path("address"), address.trim().as_bytes(), 0o644)?;
        Ok(data.hostname)
    }
}

/// The NoCloud user-data keys the node reads for registration.
#[derive(Debug, Default)]
pub struct UserData {
    /// `controller.address`.
    pub controller_address: Option<String>,
    /// `controller.ca_cert`.
    pub controller_ca_cert: Option<String>,
    /// `controller.fleet_root_cert`.
    pub controller_fleet_root_cert: Option<String>,
    /// `controller.registration_token`.
    pub registration_token: Option<SecretString>,
    /// `network.hostname`.
    pub hostname: Option<String>,
}

impl UserData {
    /// Validates as nocloud.go does: address and CA come together; a token
    /// (or a fleet root) without them is refused.
    pub fn parse(bytes: &[u8]) -> Result<Self, NodeError> {
        let bad = |m: &str| NodeError::UserData(m.to_string());
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| bad(&format!("not JSON: {e}")))?;
        let obj = value.as_object().ok_or_else(|| bad("not a JSON object"))?;
        let string = |key: &str| -> Result<Option<String>, NodeError> {
            match obj.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) if s.trim().is_empty() => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(&format!("{key} must be a string"))),
            }
        };
        let data = UserData {
            controller_address: string("controller_address")?,
            controller_ca_cert: string("controller_ca_cert")?,
            controller_fleet_root_cert: string("controller_fleet_root_cert")?,
            registration_token: string("registration_token")?.map(SecretString::from),
            hostname: obj
                .get("network")
                .and_then(|n| n.get("hostname"))
                .and_then(|h| h.as_str())
                .map(str::to_string),
        };
        match (&data.controller_address, &data.controller_ca_cert) {
            (Some(_), None) => return Err(bad("controller_address needs controller_ca_cert")),
            (None, Some(_)) => return Err(bad("controller_ca_cert needs controller_address")),
            (None, None) if data.registration_token.is_some() => {
                return Err(bad("registration_token needs controller_address and controller_ca_cert"));
            }
            (None, None) if data.controller_fleet_root_cert.is_some() => {
                return Err(bad(
                    "controller_fleet_root_cert needs controller_address and controller_ca_cert",
                ));
            }
            _ => {}
        }
        if let Some(address) = &data.controller_address {
            janus_core::protocol::check_address(address.trim())
                .map_err(|_| bad("controller_address must be host:port"))?;
        }
        for (key, pem) in [
            ("controller_ca_cert", &data.controller_ca_cert),
            ("controller_fleet_root_cert", &data.controller_fleet_root_cert),
        ] {
            if let Some(pem) = pem {
                janus_core::pki::first_certificate(pem.as_bytes(), key)
                    .map_err(|_| bad(&format!("{key} holds no PEM certificate")))?;
            }
        }
        Ok(data)
    }
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, NodeError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(NodeError::Io(with_path(e, path))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_secret() {
        let enrollment = Enrollment { id: "id-1".into(), secret: "s3cr3t-enrollment".into() };
        let provisioning = Provisioning {
            address: "10.0.2.2:8443".into(),
            controller_ca: vec![],
            fleet_root: vec![],
            token: "s3cr3t-token".into(),
        };
        let user_data = UserData { registration_token: Some("s3cr3t-token".into()), ..Default::default() };
        for shown in [format!("{enrollment:?}"), format!("{provisioning:?}"), format!("{user_data:?}")] {
            assert!(!shown.contains("s3cr3t") && shown.contains("REDACTED"), "{shown}");
        }
    }

    #[test]
    fn user_data_is_validated_as_the_node_does() {
        let ca = mint::mint_node_ca("x").unwrap().cert_pem;
        let ok = serde_json::json!({"controller_address": "10.0.2.2:8443", "controller_ca_cert": ca,
            "controller_fleet_root_cert": ca, "registration_token": "t", "network": {"hostname": "edge-2"}});
        let data = UserData::parse(ok.to_string().as_bytes()).unwrap();
        assert_eq!(data.hostname.as_deref(), Some("edge-2"));
        for bad in [
            serde_json::json!({"controller_address": "10.0.2.2:8443"}),
            serde_json::json!({"controller_ca_cert": ca}),
            serde_json::json!({"registration_token": "t"}),
            serde_json::json!({"controller_address": "nope", "controller_ca_cert": ca}),
            serde_json::json!({"controller_address": "h:1", "controller_ca_cert": "not pem"}),
            serde_json::json!([]),
        ] {
            assert!(UserData::parse(bad.to_string().as_bytes()).is_err(), "{bad}");
        }
        assert!(UserData::parse(b"{}").unwrap().controller_address.is_none());
    }

    #[test]
    fn provisioning_happens_once() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeDir::open(dir.path()).unwrap();
        let ca = mint::mint_node_ca("x").unwrap().cert_pem;
        let ud = serde_json::json!({"controller_address": "h:1", "controller_ca_cert": ca, "registration_token": "t"});
        node.provision_from_user_data(ud.to_string().as_bytes()).unwrap();
        assert_eq!(node.provisioning().unwrap().unwrap().token.expose_secret(), "t");
        node.remove_token().unwrap();
        node.provision_from_user_data(ud.to_string().as_bytes()).unwrap();
        assert_eq!(
            node.provisioning().unwrap().unwrap().token.expose_secret(),
            "",
            "a dropped token stays dropped"
        );
    }
}
