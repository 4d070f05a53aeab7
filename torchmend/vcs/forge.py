"""The GitHub REST API calls a pull request needs, over urllib: list, create and update pull requests.

The token travels in the Authorization header only (added as an unredirected header, and redirects are
not followed at all, so it cannot be carried to another host); it is never part of a URL, a message or an
exception, and anything the server says back is passed through `redact` before it is shown. A plain-http
API URL is accepted for loopback hosts only (the tests' local server), so a token never crosses a network
unencrypted. GitHub Enterprise Server: the API lives at https://HOST/api/v3.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchmend import __version__

AUTH, NOT_FOUND, INVALID, UNREACHABLE = "auth", "not_found", "invalid", "unreachable"


class ForgeError(Exception):
    """An API call failed. `kind` is AUTH (401, 403), NOT_FOUND (404), INVALID (422 and other 4xx, 3xx) or
    UNREACHABLE (network, timeout, 5xx, an answer that is not what GitHub sends); the message holds the status
    and what the server said (redacted)."""

    def __init__(self, kind: str, status: int | None, message: str) -> None:
        self.kind = kind
        self.status = status
        super().__init__(message)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the 3xx status


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_api_url(url: str) -> str | None:
    """Why this API URL cannot be used, or None when it can."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return f"the API URL must be an https:// URL, not {url!r}"
    if parts.username or parts.password:
        return "the API URL must not carry a user name or password; the token comes from the environment"
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        return "the API URL must use https (a token is never sent unencrypted; plain http is for localhost only)"
    return None


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str  # html_url: the page to open
    head: str
    base: str


class GitHub:
    def __init__(self, api_url: str, token: str, redact: Callable[[str], str], timeout: float = 30) -> None:
        self.api_url = api_url.rstrip("/")
        self._token = token
        self._redact = redact
        self._timeout = timeout
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if is_loopback(urllib.parse.urlsplit(self.api_url).hostname):
            handlers.append(urllib.request.ProxyHandler({}))  # never route a local server through a proxy
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        return f"GitHub({self.api_url!r}, token=<hidden>)"

    # -- the calls -------------------------------------------------------------------------------------------

    def open_pulls(self, owner: str, repo: str, branch: str) -> list[PullRequest]:
        """Open pull requests whose head is `owner:branch`."""
        data = self._call(
            "GET",
            f"/repos/{_q(owner)}/{_q(repo)}/pulls",
            {"head": f"{owner}:{branch}", "state": "open", "per_page": "10"},
        )
        if not isinstance(data, list):
            raise ForgeError(UNREACHABLE, 200, "the API answered the pull request list with something else")
        return [_pull(p) for p in data]

    def create_pull(
        self, owner: str, repo: str, *, head: str, base: str, title: str, body: str, draft: bool = False
    ) -> PullRequest:
        payload = {"title": title, "head": head, "base": base, "body": body, "maintainer_can_modify": True}
        if draft:
            payload["draft"] = True
        return _pull(self._call("POST", f"/repos/{_q(owner)}/{_q(repo)}/pulls", body=payload))

    def update_pull(self, owner: str, repo: str, number: int, *, title: str, body: str) -> PullRequest:
        return _pull(
            self._call(
                "PATCH", f"/repos/{_q(owner)}/{_q(repo)}/pulls/{int(number)}", body={"title": title, "body": body}
            )
        )

    # -- HTTP ------------------------------------------------------------------------------------------------

    def _call(
        self, method: str, path: str, query: dict[str, str] | None = None, body: dict[str, Any] | None = None
    ) -> Any:
        url = self.api_url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/vnd.github+json")
        req.add_header("X-GitHub-Api-Version", "2022-11-28")
        req.add_header("User-Agent", f"torchmend/{__version__}")
        if data is not None:
            req.add_header("Content-Type", "application/json; charset=utf-8")
        req.add_unredirected_header("Authorization", f"Bearer {self._token}")
        where = f"{method} {self.api_url}{path}"
        try:
            with self._opener.open(req, timeout=self._timeout) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as e:
            raise self._http_error(e, where) from None
        except (TimeoutError, urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", None) or e
            if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                said = f"{where} got no answer within {self._timeout:g} s (timed out)"
            else:
                said = f"could not reach the API at {self.api_url} ({reason})"
            raise ForgeError(UNREACHABLE, None, self._redact(said)) from None
        try:
            return json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            # A proxy's or a login page's HTML, or a cut-off answer: the API failed, whatever the status says.
            shown = " ".join(raw.decode("utf-8", "replace").split())[:120]
            raise ForgeError(
                UNREACHABLE,
                status,
                self._redact(f"{where} answered {status} with something that is not JSON: {shown!r}"),
            ) from None

    def _http_error(self, e: urllib.error.HTTPError, where: str) -> ForgeError:
        status = e.code
        said = _said(e)
        if status in (401, 403):
            kind = AUTH
            if status == 403 and e.headers.get("x-ratelimit-remaining") == "0":
                said += " (rate limit exhausted; try again later)"
        elif status == 404:
            kind = NOT_FOUND
        elif 300 <= status < 400:
            kind = INVALID
            said = f"redirected to {e.headers.get('Location', '?')} (not followed: a renamed repository? update the remote URL)"
        elif status >= 500:
            kind = UNREACHABLE
        else:
            kind = INVALID
        return ForgeError(kind, status, self._redact(f"{where} answered {status}: {said}"[:1200]))


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _said(e: urllib.error.HTTPError) -> str:
    """The `message` and `errors` of a GitHub error body, in one line."""
    try:
        raw = e.read(65536).decode("utf-8", "replace")
    except Exception:  # noqa: BLE001  (a broken error body must not hide the status)
        raw = ""
    try:
        data = json.loads(raw)
    except ValueError:
        return " ".join(raw.split())[:300] or (e.reason or "")
    if not isinstance(data, dict):
        return str(data)[:300]
    text = str(data.get("message") or e.reason or "")
    details = []
    for err in data.get("errors") or []:
        if isinstance(err, dict):
            details.append(str(err.get("message") or " ".join(f"{k}={v}" for k, v in err.items())))
        else:
            details.append(str(err))
    if details:
        text += ": " + "; ".join(details)
    return " ".join(text.split())[:600]


def _pull(data: Any) -> PullRequest:
    if not isinstance(data, dict) or "number" not in data:
        raise ForgeError(UNREACHABLE, None, "the API answered without a pull request number")
    head = data.get("head") or {}
    base = data.get("base") or {}
    return PullRequest(
        int(data["number"]),
        str(data.get("html_url") or data.get("url") or ""),
        str(head.get("ref", "")) if isinstance(head, dict) else "",
        str(base.get("ref", "")) if isinstance(base, dict) else "",
    )
