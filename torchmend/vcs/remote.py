"""Which GitHub repository a git remote points at: owner and name from its URL.

Forms understood (with or without the `.git` suffix, and a trailing slash):
`https://github.com/OWNER/NAME`, `https://user:secret@host/OWNER/NAME`, `http://...`, `ssh://git@host[:port]/OWNER/NAME`,
`git://host/OWNER/NAME` and the scp-like `git@host:OWNER/NAME` (`host:OWNER/NAME`). A local path or
`file://` URL names no forge repository: None.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

GITHUB_HOST = "github.com"
GITHUB_API = "https://api.github.com"

_SCHEMES = {"https", "http", "ssh", "git", "git+ssh", "ssh+git"}
_SCP = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^@/:\\]{2,}):(?P<path>(?!/).+)$")
_OWNER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$")
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class RepoRef:
    host: str  # lower case, no port
    owner: str
    name: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


def parse_remote_url(url: str) -> RepoRef | None:
    """The (host, owner, name) a remote URL points at, or None when it is not a forge URL of that shape."""
    url = url.strip()
    if "://" in url:
        try:
            parts = urllib.parse.urlsplit(url)
            host = parts.hostname
        except ValueError:
            return None
        if parts.scheme.lower() not in _SCHEMES or not host:
            return None
        path = parts.path
    else:
        m = _SCP.match(url)
        if not m:
            return None
        host, path = m["host"], m["path"]
    segments = [s for s in path.strip("/").split("/") if s]
    if len(segments) != 2:
        return None
    owner, name = segments
    if name.endswith(".git"):
        name = name[:-4]
    if not _OWNER.match(owner) or not _NAME.match(name) or name in (".", ".."):
        return None
    return RepoRef(host.lower(), owner, name)


def parse_full_name(text: str) -> RepoRef | None:
    """OWNER/NAME as given on the command line (--repo)."""
    owner, _, name = text.strip().partition("/")
    if not _OWNER.match(owner) or not _NAME.match(name) or name in (".", ".."):
        return None
    return RepoRef(GITHUB_HOST, owner, name.removesuffix(".git"))


def display_url(url: str) -> str:
    """The URL without any user name or password in it, for messages."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^@/]*@", r"\1", url.strip())
