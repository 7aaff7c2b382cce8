"""An orchestrator's program, through a client generated from the admin
API's OpenAPI document alone (openapi-python-client): mint a token, list
the pending nodes, approve one with its CA's fingerprint. Run by
scripts/schemathesis-check.sh, with the generated package on PYTHONPATH.

    generated-client.py ORIGIN SERVER_CA CERT KEY
"""

import importlib
import ssl
import sys

origin, server_ca, cert, key = sys.argv[1:5]

# Generated with `--meta none --output-path admin_api_client`: the package itself.
package = "admin_api_client"
client_module = importlib.import_module(package)
models = importlib.import_module(f"{package}.models")


def operation(name):
    """The generated module of one operation (by its operationId)."""
    for tag in ("default",):
        try:
            return importlib.import_module(f"{package}.api.{tag}.{name}")
        except ModuleNotFoundError:
            continue
    raise SystemExit(f"generated-client: no operation {name}")


tls = ssl.create_default_context(cafile=server_ca)
tls.load_cert_chain(cert, key)
client = client_module.Client(base_url=origin, verify_ssl=tls, raise_on_unexpected_status=True)

made = operation("post_v1_tokens").sync(client=client, body=models.NewTokensBody(count=1, uses=1))
assert made is not None and len(made.tokens) == 1, made
print(f"generated-client: minted a token, SHA-256 prefix {made.tokens[0].sha256_prefix}")

listed = operation("get_v1_nodes").sync(client=client, state=[models.GetV1NodesStateItem("pending")])
pending = [node for node in listed.nodes if node.state.value == "pending" and node.name in ("web-4", "web-5")]
assert pending, f"no pending node listed: {listed}"
node = pending[0]
print(f"generated-client: {len(pending)} pending node(s); approving {node.name} ({node.id})")

decided = operation("post_v1_nodes_id_approve").sync(
    node.id, client=client, body=models.Approval(expect_ca_sha256=node.ca_sha256)
)
assert decided is not None and decided.changed and decided.node.state.value == "admitted", decided
print(f"generated-client: {decided.said}")

other = pending[-1]
assert other.id != node.id, f"two pending nodes: {pending}"
refused = operation("post_v1_nodes_id_approve").sync_detailed(
    other.id, client=client, body=models.Approval(expect_ca_sha256="0" * 64)
)
problem = refused.parsed
assert int(refused.status_code) == 422 and problem.code.value == "fingerprint_mismatch", refused
print(f"generated-client: a wrong fingerprint is refused {int(refused.status_code)} {problem.code.value}")
