//! Applying the fleet's trust as janusd does (`CheckTrust`, then `Fleet.Set`:
//! the root must be a self-signed CA, the bundle must verify under it at a
//! version no lower than the one held): all checks first, then durable writes, so a
//! refused trust leaves nothing behind and is retried whole.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::node::{NodeDir, NodeError};
use janus_core::durable::{ensure_private_dir, write_atomic};
use janus_core::pki::{self, SignedBundle};
use janus_core::protocol::Trust;

/// What was applied: the root's common name and the bundle version.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The fleet root's common name.
    pub root_cn: String,
    /// The bundle version now held.
    pub version: u64,
}

/// Checks `trust` against what the node was provisioned with and already
/// trusts, then writes `fleet/root.crt` and the canonical `fleet/bundle.json`.
pub fn apply(node: &NodeDir, provisioned_root: &[u8], trust: &Trust) -> Result<Applied, NodeError> {
    let refuse = |m: String| NodeError::Invalid(m);
    let root_der = pki::first_certificate(trust.root_cert.as_bytes(), "root_cert")
        .map_err(|_| refuse("the fleet root isn't a self-signed CA".into()))?;
    if !provisioned_root.is_empty() {
        let want =
            pki::first_certificate(provisioned_root, "fleet-root.crt").map_err(|e| refuse(e.to_string()))?;
        if want != root_der {
            return Err(refuse(
                "the Controller hands the trust of another fleet than the one this node was provisioned with"
                    .into(),
            ));
        }
    }
    pki::check_self_signed_ca(&root_der, "root_cert")
        .map_err(|_| refuse("the fleet root isn't a self-signed CA".into()))?;
    let fleet_dir = node.path("fleet");
    let pinned_path = fleet_dir.join("root.crt");
    // Unreadable is not "no pin": a pin this node cannot read must never be
    // overwritten by what the Controller sent.
    let pinned = read_if_present(&pinned_path)?;
    if let Some(pinned) = &pinned {
        let pinned_der =
            pki::first_certificate(pinned, "fleet/root.crt").map_err(|e| refuse(e.to_string()))?;
        if pinned_der != root_der {
            return Err(refuse(
                "the Controller hands another fleet root than the one this node trusts".into(),
            ));
        }
    }
    let bundle = BASE64.decode(trust.bundle.as_bytes()).map_err(|_| refuse("no bundle".into()))?;
    if bundle.is_empty() {
        return Err(refuse("no bundle".into()));
    }
    let payload = pki::verify_bundle(&root_der, &bundle).map_err(|e| refuse(e.to_string()))?;
    let canonical = canonical(&bundle)?;
    let bundle_path = fleet_dir.join("bundle.json");
    if let Some(current) = read_if_present(&bundle_path)? {
        let have = pki::verify_bundle(&root_der, &current).map_err(|e| refuse(e.to_string()))?.version;
        if payload.version < have {
            return Err(refuse(format!("the node already has a newer bundle, version {have}")));
        }
        if payload.version == have && canonical != current {
            return Err(refuse(format!("the node already has another bundle version {have}")));
        }
    }
    let root_cn = pki::parse(&root_der, "root_cert")
        .ok()
        .and_then(|c| {
            c.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok().map(str::to_string))
        })
        .unwrap_or_default();
    ensure_private_dir(&fleet_dir)?;
    if pinned.is_none() {
        write_atomic(&pinned_path, trust.root_cert.as_bytes(), 0o644)?;
    }
    write_atomic(&bundle_path, &canonical, 0o644)?;
    Ok(Applied { root_cn, version: payload.version })
}

/// The file's bytes, `None` when it is missing, an error when it cannot be read.
fn read_if_present(path: &std::path::Path) -> Result<Option<Vec<u8>>, NodeError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(janus_core::durable::with_path(e, path).into()),
    }
}

