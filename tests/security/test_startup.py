"""Start-up refusals, each one line on stderr and a non-zero exit before any data dir is
touched: a bad tokens file, an unusable certificate or key, and a non-loopback address
without tokens (which ``--insecure`` or ``--auth-tokens`` allow). Addresses other than
loopback are only bound here, never sent traffic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ServerProcess, TlsFiles, write_tokens_file

GOOD_DIGEST = "ab" * 32


def serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(tmp_path / "data")]
    argv += ["--listen", "127.0.0.1:0", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compactlog: error: "), result.stderr
    return lines[0]


BAD_TOKEN_FILES = {
    "not-toml": "[principals.a\nrole = 1",
    "bad-role": f'[principals.a]\ntoken_sha256 = "{GOOD_DIGEST}"\nrole = "root"\n',
    "short-digest": '[principals.a]\ntoken_sha256 = "abc123"\nrole = "admin"\n',
    "no-digest": '[principals.a]\nrole = "admin"\n',
    "unknown-key": f'[principals.a]\ntoken_sha256 = "{GOOD_DIGEST}"\nrole = "admin"\nrol = 1\n',
    "top-level-key": f'token = "x"\n[principals.a]\ntoken_sha256 = "{GOOD_DIGEST}"\n',
    "shared-token": (
        f'[principals.a]\ntoken_sha256 = "{GOOD_DIGEST}"\nrole = "admin"\n'
        f'[principals.b]\ntoken_sha256 = "{GOOD_DIGEST}"\nrole = "reader"\n'
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_TOKEN_FILES))
def test_a_bad_tokens_file_fails_the_start_naming_it(tmp_path: Path, case: str) -> None:
    path = tmp_path / f"{case}.toml"
    path.write_text(BAD_TOKEN_FILES[case])
    line = one_line(serve(tmp_path, "--auth-tokens", str(path)))
    assert str(path) in line
    assert not (tmp_path / "data").exists()  # refused before the data dir


def test_a_missing_tokens_file_fails_the_start(tmp_path: Path) -> None:
    line = one_line(serve(tmp_path, "--auth-tokens", str(tmp_path / "absent.toml")))
    assert "absent.toml" in line and "No such file" in line


def test_unusable_tls_files_fail_the_start(tmp_path: Path, tls_files: TlsFiles) -> None:
    cert, key = str(tls_files.cert), str(tls_files.key)
    line = one_line(serve(tmp_path, "--tls-cert", str(tmp_path / "none.pem"), "--tls-key", key))
    assert "none.pem" in line
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    line = one_line(serve(tmp_path, "--tls-cert", str(garbage), "--tls-key", key))
    assert "garbage.pem" in line
    # a certificate with someone else's key
    line = one_line(serve(tmp_path, "--tls-cert", str(tls_files.ca), "--tls-key", key))
    assert "not a usable pair: the key does not belong to the certificate" in line
    line = one_line(serve(tmp_path, "--tls-cert", cert))
    assert "--tls-key" in line


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0"])
def test_listening_beyond_loopback_needs_tokens_or_insecure(tmp_path: Path, listen: str) -> None:
    line = one_line(serve(tmp_path, "--listen", listen))
    assert f"refusing to listen on {listen} without --auth-tokens" in line
    assert "--insecure" in line


@pytest.mark.parametrize("allow", ["--insecure", "--auth-tokens"])
def test_listening_beyond_loopback_with_consent_starts(
    tmp_path: Path, server_factory: object, allow: str
) -> None:
    args = ["--listen", "0.0.0.0:0"]
    if allow == "--insecure":
        args.append("--insecure")
    else:
        tokens = write_tokens_file(tmp_path / "t.toml", {"ops": ("secret", "admin")})
        args += ["--auth-tokens", str(tokens)]
    srv: ServerProcess = server_factory(extra_args=args)  # type: ignore[operator]
    assert srv.address.startswith("0.0.0.0:")
    assert srv.stop() == 0
