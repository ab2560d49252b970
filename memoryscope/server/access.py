"""Who may call the server: API keys, what each may reach, and how often it may call.

The keys file (`server.api_keys_file`) lists one entry per client. A key is never written in the
file: an entry gives it by the name of an environment variable that holds it (`key_env`), or by
its SHA-256 in hex (`sha256`), so the file can be committed and shared. JSON is read too.

    keys:
      - name: web-backend            # a label for logs and metrics; never the secret
        key_env: MEMORYSCOPE_KEY_WEB # the key is this environment variable's value
        users: [alice, bob]          # may read/write only these users' memories
      - name: acme
        sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        workspaces: [acme]           # any user, but only in these workspaces
      - name: ops
        key_env: MEMORYSCOPE_ADMIN_KEY
        admin: true                  # every user; plus the admin endpoints (/metrics)

A key's hex SHA-256: `printf %s "$KEY" | memoryscope serve --hash-key` (or `sha256sum`), or
`hash_key(key)` from this module.

Secrets stay secret: only the SHA-256 digest of a key is kept, `repr` and `describe` show names
and scopes, and no error quotes a key, a `sha256` value or an environment variable's value. Keys
read from the environment are registered with `memoryscope.scrubbing`, so logs hide them too.
`KeyRing.authenticate` compares the digest of the presented key with every key's digest, always
all of them, so its timing tells nothing about which key matched or how much of one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memoryscope.config.source import _load_yaml  # the config files' own loader: refuses duplicate keys and aliases
from memoryscope.errors import ConfigError, closest, shorten
from memoryscope.scrubbing import register_key

__all__ = ["hash_key", "ApiKey", "KeyRing", "KeysFileError"]

_FIELDS = ("name", "key_env", "sha256", "users", "workspaces", "admin")
_INLINE_SECRET_FIELDS = ("key", "api_key", "apikey", "secret", "token", "password")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHOWN_VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")  # a conventional name; anything else may be a pasted key
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # what an Authorization header carries intact: printable ASCII, no spaces
_HOW_TO_GIVE_A_KEY = (
    "give key_env: (the name of an environment variable holding the key) or sha256: (the key's SHA-256 "
    'in hex, which printf %s "$KEY" | memoryscope serve --hash-key prints)'
)


def hash_key(key: str) -> str:
    """The hex SHA-256 of `key` (UTF-8), as a keys file's `sha256:` wants it."""
    return _digest(key).hex()


def _digest(key: str) -> bytes:
    # surrogateescape: a non-UTF-8 environment value hashes as its original bytes
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()


@dataclass(frozen=True, repr=False)
class ApiKey:
    """One client's key, kept as its SHA-256 digest, and what it may reach.

    `admin` reaches every user and the admin endpoints; otherwise `users` and `workspaces` each
    narrow what the key reaches, and at least one of them must be given (a key with no scope
    would reach everyone while not being an admin, which no one means to write). `origin` says
    where the key came from (`$VARIABLE` or `sha256`), for the startup log.
    """

    name: str
    digest: bytes
    admin: bool = False
    users: frozenset[str] = frozenset()
    workspaces: frozenset[str] = frozenset()
    origin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "users", frozenset(self.users))  # accept any iterable, keep the object hashable
        object.__setattr__(self, "workspaces", frozenset(self.workspaces))
        if not self.name or not self.name.strip():
            raise ValueError("ApiKey needs a name (a label for logs and metrics)")
        if len(self.digest) != 32:
            raise ValueError(
                f"ApiKey {self.name!r}: digest must be the 32-byte SHA-256 of the key (hashlib.sha256(key).digest())"
            )
        if self.admin and (self.users or self.workspaces):
            raise ValueError(f"ApiKey {self.name!r}: an admin key reaches every user; give admin or users/workspaces, not both")
        if not self.admin and not (self.users or self.workspaces):
            raise ValueError(f"ApiKey {self.name!r} would reach no one: give users, workspaces or admin=True")

    def permits(self, user: str, workspace: str | None = "") -> bool:
        """Whether this key may read and write `user`'s memories in `workspace` (None: in every
        workspace, which a key scoped to workspaces may not)."""
        if self.admin:
            return True
        if self.users and user not in self.users:
            return False
        if workspace is None:
            return not self.workspaces
        return not (self.workspaces and workspace not in self.workspaces)

    @property
    def scope(self) -> str:
        """What the key reaches, in words: `admin`, `users alice, bob`, `users alice; workspaces acme`."""
        if self.admin:
            return "admin"
        parts = [
            f"{label} {_listed(names)}" for label, names in (("users", self.users), ("workspaces", self.workspaces)) if names
        ]
        return "; ".join(parts)

    def __repr__(self) -> str:
        return f"ApiKey(name={self.name!r}, scope={self.scope!r})"

    def __str__(self) -> str:
        return f"{self.name} ({self.scope})"


