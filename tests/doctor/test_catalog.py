"""Tests generated from the data: every known error's verbatim messages get it first, every
entry is complete and cites a public thread, and a malformed entry fails with its place."""

from __future__ import annotations

import re

import pytest

from rlamd.doctor import catalog
from rlamd.doctor.catalog import LAYER_FILES, CatalogError, load_errors
from rlamd.doctor.known_errors import KNOWN_ERRORS, explain, explain_log

SEEN = [(e.key, url, msg) for e in KNOWN_ERRORS for url, msg in e.seen]


@pytest.mark.parametrize(
    ("key", "url", "message"), SEEN, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SEEN)]
)
def test_every_verbatim_message_is_diagnosed_as_its_entry_first(key, url, message):
    keys = [e.key for e in explain(message)]
    assert keys and keys[0] == key, (url, keys)
    assert key in [m.error.key for m in explain_log("step 10 loss 0.3\n" + message)]


def test_every_entry_is_complete_and_cites_a_thread_it_was_seen_in():
    assert len(KNOWN_ERRORS) >= 70
    for e in KNOWN_ERRORS:
        assert e.title and e.causes and e.fixes and e.patterns, e.key
        assert e.source in {u for u, _ in e.seen}, e.key
        assert all(
            re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|discussions)/\d+", u)
            for u, _ in e.seen
        ), e.key
        assert all("{{" not in t for t in (*e.causes, *e.fixes)), e.key  # snippets expanded
        assert any("`" in f for f in e.fixes), e.key  # at least one exact command


def test_every_layer_has_failures_and_keys_are_unique():
    layers = {e.layer for e in KNOWN_ERRORS}
    assert layers == set(LAYER_FILES)
    keys = [e.key for e in KNOWN_ERRORS]
    assert len(keys) == len(set(keys))


def test_answer_order_is_rank_then_layer():
    order = list(LAYER_FILES)
    pairs = [(e.rank, order.index(e.layer)) for e in KNOWN_ERRORS]
    assert pairs == sorted(pairs)


def _load_with(monkeypatch, text: str):
    real = catalog._read
    monkeypatch.setattr(
        catalog,
        "_read",
        lambda name: __import__("tomllib").loads(text) if name == "rlamd" else real(name),
    )
    load_errors.cache_clear()
    try:
        return load_errors()
    finally:
        load_errors.cache_clear()


ENTRY = """[[error]]
key = "x"
title = "t"
patterns = ['{pattern}']
causes = ["c"]
fixes = ["{fix}"]
source = "https://github.com/a/b/issues/1"
[[error.seen]]
url = "https://github.com/a/b/issues/1"
message = "m"
"""


@pytest.mark.parametrize(
    ("pattern", "fix", "expected"),
    [
        ("(unclosed", "`ls`", "is not a regular expression"),
        ("ok", "{{nosuch}}", "unknown snippet {{nosuch}}; known:"),
    ],
)
def test_a_malformed_entry_names_its_file_entry_and_fault(monkeypatch, pattern, fix, expected):
    with pytest.raises(CatalogError, match=re.escape(expected)) as err:
        _load_with(monkeypatch, ENTRY.format(pattern=pattern, fix=fix))
    assert "rlamd/doctor/errors/rlamd.toml entry 1 (x)" in str(err.value)


def test_an_unknown_field_is_named_with_the_accepted_ones(monkeypatch):
    text = ENTRY.format(pattern="ok", fix="f").replace('title = "t"', 'title = "t"\nfix = "y"')
    with pytest.raises(CatalogError, match=r"unknown fields \['fix'\].*accepted: causes"):
        _load_with(monkeypatch, text)
