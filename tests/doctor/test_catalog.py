"""Tests generated from the data: every known error's verbatim messages get it first, every
entry is complete and cites a public thread, and a malformed entry fails with its place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlamd.doctor import catalog
from rlamd.doctor.catalog import LAYER_FILES, CatalogError, load_errors
from rlamd.doctor.known_errors import KNOWN_ERRORS, explain, explain_log

ROOT = Path(__file__).resolve().parents[2]
SEEN = [(e.key, s) for e in KNOWN_ERRORS for s in e.seen]


@pytest.mark.parametrize(("key", "seen"), SEEN, ids=[f"{k}-{i}" for i, (k, _) in enumerate(SEEN)])
def test_every_verbatim_message_is_diagnosed_as_its_entry_first(key, seen):
    """On the machine it was seen on (its ``machine`` facts; none: any machine)."""
    facts = frozenset(seen.machine) if seen.machine else None
    keys = [e.key for e in explain(seen.message, facts)]
    assert keys and keys[0] == key, (seen.url, keys)
    logged = explain_log("step 10 loss 0.3\n" + seen.message, facts)
    assert key in [m.error.key for m in logged]


def test_a_machine_specific_diagnosis_answers_first_only_on_such_a_machine():
    msg = "torch.AcceleratorError: HIP error: device kernel image is invalid"
    assert explain(msg)[0].key == "no_binary_for_gpu"
    assert explain(msg, frozenset({"igpu_and_dgpu"}))[0].key == "igpu_beside_dgpu"
    assert explain(msg, frozenset({"apu"}))[0].key == "no_binary_for_gpu"


def test_every_entry_is_complete_and_cites_a_thread_it_was_seen_in():
    assert len(KNOWN_ERRORS) >= 70
    for e in KNOWN_ERRORS:
        assert e.title and e.causes and e.fixes and e.patterns, e.key
        assert e.source in {s.url for s in e.seen}, e.key
        assert all(_public_or_ours(s.url, e.layer) for s in e.seen), e.key
        assert all("{{" not in t for t in (*e.causes, *e.fixes)), e.key  # snippets expanded
        assert any("`" in f for f in e.fixes), e.key  # at least one exact command


def _public_or_ours(url: str, layer: str) -> bool:
    """A public thread, or for rlamd's own failures the file of this repository that
    prints the message."""
    if re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|discussions)/\d+", url):
        return True
    return layer == "rlamd" and (ROOT / url).is_file()


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
