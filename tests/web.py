"""The tests' one-off HTTP requests to the loopback servers they start: httpx's one-call
functions, each with a client and a connection of its own as ``httpx.get`` makes, but
sharing one TLS context. httpx builds a context for every client, loading the system's
certificates (about 20 ms of CPU), and the tests make thousands of these requests, every
one plain HTTP."""

from __future__ import annotations

import ssl
from typing import Any

import httpx

_TLS = ssl.create_default_context()


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, url, verify=_TLS, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, verify=_TLS, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, verify=_TLS, **kwargs)


def delete(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.delete(url, verify=_TLS, **kwargs)
