"""Starts the test provider: a fresh SQLite database, an RSA key made for the
run, users and one confidential client, then its server (tests.oidc_provider.serve) on a free port, ready once its
discovery document answers."""

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests import waits

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = waits.seconds(60)

SETUP = """
import json, os, sys
from django.contrib.auth.models import User
from django.core.management import call_command
from oauth2_provider.models import Application

call_command("migrate", verbosity=0)
spec = json.loads(sys.argv[1])
for username, (email, password) in spec["users"].items():
    User.objects.create_user(username, email=email, password=password)
Application.objects.create(
    name="ArtifactFlow",
    client_id=spec["client_id"],
    client_secret=spec["client_secret"],
    client_type=Application.CLIENT_CONFIDENTIAL,
    authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
    redirect_uris=" ".join(spec["redirect_uris"]),
    post_logout_redirect_uris=" ".join(spec["post_logout_redirect_uris"]),
    algorithm=Application.RS256_ALGORITHM,
    skip_authorization=True,
)
"""


@dataclass
class Provider:
    url: str
    issuer: str
    client_id: str
    client_secret: str
    private_key_pem: bytes
    groups_file: Path
    claims_file: Path
    log: Path

    def groups_set(self, groups: dict[str, list[str]]) -> None:
        """The groups each user's next token names."""
        self.groups_file.write_text(json.dumps(groups))

    def claims_set(self, claims: dict[str, dict]) -> None:
        """Claims each user's next token carries instead of (or besides) the usual ones."""
        self.claims_file.write_text(json.dumps(claims))


@contextlib.contextmanager
def provider_running(
    *,
    data_dir: Path,
    users: dict[str, tuple[str, str]],
    redirect_uris: list[str],
    post_logout_redirect_uris: list[str] = (),
):
    """`users`: {username: (email, password)}."""
    data_dir.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    key_file = data_dir / "provider-key.pem"
    key_file.write_bytes(pem)
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    provider = Provider(
        url=url,
        issuer=f"{url}/o",
        client_id="artifactflow-" + secrets.token_hex(4),
        client_secret=secrets.token_urlsafe(32),
        private_key_pem=pem,
        groups_file=data_dir / "provider-groups.json",
        claims_file=data_dir / "provider-claims.json",
        log=data_dir / "provider.log",
    )
    provider.groups_set({})
    provider.claims_set({})
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        "OIDC_PROVIDER_SECRET_KEY": secrets.token_urlsafe(50),
        "OIDC_PROVIDER_DB": str(data_dir / "provider.sqlite3"),
        "OIDC_PROVIDER_ISSUER": provider.issuer,
        "OIDC_PROVIDER_KEY_FILE": str(key_file),
        "OIDC_PROVIDER_GROUPS_FILE": str(provider.groups_file),
        "OIDC_PROVIDER_CLAIMS_FILE": str(provider.claims_file),
    }
    spec = {
        "users": users,
        "client_id": provider.client_id,
        "client_secret": provider.client_secret,
        "redirect_uris": redirect_uris,
        "post_logout_redirect_uris": list(post_logout_redirect_uris),
    }
    setup = f"import django; django.setup()\n{SETUP}"
    subprocess.run([sys.executable, "-c", setup, json.dumps(spec)], env=env, cwd=ROOT, check=True, timeout=120)
    with provider.log.open("wb") as log, listening:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.oidc_provider.serve", str(listening.fileno())],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=[listening.fileno()],
        )
    try:
        # The socket listens already: this request waits in its backlog until the provider serves it.
        response = httpx.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=START_TIMEOUT)
        if response.status_code != 200:
            raise RuntimeError(
                f"The test provider's discovery answered {response.status_code}: {provider.log.read_text()}"
            )
        yield provider
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
