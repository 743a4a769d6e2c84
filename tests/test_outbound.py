"""The outbound rule for URLs staff configure (security/outbound.py, docs/protocol.md §6.3): the URL's form
and literal addresses when it is saved, every resolved address when it is called, and the connection
going to the address that was checked (DNS is replaced by a resolver function, the server is real)."""

from __future__ import annotations

import httpx
import pytest

from security.outbound import GuardedTransport, OutboundPolicy, OutboundRefused
from tests.support.http_stub import http_stub

OPEN = OutboundPolicy()
CLOSED = OutboundPolicy(deny_private=True)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.170.2/v2/credentials",
        "http://2852039166/",  # 169.254.169.254 in decimal
        "http://0xa9fea9fe/",
        "http://0251.0376.0251.0376/",
        "http://[fe80::1]/",
        "http://[fd00:ec2::254]/",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
    ],
)
def test_link_local_and_metadata_addresses_are_always_refused(url: str) -> None:
    reason = OPEN.url_refusal(url)

    assert reason is not None and reason.startswith("base_url may not point at")
    assert "link-local or cloud metadata" in reason


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "file:///etc/passwd", "gopher://x/", "http:///nohost", "http://x:99999/"]
)
def test_only_http_and_https_urls_with_a_host(url: str) -> None:
    assert (OPEN.url_refusal(url) or "").startswith("base_url")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://127.1/",
        "http://[::1]/",
        "http://0.0.0.0/",
        "http://10.0.0.5/",
        "http://172.20.1.1/",
        "http://192.168.1.10/",
        "http://100.64.0.1/",
        "http://[fd12:3456::1]/",
        "http://localhost:11434/v1",
        "http://ollama.localhost/",
    ],
)
def test_private_ranges_are_refused_only_when_the_setting_says_so(url: str) -> None:
    assert OPEN.url_refusal(url) is None
    assert "AGENTSITE_PROVIDER_DENY_PRIVATE" in (CLOSED.url_refusal(url) or "")


def test_public_names_and_addresses_pass_and_names_are_not_resolved_when_saved() -> None:
    for url in ["https://api.openai.com/v1", "http://8.8.8.8/v1", "https://no-such-host.invalid/v1"]:
        assert CLOSED.url_refusal(url) is None


async def test_every_address_a_name_resolves_to_must_pass() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return {"mixed.test": ["93.184.216.34", "169.254.169.254"], "fine.test": ["93.184.216.34"]}[host]

    assert await OPEN.checked_addresses("fine.test", 443, resolve) == ["93.184.216.34"]
    with pytest.raises(OutboundRefused, match=r"mixed\.test \(169\.254\.169\.254\)"):
        await OPEN.checked_addresses("mixed.test", 443, resolve)
    with pytest.raises(OutboundRefused, match=r"127\.0\.0\.1"):
        await CLOSED.checked_addresses("localhost", 80)  # the system's resolver


def guarded_client(policy: OutboundPolicy, answers: list[list[str]]) -> httpx.AsyncClient:
    """An httpx client through GuardedTransport whose DNS answers come from `answers`, one per lookup."""

    async def resolve(host: str, port: int) -> list[str]:
        return answers.pop(0)

    return httpx.AsyncClient(transport=GuardedTransport(httpx.AsyncHTTPTransport(), policy, resolver=resolve))


async def test_the_connection_goes_to_the_checked_address_with_the_name_kept_in_host() -> None:
    with http_stub(body=b"{}", content_type="application/json") as stub:
        async with guarded_client(OPEN, [["127.0.0.1"]]) as client:
            # provider.test exists only in the fake resolver: an answer proves the checked address was used
            response = await client.get(f"http://provider.test:{stub.port}/v1/models")

    assert response.status_code == 200
    assert stub.requests[0][1]["host"] == f"provider.test:{stub.port}"
    assert str(response.request.url).startswith("http://provider.test:")


async def test_a_name_that_rebinds_to_a_metadata_address_is_refused_at_the_next_request() -> None:
    with http_stub(body=b"{}") as stub:
        async with guarded_client(OPEN, [["127.0.0.1"], ["169.254.169.254"]]) as client:
            assert (await client.get(f"http://rebind.test:{stub.port}/")).status_code == 200
            with pytest.raises(OutboundRefused, match="link-local or cloud metadata"):
                await client.get(f"http://rebind.test:{stub.port}/")

    assert len(stub.requests) == 1


async def test_an_address_that_does_not_answer_falls_through_to_the_next() -> None:
    with http_stub(body=b"ok") as stub:
        async with guarded_client(OPEN, [["::1", "127.0.0.1"]]) as client:  # the stub listens on IPv4 only
            response = await client.get(f"http://dual.test:{stub.port}/")

    assert response.status_code == 200 and response.content == b"ok"


async def test_private_addresses_are_refused_at_connection_time_when_the_setting_says_so() -> None:
    with http_stub(body=b"{}") as stub:
        async with guarded_client(CLOSED, [["10.1.2.3"]]) as client:
            with pytest.raises(OutboundRefused, match="loopback or private"):
                await client.get(f"http://internal.test:{stub.port}/")
        async with guarded_client(CLOSED, []) as client:
            with pytest.raises(OutboundRefused, match=r"127\.0\.0\.1"):
                await client.get(f"http://127.0.0.1:{stub.port}/")

    assert stub.requests == []


async def test_an_allowed_address_is_checked_once_and_other_notations_are_still_pinned(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A provider at 127.0.0.1 is passed straight on after its first answer (issue 18: every reply paid a
    check and a copy of its request); a host in another notation still goes to the address it stands for."""
    from security import outbound

    checks: list[str] = []
    real = OutboundPolicy.checked_addresses

    async def counted(self, host, port, resolver=None):  # type: ignore[no-untyped-def]
        checks.append(host)
        return await real(self, host, port, resolver)

    monkeypatch.setattr(outbound.OutboundPolicy, "checked_addresses", counted)
    with http_stub(body=b"ok") as stub:
        async with guarded_client(OPEN, []) as client:
            for _ in range(3):
                assert (await client.get(f"http://127.0.0.1:{stub.port}/")).status_code == 200
            for _ in range(2):  # 127.0.0.1 in decimal: resolved to it and pinned each time
                assert (await client.get(f"http://2130706433:{stub.port}/")).status_code == 200
    assert checks == ["127.0.0.1", "2130706433", "2130706433"]
    assert len(stub.requests) == 5
