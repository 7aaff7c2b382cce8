//! `certs`: the command that writes a development fleet, the endpoint's
//! `controller.fleet.janus` certificate (renewed only when due) and node CAs
//! to files, and re-signs a fleet's bundle at a higher version. The minting
//! itself is `pki::mint`'s, re-exported here: this is its one public path.
//!
//! Invariants: private keys are written 0600; nothing that exists is silently
//! overwritten; a re-signed bundle is checked against the root before it is
//! written.

use secrecy::ExposeSecret;
use std::path::Path;

use janus_core::durable::write_atomic;
use janus_core::pki;
pub use janus_core::pki::mint::{
    FleetMaterial, MintError, Minted, console_line, mint_admin, mint_admin_ca, mint_controller, mint_fleet,
    mint_node_ca, sign_bundle,
};
pub use janus_core::pki::pair::{with_suffix, write_pair};

/// Writes a fleet into `dir` (created 0700 when missing), refusing to touch
/// an existing one.
pub fn write_fleet(dir: &Path, fleet: &FleetMaterial) -> Result<(), MintError> {
    janus_core::durable::ensure_private_dir(dir)?;
    let files: [(&str, &[u8], u32); 5] = [
        ("root.crt", fleet.root.cert_pem.as_bytes(), 0o644),
        ("root.key", fleet.root.key_pem.expose_secret().as_bytes(), 0o600),
        ("issuing.crt", fleet.issuing.cert_pem.as_bytes(), 0o644),
        ("issuing.key", fleet.issuing.key_pem.expose_secret().as_bytes(), 0o600),
        ("bundle.json", &fleet.bundle_json, 0o644),
    ];
    for (name, _, _) in &files {
        if janus_core::durable::Presence::of(&dir.join(name)).known()? {
            return Err(MintError::Exists(dir.join(name)));
        }
    }
    for (name, bytes, mode) in files {
        // Created whole or not at all, never replaced: one made meanwhile
        // by someone else stays theirs.
        let path = dir.join(name);
        if !janus_core::durable::create_exclusive(&path, bytes, mode)? {
            return Err(MintError::Exists(path));
        }
    }
    Ok(())
}

pub mod args;
mod files;
pub mod p12;
pub use args::{AdminArgs, AdminCaArgs, CertsCommand, ControllerArgs, FleetArgs, NodeCaArgs};
pub use files::{read_minted, read_text};

/// Runs a `certs` subcommand; the returned text is what it did, for stdout.
pub fn run(command: &CertsCommand) -> Result<String, MintError> {
    match command {
        CertsCommand::Fleet(FleetArgs { out, name, bundle_version }) => match bundle_version {
            None => {
                let fleet = mint_fleet(name, 1)?;
                write_fleet(out, &fleet)?;
                Ok(format!(
                    "wrote the fleet {:?} to {} (bundle version 1); root SHA-256 {}\n\
                     Its keys (root.key, issuing.key) sign everything the fleet trusts: keep them offline; \
                     the endpoint needs only root.crt and bundle.json",
                    janus_core::terminal::escape(name),
                    out.display(),
                    pki::sha256_hex(&pki::first_certificate(fleet.root.cert_pem.as_bytes(), "root")?)
                ))
            }
            Some(version) => resign_bundle(out, *version),
        },
        CertsCommand::Controller(ControllerArgs { fleet, out, days, sans, renew_within }) => {
            let crt = with_suffix(out, "crt");
            if let Some(within) = renew_within
                && janus_core::durable::Presence::of(&crt).known()?
            {
                let pem = std::fs::read(&crt).map_err(|e| janus_core::durable::with_path(e, &crt))?;
                let der = pki::first_certificate(&pem, &crt.display().to_string())?;
                let not_after =
                    pki::parse(&der, &crt.display().to_string())?.validity().not_after.timestamp();
                let deadline = janus_core::clock::now_unix() + within.as_secs() as i64;
                if not_after > deadline {
                    return Ok(format!(
                        "{} is valid until {}: not renewed",
                        crt.display(),
                        janus_core::clock::unix_to_rfc3339(not_after)
                    ));
                }
            }
            let issuing = read_minted(&fleet.join("issuing.crt"), &fleet.join("issuing.key"))?;
            let minted = mint_controller(&issuing, *days, sans)?;
            // The directory it writes into, as `certs fleet` makes its own.
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
                janus_core::durable::ensure_private_dir(dir)?;
            }
            let (crt, key) = write_pair(out, &minted, renew_within.is_some()).map_err(|e| match e {
                MintError::Exists(path) => MintError::Invalid(format!(
                    "{} exists already; refusing to overwrite it. To renew it: --renew-within 10d \
                     (replaces it when it expires within 10 days; --renew-within 400d replaces it now)",
                    path.display()
                )),
                other => other,
            })?;
            Ok(format!("wrote {} and {} (controller.fleet.janus, {days} days)", crt.display(), key.display()))
        }
        CertsCommand::AdminCa(AdminCaArgs { out }) => {
            let minted = mint_admin_ca("janus-registration admin CA")?;
            janus_core::durable::ensure_private_dir(out)?;
            let (crt, key) = write_pair(&out.join("admin-ca"), &minted, false)?;
            Ok(format!(
                "wrote {} and {}: serve --admin-ca {} trusts the credentials `certs admin --ca {}` mints; \
                 keep admin-ca.key where the credentials are made, not on the endpoint",
                crt.display(),
                key.display(),
                crt.display(),
                out.display()
            ))
        }
        CertsCommand::Admin(args) => mint_admin_credential(args),
        CertsCommand::NodeCa(NodeCaArgs { name, out }) => {
            let minted = mint_node_ca(name)?;
            let (crt, key) = write_pair(out, &minted, false)?;
            Ok(format!("wrote {} and {}\n{}", crt.display(), key.display(), console_line(&minted.cert_pem)?))
        }
    }
}

