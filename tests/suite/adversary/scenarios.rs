//! The fourth round's findings that concern the state, as named schedules
//! of the adversary: each a fixed sequence of its operations on two
//! servers, checked by the same checker (every use spent at the end, every
//! promise asserted). A finding the checker cannot see (a connection flood,
//! a terminal escape, a certificate from another fleet, a SIGTERM on a hung
//! mount) is a named test of its own: `bounds::`, `fail_closed::`,
//! `stalls::` and the terminal's unit tests.

use super::*;

/// Runs the scenario's end (every use spent, the servers stopped) and
/// asserts the checker found nothing broken.
async fn holds(world: &Arc<World>, scenario: &str) {
    let broken = finish(world).await;
    assert!(broken.is_empty(), "{scenario}: {} promise(s) broken:\n{}", broken.len(), broken.join("\n"));
}

fn rng() -> StdRng {
    StdRng::seed_from_u64(29)
}

/// The id `ca`'s latest announcement was answered with.
fn last_id(world: &World, ca: usize) -> String {
    world.nodes.lock().unwrap().iter().rev().find(|n| n.ca == ca).map(|n| n.id.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_a_missing_metadata_file_loses_no_use() {
    let world = new_world();
    let mut rng = rng();
    let token = add_token_with(&world, 5, false).await.unwrap();
    for _ in 0..2 {
        let ca = pick_ca(&world, &mut rng, 1.0);
        send_announcement(&world, &mut rng, token.clone(), ca).await;
    }
    meta_by_hand(&world, true); // moved aside
    let ca = pick_ca(&world, &mut rng, 1.0);
    send_announcement(&world, &mut rng, token.clone(), ca).await; // refused (503), not taken for one use
    holds(&world, "a 5-use token, 2 spent, metadata moved aside").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_a_revoke_is_final_while_the_metadata_is_missing() {
    let world = new_world();
    let mut rng = rng();
    let token = add_token_with(&world, 5, false).await.unwrap();
    let backup = fs::read(world.state().join("tokens")).unwrap(); // a copy of `tokens` listing it
    meta_by_hand(&world, true);
    revoke_token(&world, token.clone()).await;
    meta_by_hand(&world, true); // put back, and the copy of `tokens` too
    fs::write(world.state().join("tokens"), backup).unwrap();
    for _ in 0..4 {
        let ca = pick_ca(&world, &mut rng, 1.0);
        send_announcement(&world, &mut rng, token.clone(), ca).await;
    }
    holds(&world, "a revoke while tokens.meta.json was missing, then it and tokens put back").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_a_forced_approval_outlives_its_cas_announcements() {
    let world = new_world();
    let mut rng = rng();
    let ca = pick_ca(&world, &mut rng, 1.0);
    send_announcement(&world, &mut rng, String::new(), ca).await;
    reject_node(&world, last_id(&world, ca), ca).await;
    send_announcement(&world, &mut rng, String::new(), ca).await;
    approve_node(&world, last_id(&world, ca), true).await; // --force on the latest
    send_announcement(&world, &mut rng, String::new(), ca).await;
    let touched = last_id(&world, ca);
    let path = world.state().join("approved").join(&touched);
    fs::write(&path, b"").unwrap();
    world.log(Event::Approved { id: touched, start: world.tick(), record: true });
    for _ in 0..5 {
        send_announcement(&world, &mut rng, String::new(), ca).await;
    }
    holds(&world, "approve --force and touch on a rejected CA's latest, then more of its announcements")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenario_a_lifted_rejection_stays_lifted_under_a_flood() {
    let world = new_world();
    let mut rng = rng();
    let ca = pick_ca(&world, &mut rng, 1.0);
    send_announcement(&world, &mut rng, String::new(), ca).await;
    let rejected = last_id(&world, ca);
    reject_node(&world, rejected.clone(), ca).await;
    let flood: Vec<_> = (0..4u64)
        .map(|w| {
            let world = world.clone();
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(w);
                for _ in 0..15 {
                    send_announcement(&world, &mut rng, String::new(), ca).await;
                }
            })
        })
        .collect();
    forget_node(&world, rejected, ca).await;
    for worker in flood {
        worker.await.unwrap();
    }
    let note = world.state().join("rejected-cas").join(&world.ca_hashes.lock().unwrap()[ca]);
    assert!(!note.exists(), "a lifted rejection written back");
    holds(&world, "nodes forget of the rejected record while its CA announces from four workers").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_numbers_past_their_bounds_are_refused() {
    let world = new_world();
    for args in [["--uses", "4294967295"], ["--count", "1000000"], ["--expires-in", "100000d"]] {
        let (ok, out) = admin_cmd(&world, &["tokens", "add", args[0], args[1]]);
        assert!(!ok && out.contains("must be"), "{args:?}: {out}");
    }
    let (ok, out) = admin_cmd(&world, &["tokens", "list"]);
    assert!(ok && out.contains("0 token(s)"), "{out}");
    holds(&world, "tokens add past its bounds").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_a_typo_in_the_metadata_keeps_the_replicas_ready() {
    let world = new_world();
    let mut rng = rng();
    let token = add_token_with(&world, 2, false).await.unwrap();
    meta_by_hand(&world, false); // a stray comma
    let (addr, _, _) = world.running(&mut rng).unwrap();
    let client = node_client(&world.fx, addr);
    let health = eventually(|| get(&client, "/healthz", None), |a| json(a)["status"] == "degraded").await;
    assert_eq!(health.status, 200, "ready, and saying why: {}", health.text());
    let ca = pick_ca(&world, &mut rng, 1.0);
    send_announcement(&world, &mut rng, token, ca).await;
    holds(&world, "a stray comma in tokens.meta.json").await;
}
