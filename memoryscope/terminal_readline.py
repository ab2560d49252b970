"""What `memoryscope.terminal` uses of readline: the module where the platform has it, the chat's
input history for the length of one session, and GNU readline's own redraw.

The history file is `$MEMORYSCOPE_CHAT_HISTORY` (set but empty: no file), else
`~/.memoryscope/chat_history`, beside the default store. It keeps the last `HISTORY_LENGTH`
lines, is readable by its owner only (it holds what was typed), and each session appends its
own lines, so two chats open at once keep both. Only a chat on a terminal reads or writes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["HISTORY_ENV", "HISTORY_LENGTH", "history_path", "load_readline", "readline_history", "native_redraw"]

logger = logging.getLogger("memoryscope.cli")

HISTORY_ENV = "MEMORYSCOPE_CHAT_HISTORY"
HISTORY_LENGTH = 1000
_DEFAULT_HISTORY = "~/.memoryscope/chat_history"


def load_readline() -> ModuleType | None:
    """The standard `readline` module, or None on a platform without it (Windows, some builds)."""
    try:
        import readline
    except ImportError:
        return None
    return readline


def history_path(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the chat keeps its input history; None for nowhere."""
    if HISTORY_ENV in environ:
        value = environ[HISTORY_ENV].strip()
        return Path(value).expanduser() if value else None
    return Path(_DEFAULT_HISTORY).expanduser()


@contextlib.contextmanager
def readline_history(editor: Any, path: Path | None) -> Iterator[None]:
    """Within the block, readline (`editor`) holds this chat's history, loaded from `path` and
    appended to it at the end, and adds no line by itself (the caller chooses what to keep). Then
    it gets back the history it had (a Python REPL's, when `CliMemoryChat.run()` was called from
    one) and its default of adding every line."""
    if editor is None:
        yield
        return
    previous = [editor.get_history_item(index) for index in range(1, editor.get_current_history_length() + 1)]
    previous_length = editor.get_history_length()
    editor.clear_history()
    editor.set_history_length(HISTORY_LENGTH)
    editor.set_auto_history(False)
    loaded = _load(editor, path)
    try:
        yield
    finally:
        if path is not None:
            _save(editor, path, editor.get_current_history_length() - loaded)
        editor.clear_history()
        for item in previous:
            if item is not None:
                editor.add_history(item)
        editor.set_history_length(previous_length)
        editor.set_auto_history(True)  # readline's default, which Python's own REPL relies on


def _load(editor: Any, path: Path | None) -> int:
    """Read the history file into readline; how many lines it held."""
    if path is None:
        return 0
    try:
        editor.read_history_file(str(path))
    except FileNotFoundError:
        pass
    except OSError as error:
        logger.warning("chat history %s not read: %s", path, error)
    return int(editor.get_current_history_length())


def _save(editor: Any, path: Path, added: int) -> None:
    """Append this session's `added` lines to the file, which readline then cuts to its last
    `HISTORY_LENGTH` lines."""
    if added <= 0:
        return
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))  # private before the first line
        append = getattr(editor, "append_history_file", None)
        if append is not None:
            append(added, str(path))
        else:  # readline builds without it: the whole history, this session's last
            editor.write_history_file(str(path))
    except OSError as error:
        logger.warning("chat history %s not saved: %s", path, error)


class _NativeRedraw:
    """What GNU readline offers and the `readline` module does not: `rl_clear_visible_line` (every
    screen line of the input), `rl_forced_update_display` (prompt and text again, the cursor where
    it was), and whether it is reading a line (`RL_STATE_CALLBACK`, the interface Python uses)."""

    _CALLBACK = 0x0080000  # RL_STATE_CALLBACK in readline.h, the same since readline 5

    def __init__(self, library: Any, libc: Any, state: Any) -> None:
        self._clear = library.rl_clear_visible_line
        self._redraw = library.rl_forced_update_display
        self._fflush = libc.fflush
        self._state = state

    def reading(self) -> bool:
        return bool(self._state.value & self._CALLBACK)

    def clear(self) -> None:
        self._clear()
        self._fflush(None)  # readline writes through C stdio; flush it before Python writes the record

    def redraw(self) -> None:
        self._redraw()
        self._fflush(None)


def native_redraw(editor: Any) -> _NativeRedraw | None:
    """`_NativeRedraw` when `editor` is the real `readline` module over GNU readline 7 or later, else None."""
    path = getattr(editor, "__file__", None)
    if not isinstance(editor, ModuleType) or not path or "libedit" in (editor.__doc__ or ""):
        return None
    try:
        import ctypes

        library = ctypes.CDLL(path)  # the module's library finds libreadline's symbols
        return _NativeRedraw(library, ctypes.CDLL(None), ctypes.c_ulong.in_dll(library, "rl_readline_state"))
    except (OSError, AttributeError, ValueError):  # not loadable, or readline older than 7.0
        return None
