"""`memoryscope.scrubbing`: the one rule that hides API keys, and its log records.

Long keys are hidden wherever they appear, cut short or not; short ones (`e`, as local servers
take) only where they stand as a key, so ordinary words are never mangled.
"""

from __future__ import annotations

import logging

import pytest

from memoryscope.errors import ModelError, WorkerError
from memoryscope.scrubbing import KeyScrubbingFilter, register_key, scrub, scrub_record

LONG = "sk-scrub-0d9c8b7a6f5e4d3c"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Incorrect API key provided: {LONG}.", "Incorrect API key provided: ***."),
        (f"key{LONG}tail", "key***tail"),  # a secret is hidden even inside a longer word
        (f'{{"error": "bad key {LONG[:12]}…', '{"error": "bad key ***…'),  # cut off by a snippet
        (f"bad key {LONG[:12]}...", "bad key ***..."),
        (f"bad key {LONG[:12]}", "bad key ***"),  # cut off at the end of the text
        (f"xxx{LONG[:12]}…", "xxx***…"),
        (f"task {LONG[:3]}… and sk-scrubbing, desk-scrub", f"task {LONG[:3]}… and sk-scrubbing, desk-scrub"),  # not cut off
        ("nothing to hide", "nothing to hide"),
    ],
)
def test_a_long_key_is_hidden_whole_and_cut_off(text: str, expected: str) -> None:
    assert scrub(text, [LONG]) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("malformed response: expected a list", "malformed response: expected a list"),
        ("Authorization: Bearer e", "Authorization: Bearer ***"),
        ('{"api_key": "e", "name": "e"}', '{"api_key": "***", "name": "e"}'),
        ("invalid key=e; retry", "invalid key=***; retry"),
        ("Incorrect API key provided: e.", "Incorrect API key provided: ***."),
        ("api_key: eval", "api_key: eval"),  # not the key, only starts like it
    ],
)
def test_a_short_key_is_hidden_only_where_it_stands_as_the_key(text: str, expected: str) -> None:
    assert scrub(text, ["e"]) == expected


def test_several_keys_are_hidden_and_none_means_no_change() -> None:
    other = "tok-0123456789abcdef"
    assert scrub(f"{LONG} then {other}; Bearer x", [LONG, other, "x", None]) == "*** then ***; Bearer ***"
    assert scrub(f"{LONG}", []) == LONG


def test_errors_that_quote_a_server_are_scrubbed() -> None:
    register_key(LONG)
    model_error = ModelError("openai_like", "qwen", "http://127.0.0.1/v1", f"HTTP 401: bad key {LONG}")
    assert LONG not in str(model_error) and "HTTP 401: bad key ***" in str(model_error)
    worker_error = WorkerError("consolidate_memory", "info_filter", RuntimeError(f"bad key {LONG}"))
    assert LONG not in str(worker_error) and "RuntimeError: bad key ***" in str(worker_error)


def test_a_record_is_scrubbed_in_message_args_and_traceback() -> None:
    register_key(LONG)
    try:
        raise RuntimeError(f"bad key {LONG}")
    except RuntimeError as error:
        record = logging.LogRecord("x", logging.DEBUG, __file__, 1, "sent %s", ({"Authorization": f"Bearer {LONG}"},),
                                   (type(error), error, error.__traceback__))  # fmt: skip
    scrub_record(record)  # made directly, not through the factory: scrubbed here
    formatted = logging.Formatter().format(record)
    assert LONG not in formatted and "Bearer ***" in formatted and "RuntimeError: bad key ***" in formatted
    assert record.exc_info is None  # a handler cannot read the key back from the exception


def test_the_filter_scrubs_and_keeps_every_record() -> None:
    register_key(LONG)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, f"key {LONG}", None, None)
    assert KeyScrubbingFilter().filter(record) is True
    assert record.getMessage() == "key ***"


def test_records_without_a_key_are_left_as_they_are(caplog: pytest.LogCaptureFixture) -> None:
    register_key(LONG)
    with caplog.at_level(logging.INFO, logger="memoryscope"):
        logging.getLogger("memoryscope.test").info("%d memories for %s", 3, "ann")
    (record,) = caplog.records
    assert record.msg == "%d memories for %s" and record.args == (3, "ann")