def _listed(names: Iterable[str], limit: int = 10) -> str:
    ordered = sorted(names)
    more = f" and {len(ordered) - limit} more" if len(ordered) > limit else ""
    return ", ".join(ordered[:limit]) + more


class KeysFileError(ConfigError):
    """Problems in an API keys file; each names its entry (`keys[1] (acme).sha256`) and what to write."""

    def _render(self) -> str:
        text = super()._render()
        return text.replace(" problems in config:", " problems in the API keys file:", 1)


@dataclass(frozen=True)
class KeyRing:
    """The server's API keys. Empty when the server runs without keys (loopback only)."""

    keys: tuple[ApiKey, ...] = ()

    def __post_init__(self) -> None:
        names = [key.name for key in self.keys]
        if len(set(names)) != len(names):
            raise ValueError(f"KeyRing: two keys share a name: {sorted(n for n in set(names) if names.count(n) > 1)}")
        by_digest: dict[bytes, str] = {}
        for key in self.keys:
            if key.digest in by_digest:
                raise ValueError(f"KeyRing: keys {by_digest[key.digest]!r} and {key.name!r} are the same key")
            by_digest[key.digest] = key.name

    @classmethod
    def of(cls, *keys: ApiKey) -> KeyRing:
        return cls(tuple(keys))

    @classmethod
    def load(cls, path: str | Path, environ: Mapping[str, str] | None = None) -> KeyRing:
        """The keys of the file at `path`, reading `key_env` variables from `environ` (default:
        the process environment). Raises `KeysFileError` listing every problem of the file."""
        environ = os.environ if environ is None else environ
        data = _read_keys_file(Path(path))
        reader = _EntryReader(environ)
        keys = reader.read_file(data)
        if reader.problems:
            raise KeysFileError(reader.problems, source=str(path))
        for secret in reader.secrets:
            register_key(secret)  # logs hide it from now on, whoever logs it
        return cls(tuple(keys))

    def __len__(self) -> int:
        return len(self.keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def __iter__(self) -> Iterator[ApiKey]:
        return iter(self.keys)

    def authenticate(self, presented: str | None) -> ApiKey | None:
        """The key `presented` is, or None. Every key's digest is compared, matching or not, each
        with `hmac.compare_digest`, so the time taken does not depend on which key matched."""
        if not presented:
            return None
        digest = _digest(presented)
        found: ApiKey | None = None
        for key in self.keys:
            if hmac.compare_digest(digest, key.digest):
                found = key
        return found

    def describe(self) -> list[str]:
        """One line per key for the startup log: name, scope and origin; never the key or its digest."""
        return [f"{key.name}: {key.scope}" + (f" (key from {key.origin})" if key.origin else "") for key in self.keys]


# -- reading the file --------------------------------------------------------------------------


def _read_keys_file(path: Path) -> Any:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeysFileError("API keys file not found; check server.api_keys_file (relative to the config file)", source) from None
    except IsADirectoryError:
        raise KeysFileError("is a directory; server.api_keys_file must name a YAML file of keys", source) from None
    except UnicodeDecodeError:
        raise KeysFileError("is not UTF-8 text; save it as UTF-8 YAML", source) from None
    except OSError as error:
        raise KeysFileError(f"cannot be read: {error.strerror or type(error).__name__}", source) from None
    if text.lstrip().startswith("{"):
        return _parse_json(text, source)
    try:
        return _load_yaml(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        place = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or type(error).__name__  # never str(error): it quotes the file
        raise KeysFileError(f"invalid YAML{place}: {problem}", source) from None


def _parse_json(text: str, source: str) -> Any:
    # JSON is YAML, but PyYAML refuses the tabs that JSON writers indent with; so JSON is read as JSON
    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        for key in keys:
            if keys.count(key) > 1:
                raise KeysFileError(f"invalid JSON: duplicate key {shorten(key)}", source)
        return dict(pairs)

    try:
        return json.loads(text, object_pairs_hook=refuse_duplicates)
    except json.JSONDecodeError as error:
        raise KeysFileError(f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}", source) from None


_EXAMPLE = "keys:\n  - name: web-backend\n    key_env: MEMORYSCOPE_KEY_WEB\n    users: [alice]"


class _EntryReader:
    """Reads the parsed file into `ApiKey`s, collecting every problem instead of stopping at the first."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[tuple[str, str]] = []
        self.secrets: list[str] = []  # keys read from the environment, to register for scrubbing

    def problem(self, where: str, message: str) -> None:
        self.problems.append((where, message))

    def read_file(self, data: Any) -> list[ApiKey]:
        if not isinstance(data, dict):
            got = "is empty" if data is None else f"has {_kind(data)} at the top"
            self.problem("", f"the file {got}; it must be a mapping with a keys: list, e.g.\n{_EXAMPLE}")
            return []
        for extra in sorted(map(str, data.keys() - {"keys"})):
            hint = " Did you mean 'keys'?" if closest(extra, ["keys"]) else ""
            self.problem(extra, f"unknown top-level field.{hint} The file holds only keys: (a list of entries)")
        if "keys" not in data:
            self.problem("", f"the file has no keys: list; write one, e.g.\n{_EXAMPLE}")
            return []
        entries = data["keys"]
        if not isinstance(entries, list):
            self.problem("keys", f"must be a list of entries (each starting with '- name:'), got {_kind(entries)}")
            return []
        if not entries:
            self.problem("keys", "is empty, so no one could call the server; add an entry, or remove server.api_keys_file")
        keys: list[ApiKey] = []
        names: dict[str, str] = {}  # name -> where first seen
        digests: dict[bytes, str] = {}  # digest -> where first seen
        for index, entry in enumerate(entries):
            key = self.read_entry(index, entry)
            name = _name_of(entry)
            if name is not None:
                where = _where(index, name)
                if name in names:
                    self.problem(where, f"the name {name!r} is already used by {names[name]}; give each key its own name")
                    continue
                names[name] = where
            if key is None:
                continue
            if key.digest in digests:
                self.problem(
                    _where(index, key.name), f"is the same key as {digests[key.digest]}; give each client a key of its own"
                )
                continue
            digests[key.digest] = _where(index, key.name)
            keys.append(key)
        return keys

    def read_entry(self, index: int, entry: Any) -> ApiKey | None:
        """The entry's key, or None after reporting why it has none."""
        if not isinstance(entry, dict):
            self.problem(f"keys[{index}]", f"must be a mapping (name:, key_env: or sha256:, and a scope), got {_kind(entry)}")
            return None
        before = len(self.problems)
        raw_name = entry.get("name")
        name = _name_of(entry)
        where = _where(index, name)
        if raw_name is None:
            self.problem(where, "has no name:; give it a label such as name: web-backend (shown in logs, never the key)")
        elif name is None:
            got = "blank text" if isinstance(raw_name, str) else _kind(raw_name)
            self.problem(f"{where}.name", f"must be a label such as web-backend (shown in logs, never the key), got {got}")
        self.check_fields(where, entry)
        digest, origin = self.read_key(where, entry)
        admin = entry.get("admin", False)
        if not isinstance(admin, bool):
            self.problem(f"{where}.admin", f"must be true or false, got {_kind(admin)}")
        users = self.read_names(f"{where}.users", entry.get("users"), "user")
        workspaces = self.read_names(f"{where}.workspaces", entry.get("workspaces"), "workspace")
        if len(self.problems) > before:
            return None  # scope and digest questions are moot until the entry reads right
        if admin and (users or workspaces):
            self.problem(
                where, "admin: true reaches every user, so users:/workspaces: beside it are ambiguous; keep one or the other"
            )
            return None
        if not admin and not (users or workspaces):
            self.problem(where, "would reach no one: give users: [...], workspaces: [...], or admin: true")
            return None
        if name is None or digest is None:
            return None  # unreachable: both are reported above
        return ApiKey(name, digest, admin is True, users, workspaces, origin)

    def check_fields(self, where: str, entry: dict[Any, Any]) -> None:
        for found in entry:
            if found in _FIELDS:
                continue
            if found in _INLINE_SECRET_FIELDS:
                self.problem(
                    f"{where}.{found}",
                    f"never write a key in the file (remove it; replace the key if the file was shared); {_HOW_TO_GIVE_A_KEY}",
                )
                continue
            close = closest(str(found), _FIELDS)
            hint = f" Did you mean {close!r}?" if close else ""
            self.problem(f"{where}.{found}", f"unknown field.{hint} Fields: {', '.join(_FIELDS)}")

    def read_key(self, where: str, entry: dict[Any, Any]) -> tuple[bytes | None, str]:
        """The key's digest and origin; (None, "") after reporting why there is none."""
        has_env, has_sha = "key_env" in entry, "sha256" in entry
        if has_env and has_sha:
            self.problem(where, "gives both key_env: and sha256:; keep one")
        elif not has_env and not has_sha:
            if not any(field in entry for field in _INLINE_SECRET_FIELDS):  # that message says this already
                self.problem(where, f"gives no key: {_HOW_TO_GIVE_A_KEY}")
        elif has_env:
            return self.read_env_key(f"{where}.key_env", entry["key_env"])
        else:
            return self.read_sha256(f"{where}.sha256", entry["sha256"]), "sha256"
        return None, ""

    def read_env_key(self, where: str, variable: Any) -> tuple[bytes | None, str]:
        if not isinstance(variable, str) or not _VARIABLE_NAME.fullmatch(variable):
            # not echoed: what does not look like a variable name may be the key itself
            self.problem(
                where,
                "must be the name of an environment variable (letters, digits and _, e.g. MEMORYSCOPE_KEY_WEB); "
                "if you wrote the key itself here, remove it and put it in that variable",
            )
            return None, ""
        if _SHOWN_VARIABLE_NAME.fullmatch(variable):
            label = f"environment variable {variable}"
        else:  # a lower-case "name" may be a key pasted by mistake
            label = "the environment variable it names (the name is not shown: it is not in upper case, so it may be a key)"
        value = self.environ.get(variable)
        if value is None:
            self.problem(where, f"{label} is not set; export it with the key before starting the server")
        elif not value.strip():
            self.problem(where, f"{label} is empty; set it to the key")
        elif not _HEADER_SAFE.fullmatch(value):
            self.problem(
                where,
                f"{label} holds spaces, control or non-ASCII characters, which an HTTP header does not carry intact; "
                "use printable ASCII only, e.g. from python -c 'import secrets; print(secrets.token_urlsafe(32))'",
            )
        else:
            self.secrets.append(value)
            return _digest(value), f"${variable}"
        return None, ""

    def read_names(self, where: str, value: Any, kind: str) -> frozenset[str]:
        """A `users:` or `workspaces:` list; empty when absent or after reporting a problem."""
        if value is None:
            return frozenset()
        if not isinstance(value, list):
            self.problem(where, f"must be a list of {kind} names, e.g. [{kind}-a, {kind}-b], got {_kind(value)}")
            return frozenset()
        if not value:
            self.problem(where, f"is empty, so the key would reach no {kind}; list at least one, or leave the field out")
        for position, item in enumerate(value):
            if not isinstance(item, str):
                self.problem(
                    f"{where}[{position}]", f"must be a {kind} name in text, got {_kind(item)} {shorten(item)} (quote it)"
                )
            elif not item.strip():
                self.problem(f"{where}[{position}]", f"is blank; give a {kind} name")
        return frozenset(item for item in value if isinstance(item, str) and item.strip())

    def read_sha256(self, where: str, value: Any) -> bytes | None:
        # never echo the value: a key pasted here by mistake would end up in logs
        text = value.strip().lower() if isinstance(value, str) else None
        if text is not None and _HEX_DIGEST.fullmatch(text):
            return bytes.fromhex(text)
        if text is None:
            got = f"got {_kind(value)}; quote it"
        else:
            non_hex = " and characters other than 0-9, a-f" if re.search(r"[^0-9a-f]", text) else ""
            got = f"got {len(text)} characters{non_hex}"
        self.problem(
            where,
            f"must be the key's SHA-256 as 64 hex characters, {got}. If you wrote the key itself here, remove it; "
            'get its SHA-256 with printf %s "$KEY" | memoryscope serve --hash-key',
        )
        return None


def _name_of(entry: Any) -> str | None:
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) and name.strip() else None


def _where(index: int, name: str | None) -> str:
    return f"keys[{index}] ({name})" if name else f"keys[{index}]"


def _kind(value: Any) -> str:
    """What a value is, without quoting it (it may be a secret): `a mapping`, `a list`, `text`."""
    kinds = {dict: "a mapping", list: "a list", str: "text", bool: "true/false", int: "a number", float: "a number"}
    return "nothing" if value is None else kinds.get(type(value), f"a {type(value).__name__}")


