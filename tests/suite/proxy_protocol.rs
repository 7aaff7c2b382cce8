//! `--proxy-protocol` (issue 32): behind a listed L4 balancer, the node's
//! address is the one the PROXY header names (v1 and v2), in its record and
//! its rate limit; a listed peer without a header, and a header from a peer
//! not listed, are refused.

use std::net::SocketAddr;

use janus_listen::proxy::Trusted;
use janus_registration::certs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;

/// Announces over one connection that starts with `header`; the status, or
/// `None` when the connection was refused.
async fn announce_after(fx: &Fixture, addr: SocketAddr, header: &[u8], name: &str) -> Option<(u16, String)> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(header).await.unwrap();
    let body = announcement(name, &certs::mint_node_ca(name).unwrap(), "", &new_secret());
    announce_over(fx, tcp, addr, &body).await
}

fn peer_address(fx: &Fixture, id: &str) -> String {
    let (ok, shown, err) = admin(&fx.state(), &["nodes", "show", id, "--json"]);
    assert!(ok, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    shown["peer_address"].as_str().unwrap_or_default().to_string()
}

fn v2_header(source: [u8; 4], port: u16) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.extend([0x21, 0x11, 0, 12]);
    header.extend(source);
    header.extend([127, 0, 0, 1]);
    header.extend(port.to_be_bytes());
    header.extend(8443u16.to_be_bytes());
    header
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_balancers_header_names_the_node_v1_and_v2() {
    let fx = Fixture::new();
    let mut config = fx.config();
    config.proxy_protocol = vec!["127.0.0.0/8".parse::<Trusted>().unwrap()];
    config.limits.burst = 1;
    config.limits.refill_every = std::time::Duration::from_secs(600);
    let server = InProcess::start(config).await;
    let v1 = b"PROXY TCP4 192.0.2.7 127.0.0.1 51234 8443\r\n";
    let (status, id) = announce_after(&fx, server.addr, v1, "behind-1").await.expect("answered");
    assert_eq!(status, 201);
    assert_eq!(peer_address(&fx, &id), "192.0.2.7:51234", "the node's address, not the balancer's");
    let (status, id) = announce_after(&fx, server.addr, &v2_header([198, 51, 100, 9], 40000), "behind-2")
        .await
        .expect("answered");
    assert_eq!(status, 201, "another source: its own rate limit");
    assert_eq!(peer_address(&fx, &id), "198.51.100.9:40000");
    // The rate limit is per node behind the balancer: 192.0.2.7 spent its burst.
    let (status, _) = announce_after(&fx, server.addr, v1, "behind-3").await.expect("answered");
    assert_eq!(status, 429);
    // A listed peer that sends no header is refused: it would speak for every node behind it.
    assert!(announce_after(&fx, server.addr, b"", "no-header").await.is_none());
    // A v1 line that is not one.
    assert!(announce_after(&fx, server.addr, b"PROXY TCP4 nonsense\r\n", "bad-header").await.is_none());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_not_listed_is_never_asked_for_a_header_and_cannot_claim_an_address() {
    let fx = Fixture::new();
    let mut config = fx.config();
    config.proxy_protocol = vec!["10.0.0.0/8".parse::<Trusted>().unwrap()];
    let server = InProcess::start(config).await;
    let (status, id) = announce_after(&fx, server.addr, b"", "direct").await.expect("answered");
    assert_eq!(status, 201);
    assert!(peer_address(&fx, &id).starts_with("127.0.0.1:"), "its own address");
    let forged = b"PROXY TCP4 192.0.2.7 127.0.0.1 51234 8443\r\n";
    assert!(announce_after(&fx, server.addr, forged, "forged").await.is_none(), "not read: the TLS fails");
    server.stop().await;
}

#[test]
fn proxy_protocol_networks_are_checked_at_startup() {
    let fx = Fixture::new();
    let out = std::process::Command::new(BIN)
        .args(fx.serve_args())
        .args(["--proxy-protocol", "10.0.0.0/8,not-a-network"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"not-a-network\" is not an address or a network such as 10.0.0.0/8"), "{err}");
}

/// The connection caps count the node a listed balancer names, not the
/// balancer: two idle connections for 192.0.2.7 fill its per-source cap,
/// a third for it is refused, another node behind the same balancer is
/// served; and a header with TLVs (`send-proxy-v2-ssl`, `unique-id`) is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_caps_count_the_proxied_source_and_tlvs_are_read() {
    let fx = Fixture::new();
    let mut config = fx.config();
    config.proxy_protocol = vec!["127.0.0.0/8".parse::<Trusted>().unwrap()];
    config.max_connections_per_source = 2;
    // The held connections send no TLS hello: they stay for the test.
    config.handshake_timeout = std::time::Duration::from_secs(60);
    let server = InProcess::start(config).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        tcp.write_all(&v2_header([192, 0, 2, 7], 50000)).await.unwrap();
        held.push(tcp);
    }
    // The two are in the table once the server has read their headers: a
    // third for the same node is then closed at once, unanswered.
    let third = async {
        for _ in 0..250 {
            let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
            tcp.write_all(&v2_header([192, 0, 2, 7], 50001)).await.unwrap();
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(std::time::Duration::from_millis(200), tcp.read(&mut byte)).await;
            if matches!(read, Ok(Ok(0)) | Ok(Err(_))) {
                return true;
            }
        }
        false
    };
    assert!(third.await, "192.0.2.7 holds its two: a third is refused");
    let (status, _) = announce_after(&fx, server.addr, &v2_header([198, 51, 100, 9], 40000), "other")
        .await
        .expect("another node behind the same balancer is served");
    assert_eq!(status, 201);
    // TLVs after the addresses: an SSL one with sub-TLVs, a unique id.
    let mut with_tlvs = v2_header([203, 0, 113, 5], 41000);
    let ssl = [&[0x01, 0, 0, 0, 0][..], &[0x21, 0, 7], b"TLSv1.3"].concat();
    for (kind, value) in [(0x20u8, ssl), (0x05, vec![b'u'; 128])] {
        with_tlvs.push(kind);
        with_tlvs.extend((value.len() as u16).to_be_bytes());
        with_tlvs.extend(value);
    }
    let length = (with_tlvs.len() - 16) as u16;
    with_tlvs[14..16].copy_from_slice(&length.to_be_bytes());
    let (status, id) = announce_after(&fx, server.addr, &with_tlvs, "tlvs").await.expect("answered");
    assert_eq!(status, 201);
    assert_eq!(peer_address(&fx, &id), "203.0.113.5:41000");
    drop(held);
    server.stop().await;
}
