"""A throw-away PKI for the TLS tests, made with the openssl command line:
a CA, a server certificate for localhost/127.0.0.1, a client certificate
(common name client_cn) and a second, unrelated CA ("rogue")."""
import os
import subprocess


def _sh(d, *args):
    subprocess.run(args, cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_pki(d, client_cn="client"):
    """Returns {name: path} for ca.pem, server.pem/.key, client.pem/.key, rogue.pem."""
    os.makedirs(d, exist_ok=True)
    for name in ("ca", "rogue"):
        _sh(d, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=arbiter test %s" % name, "-keyout", name + ".key", "-out", name + ".pem")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("[srv]\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "extendedKeyUsage=serverAuth\n[cli]\nextendedKeyUsage=clientAuth\n")
    for name, ext, cn in (("server", "srv", "localhost"), ("client", "cli", client_cn)):
        _sh(d, "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + cn,
            "-keyout", name + ".key", "-out", name + ".csr")
        _sh(d, "openssl", "x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-extensions", ext,
            "-out", name + ".pem")
    for k in ("server.key", "client.key", "ca.key", "rogue.key"):
        os.chmod(os.path.join(d, k), 0o600)
    return {k: os.path.join(d, k) for k in
            ("ca.pem", "server.pem", "server.key", "client.pem", "client.key", "rogue.pem")}
