"""API keys for `memoryscope serve`: the keys file, authentication, scopes, and the rate limiter."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.errors import ConfigError
from memoryscope.scrubbing import scrub
from memoryscope.server import access
from memoryscope.server.access import ApiKey, KeyRing, KeysFileError, hash_key
from memoryscope.server.limits import RateLimiter

WEB_KEY = "web-key-3c9f1a7e2b6d"
ACME_KEY = "acme-key-8d2e4f6a1c3b"
OPS_KEY = "ops-key-5b7d9f1e3a2c"
PASTED_KEY = "sk-pasted-4e8a2c6f0b1d"  # a key written into the file by mistake
SECRETS = (WEB_KEY, ACME_KEY, OPS_KEY, PASTED_KEY)

THREE_KEYS = f"""\
keys:
  - name: web-backend
    key_env: MEMORYSCOPE_KEY_WEB
    users: [alice, bob]
  - name: acme
    sha256: "{hash_key(ACME_KEY)}"
    workspaces: [acme]
  - name: ops
    key_env: MEMORYSCOPE_ADMIN_KEY
    admin: true
"""


@pytest.fixture(autouse=True)
def key_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The web and admin keys in the environment, as the server's deployment would set them."""
    monkeypatch.setenv("MEMORYSCOPE_KEY_WEB", WEB_KEY)
    monkeypatch.setenv("MEMORYSCOPE_ADMIN_KEY", OPS_KEY)
    monkeypatch.delenv("MEMORYSCOPE_KEY_UNSET", raising=False)