/// Go's `json.Marshal(SignedBundle)`: compact `{"payload","signature"}`.
fn canonical(bundle: &[u8]) -> Result<Vec<u8>, NodeError> {
    let signed: SignedBundle =
        serde_json::from_slice(bundle).map_err(|e| NodeError::Invalid(format!("the bundle: {e}")))?;
    Ok(serde_json::to_vec(&signed).expect("strings serialise"))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests write and look at files by hand, as an admin does")]
mod tests {
    use super::*;
    use janus_core::pki::mint;
    use secrecy::ExposeSecret;

    fn trust_of(fleet: &mint::FleetMaterial) -> Trust {
        Trust { root_cert: fleet.root.cert_pem.clone(), bundle: BASE64.encode(&fleet.bundle_json) }
    }

    #[test]
    fn applies_once_and_follows_the_version_rules() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeDir::open(dir.path()).unwrap();
        let fleet = mint::mint_fleet("F", 2).unwrap();
        let root = fleet.root.cert_pem.as_bytes();
        let applied = apply(&node, root, &trust_of(&fleet)).unwrap();
        assert_eq!((applied.version, applied.root_cn.as_str()), (2, "F root"));
        let stored = std::fs::read(node.path("fleet/bundle.json")).unwrap();
        assert!(stored.starts_with(b"{\"payload\":\"") && !stored.contains(&b'\n'), "canonical and compact");
        // The same bundle again is a no-op success (a node that lost power mid-apply).
        apply(&node, root, &trust_of(&fleet)).unwrap();
        // An older one is refused; a different one of the same version too.
        let older = mint::sign_bundle(
            fleet.root.key_pem.expose_secret(),
            std::slice::from_ref(&fleet.issuing.cert_pem),
            1,
        )
        .unwrap();
        let older = Trust { bundle: BASE64.encode(&older), ..trust_of(&fleet) };
        assert!(apply(&node, root, &older).unwrap_err().to_string().contains("newer bundle"));
        let newer = mint::sign_bundle(
            fleet.root.key_pem.expose_secret(),
            std::slice::from_ref(&fleet.issuing.cert_pem),
            3,
        )
        .unwrap();
        let newer = Trust { bundle: BASE64.encode(&newer), ..trust_of(&fleet) };
        assert_eq!(apply(&node, root, &newer).unwrap().version, 3);
    }

    #[test]
    fn another_fleet_is_refused_and_nothing_written() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeDir::open(dir.path()).unwrap();
        let ours = mint::mint_fleet("Ours", 1).unwrap();
        let theirs = mint::mint_fleet("Theirs", 1).unwrap();
        let err = apply(&node, ours.root.cert_pem.as_bytes(), &trust_of(&theirs)).unwrap_err();
        assert!(err.to_string().contains("another fleet"), "{err}");
        assert!(!node.path("fleet").exists());
        // A root that is not a CA.
        let leaf = mint::mint_controller(&ours.issuing, 1, &[]).unwrap();
        let not_ca = Trust { root_cert: leaf.cert_pem, ..trust_of(&ours) };
        assert!(apply(&node, b"", &not_ca).unwrap_err().to_string().contains("self-signed CA"));
        assert!(!node.path("fleet").exists());
    }

    #[test]
    fn a_pinned_root_that_cannot_be_read_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeDir::open(dir.path()).unwrap();
        let ours = mint::mint_fleet("Ours", 1).unwrap();
        let theirs = mint::mint_fleet("Theirs", 1).unwrap();
        apply(&node, b"", &trust_of(&ours)).unwrap();
        // The pin unreadable (here a directory in its place: EISDIR).
        let pin = node.path("fleet/root.crt");
        std::fs::remove_file(&pin).unwrap();
        std::fs::create_dir(&pin).unwrap();
        let refused = apply(&node, b"", &trust_of(&theirs)).unwrap_err();
        assert!(refused.to_string().contains("root.crt"), "{refused}");
        assert!(pin.is_dir(), "nothing written over it");
        let bundle = std::fs::read(node.path("fleet/bundle.json")).unwrap();
        assert!(
            pki::verify_bundle(&pki::first_certificate(ours.root.cert_pem.as_bytes(), "r").unwrap(), &bundle)
                .is_ok()
        );
    }
}
