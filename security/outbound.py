"""Where the server may send requests to URLs that staff configure (docs/protocol.md §6.3).

One rule for every such URL — a provider's `base_url` now, an HTTP MCP server's URL next:
- the scheme is http or https, and there is a host;
- never a link-local or cloud metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254): that is where
  a cloud VM's instance credentials live, and no model server does;
- with `deny_private` (`AGENTSITE_PROVIDER_DENY_PRIVATE`) also not loopback, private or otherwise
  internal addresses (127.0.0.0/8, ::1, 0.0.0.0/8, ::, RFC 1918, 100.64.0.0/10, fc00::/7).
An IPv6 address that carries an IPv4 one (::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) is judged
by the IPv4 address it leads to.

Checked twice. When a URL is saved (:func:`url_refusal`): its form, and an address written into it in
any notation the resolver accepts (`http://2852039166/` is 169.254.169.254) — names are not resolved
then, a provider may be configured before its DNS exists. And on every connection
(:class:`GuardedTransport`): the name is resolved, every address it resolves to must pass, and the
connection goes to an address that was checked.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]

ALWAYS_REFUSED = tuple(
    ipaddress.ip_network(net) for net in ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128")
)
PRIVATE = tuple(
    ipaddress.ip_network(net)
    for net in (
        "127.0.0.0/8",
        "::1/128",
        "0.0.0.0/8",
        "::/128",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "fc00::/7",
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class OutboundRefused(Exception):
    """A URL or the address it resolves to is not allowed; the message is a sentence naming it."""


@dataclass(frozen=True)
class OutboundPolicy:
    """Which addresses outbound requests may reach. Messages name the URL's field (`label`) and the
    setting that turned `deny_private` on (`private_setting`)."""

    deny_private: bool = False
    label: str = "base_url"
    private_setting: str = "AGENTSITE_PROVIDER_DENY_PRIVATE"

    def address_refusal(self, address: str | IPAddress) -> str | None:
        """What kind of address is refused ("a link-local or cloud metadata address"), or None."""
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        ip = _embedded_ipv4(ip) or ip
        if any(ip in net for net in ALWAYS_REFUSED if net.version == ip.version):
            return "a link-local or cloud metadata address"
        if self.deny_private and any(ip in net for net in PRIVATE if net.version == ip.version):
            return f"a loopback or private address ({self.private_setting} is on)"
        return None

    def _refused(self, host: str, address: str | IPAddress, reason: str) -> str:
        shown = host if str(address) == host.strip("[]") else f"{host} ({address})"
        return f"{self.label} may not point at {shown}, {reason}."

    def url_refusal(self, url: str) -> str | None:
        """Why a URL may not be saved, or None (a sentence that names the setting)."""
        try:
            parts = urlsplit(url)
            host = parts.hostname
            parts.port  # noqa: B018 - raises ValueError on a port out of range
        except ValueError:
            return f"{self.label} is not a valid URL."
        if parts.scheme not in ("http", "https"):
            return f"{self.label} must be an http or https URL."
        if not host:
            return f"{self.label} has no host."
        address = literal_address(host)
        if address is None and self.deny_private and _is_localhost_name(host):
            return f"{self.label} may not point at {host}, this host ({self.private_setting} is on)."
        reason = self.address_refusal(address) if address is not None else None
        return self._refused(host, address, reason) if address is not None and reason else None

    def check_url(self, url: str) -> None:
        reason = self.url_refusal(url)
        if reason is not None:
            raise OutboundRefused(reason)

    async def checked_addresses(self, host: str, port: int, resolver: Resolver | None = None) -> list[str]:
        """The addresses `host` resolves to, all of them allowed, in the resolver's order.

        Every address must pass, not just the first: a name that also resolves to a metadata address
        is refused whichever of its addresses a connection would use.
        """
        address = literal_address(host)
        addresses = [str(address)] if address is not None else await (resolver or system_resolver)(host, port)
        if not addresses:
            raise OSError(f"{host} does not resolve to any address")
        for item in addresses:
            reason = self.address_refusal(item)
            if reason is not None:
                raise OutboundRefused(self._refused(host, item, reason))
        return addresses


def literal_address(host: str) -> IPAddress | None:
    """The address a host written as a number stands for (every notation the C resolver accepts:
    dotted, decimal, hex, octal, IPv6), or None for a name. Asks no DNS server (AI_NUMERICHOST)."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return None
    return ipaddress.ip_address(str(found[0][4][0]).split("%", 1)[0]) if found else None