def write(tmp_path: Path, text: str, name: str = "keys.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def assert_reveals_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text
        assert hash_key(secret) not in text
        assert secret[:8] not in text  # nor a recognisable start of one


# -- loading -----------------------------------------------------------------------------------


def test_loads_each_form_and_authenticates_each_key(tmp_path: Path) -> None:
    ring = KeyRing.load(write(tmp_path, THREE_KEYS))
    assert len(ring) == 3 and ring
    web, acme, ops = ring.keys
    assert (web.name, web.users, web.workspaces, web.admin) == ("web-backend", frozenset({"alice", "bob"}), frozenset(), False)
    assert (acme.name, acme.users, acme.workspaces, acme.admin) == ("acme", frozenset(), frozenset({"acme"}), False)
    assert (ops.name, ops.admin) == ("ops", True)
    assert ring.authenticate(WEB_KEY) is web
    assert ring.authenticate(ACME_KEY) is acme
    assert ring.authenticate(OPS_KEY) is ops
    assert web.digest == digest(WEB_KEY) and acme.digest == digest(ACME_KEY)


def test_path_may_be_text_and_environ_may_be_given(tmp_path: Path) -> None:
    """`environ` replaces the process environment: the key comes from it, not from os.environ."""
    path = str(write(tmp_path, THREE_KEYS))
    other = "another-web-key-91d3"
    ring = KeyRing.load(path, environ={"MEMORYSCOPE_KEY_WEB": other, "MEMORYSCOPE_ADMIN_KEY": OPS_KEY})
    assert ring.authenticate(other) is not None and ring.authenticate(other) == ring.keys[0]
    assert ring.authenticate(WEB_KEY) is None


def test_json_indented_with_tabs_loads(tmp_path: Path) -> None:
    text = json.dumps({"keys": [{"name": "acme", "sha256": hash_key(ACME_KEY), "workspaces": ["acme"]}]}, indent="\t")
    assert "\t" in text
    ring = KeyRing.load(write(tmp_path, text, "keys.json"))
    assert [key.name for key in ring] == ["acme"]
    assert ring.authenticate(ACME_KEY) == ring.keys[0]


def test_upper_case_sha256_is_accepted(tmp_path: Path) -> None:
    text = f"keys:\n  - name: acme\n    sha256: {hash_key(ACME_KEY).upper()}\n    workspaces: [acme]\n"
    assert KeyRing.load(write(tmp_path, text)).authenticate(ACME_KEY) is not None


def test_keys_from_the_environment_are_hidden_from_logs(tmp_path: Path) -> None:
    KeyRing.load(write(tmp_path, THREE_KEYS))
    assert WEB_KEY not in scrub(f"401 for Authorization: Bearer {WEB_KEY}")
    assert OPS_KEY not in scrub(f"token={OPS_KEY}")


def test_describe_gives_name_scope_and_origin_only(tmp_path: Path) -> None:
    lines = KeyRing.load(write(tmp_path, THREE_KEYS)).describe()
    assert lines == [
        "web-backend: users alice, bob (key from $MEMORYSCOPE_KEY_WEB)",
        "acme: workspaces acme (key from sha256)",
        "ops: admin (key from $MEMORYSCOPE_ADMIN_KEY)",
    ]
    assert_reveals_no_secret("\n".join(lines))


def test_describe_shortens_long_scopes() -> None:
    key = ApiKey("many", digest(WEB_KEY), users=frozenset(f"user{n:02}" for n in range(25)))
    assert key.scope == "users " + ", ".join(f"user{n:02}" for n in range(10)) + " and 15 more"


# -- authentication ----------------------------------------------------------------------------


def test_hash_key_is_the_hex_sha256_of_the_utf8_key() -> None:
    assert hash_key("test") == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    assert hash_key("clé") == hashlib.sha256("clé".encode()).hexdigest()


@pytest.mark.parametrize("presented", [None, "", "wrong-key-0000", WEB_KEY + " ", WEB_KEY[:-1], hash_key(WEB_KEY)])
def test_anything_but_a_key_authenticates_as_no_one(tmp_path: Path, presented: str | None) -> None:
    ring = KeyRing.load(write(tmp_path, THREE_KEYS))
    assert ring.authenticate(presented) is None


def test_an_empty_ring_lets_no_one_in() -> None:
    ring = KeyRing.of()
    assert not ring and len(ring) == 0
    assert ring.authenticate(WEB_KEY) is None


@pytest.mark.parametrize("matching", ["first", "middle", "last", "none"])
def test_authenticate_compares_every_key_whichever_matches(monkeypatch: pytest.MonkeyPatch, matching: str) -> None:
    """No early exit: the number of comparisons, each constant-time, is the same for every outcome."""
    keys = [ApiKey(f"k{n}", digest(f"key-number-{n}"), users=frozenset({"u"})) for n in range(5)]
    ring = KeyRing.of(*keys)
    presented = {"first": "key-number-0", "middle": "key-number-2", "last": "key-number-4", "none": "key-number-9"}[matching]
    compared: list[tuple[bytes, bytes]] = []
    real_compare = access.hmac.compare_digest

    def counting_compare(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real_compare(a, b)

    monkeypatch.setattr(access.hmac, "compare_digest", counting_compare)
    found = ring.authenticate(presented)
    assert len(compared) == len(keys)
    assert [b for _, b in compared] == [key.digest for key in keys]  # each key once, in order
    assert found == (None if matching == "none" else keys[int(presented[-1])])


# -- scopes ------------------------------------------------------------------------------------


USERS_ONLY = ApiKey("web", digest("a-key-1"), users=frozenset({"alice", "bob"}))
WORKSPACES_ONLY = ApiKey("acme", digest("a-key-2"), workspaces=frozenset({"acme"}))
BOTH = ApiKey("acme-alice", digest("a-key-3"), users=frozenset({"alice"}), workspaces=frozenset({"acme"}))
ADMIN = ApiKey("ops", digest("a-key-4"), admin=True)


@pytest.mark.parametrize(
    ("key", "user", "workspace", "permitted"),
    [
        (USERS_ONLY, "alice", "", True),
        (USERS_ONLY, "bob", "anywhere", True),
        (USERS_ONLY, "carol", "", False),
        (WORKSPACES_ONLY, "anyone", "acme", True),
        (WORKSPACES_ONLY, "anyone", "globex", False),
        (WORKSPACES_ONLY, "anyone", "", False),
        (BOTH, "alice", "acme", True),
        (BOTH, "alice", "globex", False),
        (BOTH, "bob", "acme", False),
        (ADMIN, "anyone", "", True),
        (ADMIN, "anyone", "globex", True),
    ],
)
def test_permits(key: ApiKey, user: str, workspace: str, permitted: bool) -> None:
    assert key.permits(user, workspace) is permitted


def test_repr_and_str_show_name_and_scope_never_the_digest() -> None:
    for text in (repr(BOTH), str(BOTH), repr(KeyRing.of(BOTH))):
        assert "acme-alice" in text and "users alice; workspaces acme" in text
        assert BOTH.digest.hex() not in text and repr(BOTH.digest) not in text
    assert str(ADMIN) == "ops (admin)"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": "x", "digest": digest("k")}, "would reach no one"),
        ({"name": "x", "digest": digest("k"), "admin": True, "users": frozenset({"a"})}, "not both"),
        ({"name": "x", "digest": b"short", "admin": True}, "32-byte SHA-256"),
        ({"name": " ", "digest": digest("k"), "admin": True}, "needs a name"),
    ],
)
def test_api_key_refuses_what_the_file_would_refuse(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ApiKey(**arguments)  # type: ignore[arg-type]  # the test builds arguments from a table


def test_key_ring_refuses_a_shared_name_or_a_shared_key() -> None:
    with pytest.raises(ValueError, match="share a name"):
        KeyRing.of(ADMIN, ApiKey("ops", digest("other"), admin=True))
    with pytest.raises(ValueError, match="'ops' and 'ops2' are the same key"):
        KeyRing.of(ADMIN, ApiKey("ops2", ADMIN.digest, admin=True))


# -- errors in the keys file -------------------------------------------------------------------

SHA = hash_key(ACME_KEY)


@pytest.mark.parametrize(
    ("text", "where", "fragments"),
    [
        pytest.param("keys: [\n", "", ["invalid YAML at line 2"], id="not-yaml"),
        pytest.param('{"keys": [}', "", ["invalid JSON at line 1"], id="not-json"),
        pytest.param(
            "keys:\n  - name: a\n    key_env: MEMORYSCOPE_KEY_WEB\n    users: [alice]\n    users: [bob]\n",
            "",
            ["duplicate key 'users'"],
            id="duplicate-yaml-key",
        ),
        pytest.param("- name: a\n", "", ["has a list at the top", "keys:"], id="top-level-list"),
        pytest.param("", "", ["the file is empty"], id="empty-file"),
        pytest.param("key:\n  - name: a\n", "key", ["Did you mean 'keys'?"], id="no-keys-typo"),
        pytest.param("keys:\n  name: a\n", "keys", ["must be a list of entries", "got a mapping"], id="keys-not-a-list"),
        pytest.param("keys: []\n", "keys", ["is empty", "no one could call"], id="keys-empty"),
        pytest.param(f"keys:\n  - {PASTED_KEY}\n", "keys[0]", ["must be a mapping", "got text"], id="entry-not-a-mapping"),
        pytest.param(
            "keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n    user: [alice]\n",
            "keys[0] (web).user",
            ["unknown field", "Did you mean 'users'?"],
            id="unknown-field",
        ),
        pytest.param("keys:\n  - key_env: MEMORYSCOPE_KEY_WEB\n    users: [alice]\n", "keys[0]", ["has no name:"], id="no-name"),
        pytest.param(
            "keys:\n  - name: '  '\n    key_env: MEMORYSCOPE_KEY_WEB\n    users: [alice]\n",
            "keys[0].name",
            ["got blank text"],
            id="blank-name",
        ),
        pytest.param(
            f"keys:\n  - name: web\n    key: {PASTED_KEY}\n    users: [alice]\n",
            "keys[0] (web).key",
            ["never write a key in the file", "key_env:", "sha256:", "memoryscope serve --hash-key"],
            id="inline-key",
        ),
        pytest.param(
            f"keys:\n  - name: web\n    api_key: {PASTED_KEY}\n    users: [alice]\n",
            "keys[0] (web).api_key",
            ["never write a key in the file"],
            id="inline-api-key",
        ),
        pytest.param(
            f"keys:\n  - name: web\n    secret: {PASTED_KEY}\n    users: [alice]\n",
            "keys[0] (web).secret",
            ["never write a key in the file"],
            id="inline-secret",
        ),
        pytest.param("keys:\n  - name: web\n    users: [alice]\n", "keys[0] (web)", ["gives no key", "key_env:"], id="no-key"),
        pytest.param(
            f"keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n    sha256: {SHA}\n    users: [alice]\n",
            "keys[0] (web)",
            ["both key_env: and sha256:"],
            id="both-key-forms",
        ),
        pytest.param(
            "keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_UNSET\n    users: [alice]\n",
            "keys[0] (web).key_env",
            ["environment variable MEMORYSCOPE_KEY_UNSET is not set"],
            id="key-env-unset",
        ),
        pytest.param(
            f"keys:\n  - name: web\n    key_env: {PASTED_KEY}\n    users: [alice]\n",
            "keys[0] (web).key_env",
            ["must be the name of an environment variable"],
            id="key-env-is-a-pasted-key",
        ),
        pytest.param(
            "keys:\n  - name: web\n    key_env: sk_pasted_4e8a2c6f0b1d\n    users: [alice]\n",
            "keys[0] (web).key_env",
            ["is not set", "name is not shown"],
            id="key-env-lower-case-unset",
        ),
        pytest.param(
            f"keys:\n  - name: acme\n    sha256: {SHA[:-1]}\n    workspaces: [acme]\n",
            "keys[0] (acme).sha256",
            ["64 hex characters", "got 63 characters"],
            id="sha256-too-short",
        ),
        pytest.param(
            f"keys:\n  - name: acme\n    sha256: {PASTED_KEY}\n    workspaces: [acme]\n",
            "keys[0] (acme).sha256",
            ["64 hex characters", "other than 0-9, a-f", "If you wrote the key itself here"],
            id="sha256-is-a-pasted-key",
        ),
        pytest.param(
            "keys:\n  - name: acme\n    sha256: 12345\n    workspaces: [acme]\n",
            "keys[0] (acme).sha256",
            ["got a number; quote it"],
            id="sha256-not-text",
        ),
        pytest.param(
            "keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n",
            "keys[0] (web)",
            ["would reach no one", "users:", "workspaces:", "admin: true"],
            id="no-scope",
        ),
        pytest.param(
            "keys:\n  - name: ops\n    key_env: MEMORYSCOPE_ADMIN_KEY\n    admin: true\n    workspaces: [acme]\n",
            "keys[0] (ops)",
            ["ambiguous"],
            id="admin-with-scope",
        ),
        pytest.param(
            "keys:\n  - name: ops\n    key_env: MEMORYSCOPE_ADMIN_KEY\n    admin: 'yes'\n",
            "keys[0] (ops).admin",
            ["must be true or false"],
            id="admin-not-bool",
        ),
        pytest.param(
            "keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n    users: alice\n",
            "keys[0] (web).users",
            ["must be a list of user names", "got text"],
            id="users-not-a-list",
        ),
        pytest.param(
            "keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n    users: [alice, '']\n",
            "keys[0] (web).users[1]",
            ["is blank"],
            id="users-blank-item",
        ),
        pytest.param(
            "keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n    workspaces: [acme, 42]\n",
            "keys[0] (web).workspaces[1]",
            ["got a number 42 (quote it)"],
            id="workspaces-number-item",
        ),
        pytest.param(
            "keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n    users: []\n",
            "keys[0] (web).users",
            ["is empty", "reach no user"],
            id="users-empty",
        ),
        pytest.param(
            "keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n    users: [a]\n"
            "  - name: web\n    key_env: MEMORYSCOPE_ADMIN_KEY\n    admin: true\n",
            "keys[1] (web)",
            ["the name 'web' is already used by keys[0] (web)"],
            id="duplicate-names",
        ),
        pytest.param(
            f"keys:\n  - name: web\n    key_env: MEMORYSCOPE_KEY_WEB\n    users: [a]\n"
            f"  - name: web-again\n    sha256: {hash_key(WEB_KEY)}\n    users: [b]\n",
            "keys[1] (web-again)",
            ["is the same key as keys[0] (web)"],
            id="same-key-twice",
        ),
    ],
)
def test_each_problem_names_the_file_and_the_entry_and_no_secret(
    tmp_path: Path, text: str, where: str, fragments: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(KeysFileError) as caught:
        KeyRing.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert where in [place for place, _ in caught.value.problems]
    for fragment in fragments:
        assert fragment in message
    assert_reveals_no_secret(message)


@pytest.mark.parametrize("value", ["", "   ", "has a space-in-it", "tab\there", "clé-non-ascii"])
def test_key_variable_empty_or_unsendable_is_named_without_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MEMORYSCOPE_KEY_WEB", value)
    with pytest.raises(KeysFileError) as caught:
        KeyRing.load(write(tmp_path, THREE_KEYS))
    message = str(caught.value)
    assert "keys[0] (web-backend).key_env: environment variable MEMORYSCOPE_KEY_WEB" in message
    assert ("is empty" if not value.strip() else "an HTTP header does not carry intact") in message
    if value.strip():
        assert value not in message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = (
        "keys:\n"
        "  - name: web\n    key_env: MEMORYSCOPE_KEY_UNSET\n    users: [alice]\n"
        f"  - name: acme\n    sha256: {PASTED_KEY}\n    workspaces: [acme]\n"
        "  - name: ops\n    key_env: MEMORYSCOPE_ADMIN_KEY\n"
    )
    path = write(tmp_path, text)
    with pytest.raises(KeysFileError) as caught:
        KeyRing.load(path)
    assert isinstance(caught.value, ConfigError)
    assert [place for place, _ in caught.value.problems] == ["keys[0] (web).key_env", "keys[1] (acme).sha256", "keys[2] (ops)"]
    assert str(caught.value).startswith(f"{path}: 3 problems in the API keys file:\n  - keys[0] (web).key_env: ")
    assert_reveals_no_secret(str(caught.value))


def test_missing_file_and_directory_and_non_utf8_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(KeysFileError, match=r"nope\.yaml: API keys file not found; check server.api_keys_file"):
        KeyRing.load(missing)
    with pytest.raises(KeysFileError, match="is a directory"):
        KeyRing.load(tmp_path)
    binary = tmp_path / "keys.bin"
    binary.write_bytes(b"keys:\n  - name: \xff\xfe\n")
    with pytest.raises(KeysFileError, match=r"keys\.bin: is not UTF-8 text"):
        KeyRing.load(binary)


# -- rate limits -------------------------------------------------------------------------------


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_burst_then_retry_after_one_token() -> None:
    clock = FakeClock()
    limiter = RateLimiter(60, burst=3, clock=clock)  # one token a second
    assert [limiter.check("web") for _ in range(3)] == [None, None, None]
    assert limiter.check("web") == pytest.approx(1.0)
    assert limiter.check("web") == pytest.approx(1.0)  # a refused request takes nothing


def test_burst_defaults_to_per_minute() -> None:
    limiter = RateLimiter(5, clock=FakeClock())
    results = [limiter.check("web") for _ in range(6)]
    assert results[:5] == [None] * 5 and results[5] is not None


def test_tokens_refill_at_per_minute_over_sixty_up_to_the_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(30, burst=2, clock=clock)  # a token every 2 seconds
    assert limiter.check("web") is None and limiter.check("web") is None
    assert limiter.check("web") == pytest.approx(2.0)
    clock.advance(0.5)
    assert limiter.check("web") == pytest.approx(1.5)
    clock.advance(1.5)
    assert limiter.check("web") is None
    assert limiter.check("web") == pytest.approx(2.0)
    clock.advance(3600)  # a long pause refills to the burst, no further
    assert [limiter.check("web") for _ in range(3)][:2] == [None, None]
    assert limiter.check("web") is not None


def test_keys_have_separate_buckets() -> None:
    limiter = RateLimiter(60, burst=1, clock=FakeClock())
    assert limiter.check("web") is None
    assert limiter.check("web") is not None
    assert limiter.check("acme") is None


def test_zero_per_minute_means_no_limit() -> None:
    limiter = RateLimiter(0, burst=1, clock=FakeClock())
    assert all(limiter.check("web") is None for _ in range(10_000))
    assert limiter.bucket_count() == 0


@pytest.mark.parametrize(("per_minute", "burst"), [(-1, None), (60, 0)])
def test_refuses_negative_rates_and_empty_bursts(per_minute: int, burst: int | None) -> None:
    with pytest.raises(ValueError, match="must be"):
        RateLimiter(per_minute, burst=burst)


def test_full_buckets_are_forgotten() -> None:
    clock = FakeClock()
    limiter = RateLimiter(60, clock=clock)
    for n in range(1500):
        limiter.check(f"old-{n}")
    clock.advance(120)  # every old bucket is full again
    for n in range(600):
        limiter.check(f"new-{n}")
    assert limiter.bucket_count() == 600


def test_the_table_is_capped_even_when_every_bucket_is_in_use() -> None:
    limiter = RateLimiter(60, burst=1, clock=FakeClock(), max_buckets=50)
    for n in range(200):
        limiter.check(f"client-{n}")
    assert limiter.bucket_count() == 50


def test_the_cap_forgets_the_least_recently_used_bucket() -> None:
    limiter = RateLimiter(60, burst=1, clock=FakeClock(), max_buckets=2)
    limiter.check("a")
    limiter.check("b")
    limiter.check("a")  # refused, but used: "b" is now the older
    limiter.check("c")  # "b" is forgotten, so its bucket is full again
    assert limiter.check("b") is None
    assert limiter.check("c") is not None


@pytest.fixture
def frequent_thread_switches() -> Iterator[None]:
    """Switch threads as often as the interpreter can, to give races a chance to show."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("frequent_thread_switches")
def test_threads_never_take_more_than_the_burst() -> None:
    limiter = RateLimiter(600, burst=50, clock=FakeClock())  # the clock stands still: no refill
    allowed: list[int] = []
    start = threading.Barrier(8)

    def client() -> None:
        start.wait()
        allowed.append(sum(limiter.check("shared") is None for _ in range(200)))

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(allowed) == 50
