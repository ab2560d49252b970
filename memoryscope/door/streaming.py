"""Text a writer function produces, handed on as it comes: the writer runs on a thread into a short
queue, so a large export streams with bounded memory."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["stream_of"]

_DONE = object()
_QUEUED_CHUNKS = 16


class _QueueWriter:
    """A text stream whose `write` hands each chunk to the queue (waiting while it is full)."""

    def __init__(self, chunks: queue.Queue[Any], stop: threading.Event) -> None:
        self._chunks = chunks
        self._stop = stop

    def write(self, text: str) -> int:
        while not self._stop.is_set():
            try:
                self._chunks.put(text, timeout=0.5)
                return len(text)
            except queue.Full:
                continue
        raise BrokenPipeError("the reader of the stream went away")

    def flush(self) -> None:
        return None


def stream_of(write_all: Callable[[Any], object]) -> Iterator[str]:
    """The chunks `write_all(stream)` writes, in order; its error is raised where the reader is."""
    chunks: queue.Queue[Any] = queue.Queue(maxsize=_QUEUED_CHUNKS)
    stop = threading.Event()
    failure: list[BaseException] = []

    def produce() -> None:
        try:
            write_all(_QueueWriter(chunks, stop))
        except BaseException as error:  # handed to the reader, who raises it
            failure.append(error)
        finally:
            while not stop.is_set():
                try:
                    chunks.put(_DONE, timeout=0.5)
                    break
                except queue.Full:
                    continue

    def consume() -> Iterator[str]:
        worker = threading.Thread(target=produce, name="memoryscope-export", daemon=True)
        worker.start()
        try:
            while (chunk := chunks.get()) is not _DONE:
                yield chunk
            if failure:
                raise failure[0]
        finally:
            stop.set()
            worker.join(timeout=5)

    return consume()
