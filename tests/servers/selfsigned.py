"""A throwaway PKI for https test servers on 127.0.0.1.

Owns: :func:`make_pki`, which writes into a folder a CA, a second CA nobody trusts, a
server certificate for 127.0.0.1 and localhost, and a client certificate (each with its
key, and the client's certificate and key in one file too), and returns their paths.
Needs ``cryptography`` (a test dependency).
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Any

__all__ = ["make_pki"]


def make_pki(folder: Path) -> dict[str, str]:
    """Paths of PEM files in ``folder``:

    - ``ca``: the CA (give it as ``verify=``); ``other_ca``: a CA that signed nothing here;
    - ``cert``/``key`` (also ``server_cert``/``server_key``): the server's, for 127.0.0.1
      and localhost (for ``ssl.SSLContext.load_cert_chain``);
    - ``client_cert``/``client_key``, and ``client_both`` (certificate and key in one file).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def certificate(
        subject: str, key: Any, issuer: tuple[x509.Name, Any] | None, use: str
    ) -> x509.Certificate:
        """``use``: "ca", "server" or "client"; ``issuer`` None: self-signed."""
        issuer_name, issuer_key = issuer if issuer is not None else (name(subject), key)
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(issuer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=use == "ca", path_length=None), critical=True)
        )
        if use == "ca":
            builder = builder.add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            ).add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )  # fmt: skip
        elif use == "server":
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            ).add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
        if issuer is not None:
            builder = builder.add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                critical=False,
            )
        return builder.sign(issuer_key, hashes.SHA256())

    def write(file: str, *items: Any) -> str:
        data = b""
        for item in items:
            if isinstance(item, x509.Certificate):
                data += item.public_bytes(serialization.Encoding.PEM)
            else:
                data += item.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
        (folder / file).write_bytes(data)
        return str(folder / file)

    def new_key() -> Any:
        return ec.generate_private_key(ec.SECP256R1())

    ca_key, server_key, client_key, other_key = new_key(), new_key(), new_key(), new_key()
    ca = certificate("mcpsync test CA", ca_key, None, "ca")
    server = certificate("127.0.0.1", server_key, (ca.subject, ca_key), "server")
    client = certificate("mcpsync test client", client_key, (ca.subject, ca_key), "client")
    other_ca = certificate("another CA", other_key, None, "ca")
    paths = {
        "ca": write("ca.pem", ca),
        "other_ca": write("other-ca.pem", other_ca),
        "server_cert": write("server.pem", server),
        "server_key": write("server.key", server_key),
        "client_cert": write("client.pem", client),
        "client_key": write("client.key", client_key),
        "client_both": write("client-both.pem", client, client_key),
    }
    return {**paths, "cert": paths["server_cert"], "key": paths["server_key"]}
