"""The real Java 1.51 AeronArchive logging in to our sidecar's shared-secret authenticator
(``serve --auth-credentials-file``): AuthConnect (58) with credentials, our Challenge (59), the Java
client's ChallengeResponse (60) from a Java CredentialsSupplier, as a Java user would write it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.peer.modern_peer import ModernArchiveEndpoint, ModernPeerClient, ModernPeerInstallation, PeerError
from tests.support.sidecar import running_sidecar

def test_the_java_client_logs_in_to_our_authenticating_sidecar(modern_peer: ModernPeerInstallation,
                                                               tmp_path: Path) -> None:
    """AuthConnect with credentials, our Challenge (59) and the Java client's ChallengeResponse (60):
    a Java CredentialsSupplier answering our HMAC challenge logs in; plain ``principal:secret``
    credentials log in at once; a wrong secret is rejected."""
    credentials_file = tmp_path / "credentials"
    credentials_file.write_text("analytics:s3cret\n")
    with running_sidecar(tmp_path / "archive", ["--auth-credentials-file", str(credentials_file)]) as secured:
        endpoint = ModernArchiveEndpoint(control_channel=secured.control_channel)
        challenged = ModernPeerClient(modern_peer, endpoint, hmac_credentials="analytics:s3cret").connect()
        plain = ModernPeerClient(modern_peer, endpoint, credentials="analytics:s3cret").connect()
        assert challenged.archive_id == plain.archive_id != -1
        with pytest.raises(PeerError) as refused:
            ModernPeerClient(modern_peer, endpoint, hmac_credentials="analytics:wrong").connect()
        assert "authentication rejected" in str(refused.value), refused.value  # the Java client's AuthenticationException
