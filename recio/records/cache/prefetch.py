"""``Prefetch``: a reader's next objects downloaded into its ``ShardCache`` in background
threads, in the order the reader will need them, as far as the cache's limit allows."""
from __future__ import annotations

import threading
from typing import Callable, List, Optional, Union

from recio import storage
from recio.records.cache.folder import LocalCopy, Stopped

#: one object's download for a prefetch: ``fetch(url, protect, stop)`` (see ``Prefetch``)
Fetch = Callable[[str, List[str], threading.Event], Union[LocalCopy, str]]


class Prefetch:
    """Downloads a reader's next objects in background threads (see ``ShardCache.prefetch``).

    ``fetch(url, protect, stop)`` downloads one object into the cache unless it finds another
    process downloading it or no room without evicting the objects at the URLs ``protect``,
    and gives the open ``LocalCopy``, ``"running"`` or ``"no room"``; it raises ``Stopped``
    when the event ``stop`` is set in the middle of a download."""

    def __init__(self, fetch: Fetch, urls: List[str], ahead: Optional[int],
                 threads: int) -> None:
        self.fetch, self.urls, self.ahead = fetch, urls, ahead
        self.position = 0  # the reader's: the index in ``urls`` it reads now
        self.error: Optional[BaseException] = None
        self._next = 0  # the next index a thread takes
        self._stopped = threading.Event()
        self._moved = threading.Condition()
        self._threads = [threading.Thread(target=self._run, name=f"recio-prefetch-{i}",
                                          daemon=True) for i in range(max(1, int(threads)))]
        for thread in self._threads:
            thread.start()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def reached(self, index: int) -> None:
        """The reader now reads ``urls[index]``: objects before it may be evicted, and with
        ``ahead`` the prefetch may go that much further."""
        with self._moved:
            self.position = max(self.position, int(index))
            self._moved.notify_all()

    def stop(self, wait: bool = False) -> None:
        """Stop downloading (a download in progress is abandoned, its ``.part`` deleted)."""
        self._stopped.set()
        with self._moved:
            self._moved.notify_all()
        if wait:
            self.join()

    def join(self, timeout: Optional[float] = None) -> None:
        """Wait for the threads to end (all downloaded, stopped, or out of room)."""
        for thread in self._threads:
            thread.join(timeout)

    def _take(self) -> Optional[int]:
        with self._moved:
            while not self._stopped.is_set():
                i = self._next
                if i >= len(self.urls):
                    return None
                if self.ahead is None or i <= self.position + self.ahead:
                    self._next = i + 1
                    return i
                self._moved.wait(0.5)
            return None

    def _run(self) -> None:
        try:
            while True:
                i = self._take()
                if i is None or not self._fetch(i):
                    return
        except Stopped:
            return
        except BaseException as exc:  # the reader's own open raises it again if it must
            self.error = exc

    def _fetch(self, i: int) -> bool:
        """Fetch ``urls[i]``; False to end the prefetch (stopped, or no room and no reader
        position to wait for)."""
        url = self.urls[i]
        if not storage.is_url(url):
            return True  # a local file: nothing to fetch
        while not self._stopped.is_set():
            with self._moved:
                position = self.position
            got = self.fetch(url, self.urls[position:], self._stopped)
            if isinstance(got, LocalCopy):
                got.close()
                return True
            if got != "no room":
                return True  # another process is downloading it
            if self.ahead is None:
                return False
            with self._moved:  # wait for the reader to move on and free something
                while self.position == position and not self._stopped.is_set():
                    self._moved.wait(0.5)
        return False
