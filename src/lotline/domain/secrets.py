"""URLs as lotline prints and logs them: their secrets masked (issue 39.14).

A database URL may carry a password in its userinfo or its query (``?password=``, ``sslpassword``);
an OpenLineage, webhook or S3 endpoint URL may carry a token in its userinfo, its query
(``?token=``, ``?sig=``, ``X-Amz-Signature``) or its path (a Slack-style webhook's last segment).
Whatever prints or logs one of these URLs passes it through ``masked_url`` first.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
#: Query parameters whose value is masked: names containing any of these (case-insensitive).
_SECRET_NAMES = ("pass", "pwd", "secret", "token", "key", "sig", "auth", "credential", "session")
#: A path segment that looks like a generated token: long, with letters and digits.
_TOKEN_SEGMENT = re.compile(r"^(?=.*[A-Za-z])(?=.*\d)[A-Za-z0-9_\-.~+=]{16,}$")


def masked_url(url: str, *, endpoint: bool = True) -> str:
    """``url`` with its password (and for an ``endpoint``, the whole userinfo), every query value
    whose name says it is a secret and, for an ``endpoint``, every path segment that looks like a
    token replaced by ``***``. A database URL (``endpoint=False``) keeps its user and its path
    (the database name). Text that is not a URL comes back as it is."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url  # a file path, SQLite's URL: no userinfo to mask
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + ("" if port is None else f":{port}")
    if parts.username is not None or parts.password is not None:
        if endpoint:
            netloc = f"{MASK}@{netloc}"
        else:
            user = parts.username or ""
            netloc = (f"{user}:{MASK}" if parts.password is not None else user) + f"@{netloc}"
    path = parts.path
    if endpoint:
        path = "/".join(MASK if _TOKEN_SEGMENT.match(segment) else segment for segment in path.split("/"))
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(name, MASK if _secret(name) else value) for name, value in pairs], safe="*/:")
    return urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
_PAIR_IN_TEXT = re.compile(r"([A-Za-z0-9_.-]+)=([^&\s'\"<>]+)")


def masked_text(text: str) -> str:
    """An error's text with every URL in it masked (``masked_url``) and every ``name=value`` whose
    name says it is a secret (a transport's error may quote a URL's path and query alone)."""
    text = _URL_IN_TEXT.sub(lambda found: masked_url(found.group(0)), text)
    return _PAIR_IN_TEXT.sub(
        lambda found: f"{found.group(1)}={MASK}" if _secret(found.group(1)) else found.group(0), text
    )


def _secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_NAMES)