def _is_localhost_name(host: str) -> bool:
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")  # RFC 6761: always this host


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses from the system's resolver (getaddrinfo, in a thread), without repeats;
    OSError (socket.gaierror) when it has none."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedTransport:
    """An httpx (or httpx2) transport that connects only to addresses the policy allows.

    Why a transport that pins the address, and not a check of the name before the request: a name can
    resolve to a public address for the check and to 169.254.169.254 a moment later for the connection
    (DNS rebinding, TTL 0). Here the name is resolved once, every address is checked, and the request is
    handed to the inner transport with the checked address in its URL — so the connection goes exactly
    there — while the name stays in the `Host` header and in TLS (`sni_hostname`, a request extension of
    httpcore: the certificate is still verified against the name). Every hop of a redirect comes through
    here as a request of its own. Public API of httpx/httpcore only, so it holds for httpx and httpx2
    alike (the openai SDK uses one or the other).

    Requests through a proxy are not supported (the proxy would resolve the name itself): the client
    built around this transport does not read HTTP(S)_PROXY from the environment.

    A refusal is raised as the library's ConnectError that is also an OutboundRefused (clients such as
    the openai SDK handle the library's errors; callers can still tell a refusal apart); a name that
    does not resolve, as a plain ConnectError.

    The name is resolved for every request (one lookup next to a model call that takes seconds); the
    address that answered last is tried first while the name still resolves to it, so a name with
    rotating DNS answers keeps its pooled connection instead of a new TLS handshake per request.
    """

    def __init__(self, inner: Any, policy: OutboundPolicy, *, resolver: Resolver | None = None) -> None:
        self._inner = inner
        self._policy = policy
        self._resolver = resolver or system_resolver
        library = _library_of(inner)
        self._connect_error: type[Exception] = library.ConnectError
        self._refused = _refused_error(library.ConnectError)
        self._last: dict[tuple[str, int], str] = {}
        # Hosts written as an allowed address in its usual notation: nothing to resolve, check or pin again
        # (the policy is frozen); a provider on 127.0.0.1 or 10.x saves a copy of every request.
        self._allowed_addresses: set[str] = set()

    async def handle_async_request(self, request: Any) -> Any:
        url = request.url
        host = url.host
        if host in self._allowed_addresses:
            return await self._inner.handle_async_request(request)
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addresses = await self._policy.checked_addresses(host, port, self._resolver)
        except OutboundRefused as exc:
            raise self._refused(str(exc)) from None
        except (OSError, UnicodeError) as exc:
            raise self._connect_error(f"{host} could not be resolved: {exc}") from None
        last = self._last.get((host, port))
        if last in addresses:
            addresses = [last, *(item for item in addresses if item != last)]
        extensions = dict(request.extensions)
        if literal_address(host) is None:
            extensions.setdefault("sni_hostname", host)
        for position, address in enumerate(addresses):
            pinned = type(request)(
                request.method,
                url.copy_with(host=address),
                headers=request.headers,
                stream=request.stream,
                extensions=extensions,
            )
            try:
                response = await self._inner.handle_async_request(pinned)
            except self._connect_error:
                if position == len(addresses) - 1:
                    raise
                continue
            self._last[(host, port)] = address
            if address == host and literal_address(host) is not None:
                self._allowed_addresses.add(host)
            return response
        raise AssertionError("unreachable: checked_addresses never answers an empty list")

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> GuardedTransport:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._inner.__aexit__(*exc_info)


@functools.cache
def _refused_error(connect_error: type[Exception]) -> type[Exception]:
    return type("OutboundRefusedError", (connect_error, OutboundRefused), {})


def _library_of(transport: Any) -> Any:
    """httpx or httpx2: the library whose transport this is (for its ConnectError)."""
    return importlib.import_module(type(transport).__module__.split(".", 1)[0])
