"""``domain.secrets``: which parts of a URL are secrets (issue 39.14)."""

from __future__ import annotations

import pytest

from lotline.domain.secrets import masked_text, masked_url


@pytest.mark.parametrize(
    ("url", "endpoint", "shown"),
    [
        (
            "postgresql://bob:pw@db:5432/lotline?password=pw2&sslmode=require",
            False,
            "postgresql://bob:***@db:5432/lotline?password=***&sslmode=require",
        ),
        (
            "postgresql://bob@db/lotline_test_3587b0ed_main",
            False,
            "postgresql://bob@db/lotline_test_3587b0ed_main",
        ),
        ("https://user:pw@h.example/x", True, "https://***@h.example/x"),
        ("https://t0ken@h.example/x", True, "https://***@h.example/x"),
        (
            "https://hooks.example/services/T01/B02/abcdEFGH1234ijklMNOP",
            True,
            "https://hooks.example/services/T01/B02/***",
        ),
        ("http://marquez:5000/api/v1/lineage", True, "http://marquez:5000/api/v1/lineage"),
        (
            "https://b.example/o?X-Amz-Signature=abc&X-Amz-Credential=def&part=1",
            True,
            "https://b.example/o?X-Amz-Signature=***&X-Amz-Credential=***&part=1",
        ),
        ("http://[::1]:8080/in?token=t", True, "http://[::1]:8080/in?token=***"),
        ("sqlite:///./lotline.db", False, "sqlite:///./lotline.db"),
        ("not a url", True, "not a url"),
    ],
)
def test_masked_url(url: str, endpoint: bool, shown: str) -> None:
    assert masked_url(url, endpoint=endpoint) == shown


def test_masked_text_masks_urls_and_secret_pairs_in_an_error() -> None:
    error = "Max retries exceeded with url: /api/v1/lineage?token=abc (https://u:p@h.example/x)"
    assert (
        masked_text(error)
        == "Max retries exceeded with url: /api/v1/lineage?token=*** (https://***@h.example/x)"
    )
