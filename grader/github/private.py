"""Private results: a PR's report sealed for the student and the staff, and opened again.

A public repository shows every PR comment, job summary, artifact and log to anyone, so the
grading job never publishes a score. It packs the report files (result.json, report.md,
report.html, pr.json) into one tar, encrypts it with age (`pyrage`) to the public SSH keys
GitHub publishes for the PR's author (`https://github.com/<login>.keys`; ssh-ed25519 and
ssh-rsa keys are the kinds age accepts) and to the staff's age recipient (a repository variable,
a public key), and publishes only `report.age`. `grader open-report report.age` decrypts it with
the student's own private key (`~/.ssh/id_ed25519` by default) into a folder.

Only the trusted grading process seals; the archive holds nothing but regular files with plain
names, and `open_report` extracts it with tarfile's `data` filter all the same.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyrage
from pyrage import ssh, x25519

from grader.core.errors import UsageError

SEALED_NAME = "report.age"
SSH_KINDS = ("ssh-ed25519", "ssh-rsa")
MAX_KEYS = 20  # GitHub lists every key of an account; a handful is plenty
MAX_OPEN_BYTES = 64 * 2**20


class PrivateReportError(UsageError):
    """A report could not be sealed or opened; the message says what to fix."""


@dataclass(frozen=True)
class Recipients:
    """Who can open a sealed report: the student's SSH keys and the staff's age key."""

    student_keys: tuple[str, ...]
    staff: str

    @property
    def student_can_open(self) -> bool:
        return bool(self.student_keys)


def student_keys(text: str) -> tuple[str, ...]:
    """The keys age can encrypt to, from the text of `https://github.com/<login>.keys`."""
    keys = []
    for line in text.splitlines():
        parts = line.strip().split()
        if len(parts) >= 2 and parts[0] in SSH_KINDS:
            try:
                ssh.Recipient.from_str(f"{parts[0]} {parts[1]}")
            except pyrage.RecipientError:
                continue
            keys.append(f"{parts[0]} {parts[1]}")
    return tuple(dict.fromkeys(keys))[:MAX_KEYS]


def recipients(keys_file: Path | str | None, staff: str) -> Recipients:
    """The recipients of one sealed report; the staff key is required (staff must read grades)."""
    staff = staff.strip()
    try:
        x25519.Recipient.from_str(staff)
    except (pyrage.RecipientError, ValueError):
        raise PrivateReportError(
            "the staff age recipient (repository variable STAFF_AGE_RECIPIENT) is missing or "
            "not an age public key (age1...): grades cannot be kept private, so none is published"
        ) from None
    text = ""
    if keys_file is not None and Path(keys_file).is_file():
        text = Path(keys_file).read_text(encoding="utf-8", errors="replace")[:200_000]
    return Recipients(student_keys(text), staff)


def _tar(files: Iterable[Path]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in files:
            data = path.read_bytes()
            info = tarfile.TarInfo(path.name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def seal(files: Sequence[Path], to: Recipients, dest: Path) -> Path:
    """Encrypt `files` (flat names) into `dest` for the student's keys and the staff."""
    rcpts: list[object] = [x25519.Recipient.from_str(to.staff)]
    rcpts += [ssh.Recipient.from_str(k) for k in to.student_keys]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(pyrage.encrypt(_tar(files), rcpts))
    return dest


def _identity(path: Path) -> object:
    raw = path.read_bytes()
    text = raw.decode("utf-8", errors="replace")
    try:
        if text.lstrip().startswith("AGE-SECRET-KEY-") or "\nAGE-SECRET-KEY-" in text:
            line = next(ln for ln in text.splitlines() if ln.startswith("AGE-SECRET-KEY-"))
            return x25519.Identity.from_str(line.strip())
        return ssh.Identity.from_buffer(raw)
    except (pyrage.IdentityError, ValueError, StopIteration) as exc:
        raise PrivateReportError(
            f"{path}: not a usable private key ({exc}); pass the private half of a key listed "
            "on your GitHub account (an unencrypted ed25519 or RSA key), or the staff age key"
        ) from None


def open_report(sealed: Path | str, identity: Path | str, dest: Path | str) -> list[Path]:
    """Decrypt a sealed report with a private key and extract its files into `dest`."""
    sealed, identity, dest = Path(sealed), Path(identity), Path(dest)
    if not sealed.is_file():
        raise PrivateReportError(f"{sealed}: no such file (download the grading-report artifact)")
    if sealed.stat().st_size > MAX_OPEN_BYTES:
        raise PrivateReportError(f"{sealed}: larger than {MAX_OPEN_BYTES // 2**20} MB")
    if not identity.is_file():
        raise PrivateReportError(f"{identity}: no such key file (use --identity)")
    try:
        plain = pyrage.decrypt(sealed.read_bytes(), [_identity(identity)])
    except pyrage.DecryptError as exc:
        raise PrivateReportError(
            f"{sealed}: this key cannot open it ({exc}); use the key of the GitHub account that "
            "opened the pull request"
        ) from None
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(plain), mode="r") as tar:
        members = [m for m in tar.getmembers() if m.isfile() and "/" not in m.name]
        tar.extractall(dest, members=members, filter="data")
    return sorted(dest / m.name for m in members)