/// `certs admin`: a credential named `name` with its scopes, refused
/// unless the audit trail can carry the name.
fn mint_admin_credential(args: &AdminArgs) -> Result<String, MintError> {
    if !janus_store::is_admin_name(&args.name) {
        return Err(MintError::Invalid(format!(
            "--name {:?}: an admin's name is 1 to 64 letters, digits, '.', '_', '-' or '@' (the audit trail names it)",
            janus_core::terminal::escape(&args.name)
        )));
    }
    if !(1..=3650).contains(&args.days) {
        return Err(MintError::Invalid("--days must be 1 to 3650".into()));
    }
    let ca = read_minted(&args.ca.join("admin-ca.crt"), &args.ca.join("admin-ca.key"))?;
    let uris: Vec<String> = args.scopes.iter().map(|s| s.uri()).collect();
    let now = janus_core::clock::now_utc();
    let minted = mint_admin(
        &ca,
        &args.name,
        &uris,
        now - time::Duration::minutes(5),
        now + time::Duration::days(args.days),
    )?;
    // The password is read (or made) and the file encoded before anything is written.
    let p12 = match args.p12 {
        true => {
            let (password, generated) = p12::password(args.p12_password_file.as_deref())?;
            Some((p12::encode(&minted, &ca.cert_pem, &args.name, &password)?, password, generated))
        }
        false => None,
    };
    let (crt, key) = write_pair(&args.out, &minted, false)?;
    let scopes: Vec<&str> = args.scopes.iter().map(|s| s.name()).collect();
    let mut said = format!(
        "wrote {} and {}: {:?} may {} for {} days",
        crt.display(),
        key.display(),
        args.name,
        scopes.join(", "),
        args.days
    );
    if let Some((bytes, password, generated)) = p12 {
        let path = p12::write(&args.out, &bytes)?;
        said.push_str(&format!(
            "\nwrote {} (PKCS#12, for a browser: docs/operating.md \"The console\")",
            path.display()
        ));
        if generated {
            // Said once, here, as `tokens add` says a token: kept nowhere else.
            said.push_str(&format!("\nits import password: {}", password.expose_secret()));
        }
    }
    Ok(said)
}

fn resign_bundle(dir: &Path, version: u64) -> Result<String, MintError> {
    let root_key = read_text(&dir.join("root.key"))?;
    let issuing = read_text(&dir.join("issuing.crt"))?;
    let root_der = pki::first_certificate(read_text(&dir.join("root.crt"))?.as_bytes(), "root.crt")?;
    let bundle_path = dir.join("bundle.json");
    if let Ok(existing) = std::fs::read(&bundle_path) {
        let current = pki::verify_bundle(&root_der, &existing)?.version;
        if version <= current {
            return Err(MintError::Invalid(format!(
                "{} is at version {current}: a re-signed bundle needs a higher version",
                bundle_path.display()
            )));
        }
    }
    let bundle = sign_bundle(&root_key, &[issuing], version)?;
    pki::verify_bundle(&root_der, &bundle)?;
    write_atomic(&bundle_path, &bundle, 0o644)?;
    Ok(format!("re-signed {} at version {version}", bundle_path.display()))
}
